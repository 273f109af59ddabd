package decision

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// holderText names this process in a lock file.
func holderText() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("pid %d on %s\n", os.Getpid(), host)
}

// readHolder reads what a lock file names, bounded and printable only.
func readHolder(f *os.File) string {
	b := make([]byte, 128)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return ""
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.TrimSpace(string(b[:n])))
}
