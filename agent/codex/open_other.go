//go:build !unix

package codex

const (
	syscallNoFollow = 0
	syscallNonBlock = 0
)
