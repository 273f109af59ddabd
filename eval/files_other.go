//go:build !unix

package eval

import "os"

// openFlags open a golden file for reading.
const openFlags = os.O_RDONLY
