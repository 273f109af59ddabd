//go:build unix

package agenttest

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processAlive reports whether pid runs (a zombie awaiting its parent's
// reaping counts as ended).
func processAlive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err) // no /proc (darwin): kill said it runs
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	return !(ok && strings.HasPrefix(rest, "Z"))
}
