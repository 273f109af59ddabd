//go:build unix

package codex

import "syscall"

// Flags for opening the CLI's last-message file: never follow a symlink,
// never block on a FIFO swapped in for it.
const (
	syscallNoFollow = syscall.O_NOFOLLOW
	syscallNonBlock = syscall.O_NONBLOCK
)
