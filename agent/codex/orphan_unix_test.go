//go:build unix

package codex

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contextos/contextos/agent/agenttest"
)

// A codex run's processes — the CLI and what it started — die with the
// host process, killed with SIGKILL or with SIGTERM, though the host never
// cancelled the run.
func TestCodexProcessesDieWithTheHost(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a parent-death signal is Linux's")
	}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "pids")
			host := exec.Command(os.Args[0])
			host.Env = append(os.Environ(), envHost+"=1", agenttest.PIDFileEnv+"="+pidfile)
			if err := host.Start(); err != nil {
				t.Fatal(err)
			}
			// The fake reports its sleeper child, then itself.
			var pids []int
			deadline := time.Now().Add(waitLimit)
			for len(pids) < 2 {
				if time.Now().After(deadline) {
					host.Process.Kill()
					host.Wait()
					t.Fatalf("the CLI reported %v", pids)
				}
				time.Sleep(10 * time.Millisecond)
				b, _ := os.ReadFile(pidfile)
				pids = pids[:0]
				for _, f := range strings.Fields(string(b)) {
					if n, err := strconv.Atoi(f); err == nil {
						pids = append(pids, n)
					}
				}
			}
			t.Cleanup(func() {
				for _, pid := range pids {
					if alive(pid) {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			if err := host.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			host.Wait()
			groupGone(t, pids...)
		})
	}
}
