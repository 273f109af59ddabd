//go:build !unix

package codex

import "testing"

// groupGone is checked on unix only.
func groupGone(t *testing.T, pids ...int) { t.Helper() }
