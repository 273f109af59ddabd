//go:build unix

package eval

import (
	"os"
	"syscall"
)

// openFlags open a golden file without blocking: a file swapped for a
// named pipe between its check and its open does not hang the open (the
// check after it refuses it).
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK
