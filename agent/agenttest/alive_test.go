//go:build unix

package agenttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

type errRecorder struct{ errs []string }

func (r *errRecorder) Helper() {}
func (r *errRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestProcessCheckCatchesALeftBehindProcess: a backend that stops reading
// its process on cancel but leaves it running fails the suite's check.
func TestProcessCheckCatchesALeftBehindProcess(t *testing.T) {
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	pidfile := filepath.Join(t.TempDir(), "pids")
	if err := os.WriteFile(pidfile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var rec errRecorder
	checkProcessesGone(&rec, pidfile, 100*time.Millisecond)
	if len(rec.errs) != 1 {
		t.Fatalf("a live process passed the check: %v", rec.errs)
	}
	cmd.Process.Kill()
	cmd.Wait()
	rec = errRecorder{}
	checkProcessesGone(&rec, pidfile, time.Minute)
	if len(rec.errs) != 0 {
		t.Fatalf("an ended process failed the check: %v", rec.errs)
	}
	// A file that is not a list of pids is a broken fake.
	os.WriteFile(pidfile, []byte("nope\n"), 0o600)
	checkProcessesGone(&rec, pidfile, time.Minute)
	if len(rec.errs) != 1 {
		t.Fatalf("garbage in the pid file passed: %v", rec.errs)
	}
}
