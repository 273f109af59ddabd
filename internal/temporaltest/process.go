package temporaltest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// process is a running server process; its output goes to a log file.
type process struct {
	cmd    *exec.Cmd
	log    string        // the log file
	exited chan struct{} // closed once the process was waited for
	kills  sync.Once
}

// startProcess starts the server bin with the configuration cfg in dir,
// in a process group of its own (see setProcAttr).
func startProcess(bin, dir string, cfg config) (*process, error) {
	p := &process{log: filepath.Join(dir, "server.log"), exited: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		return nil, fmt.Errorf("temporaltest: %w", err)
	}
	p.cmd = exec.Command(bin, "--config-file", cfg.Path, "--allow-no-auth", "start")
	p.cmd.Dir = dir
	// The server reads its settings from TEMPORAL_* variables too; only
	// the configuration written for it counts.
	p.cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "TEMPORAL_") })
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	setProcAttr(p.cmd)
	started := make(chan error, 1)
	go func() {
		// A parent-death signal fires when the thread that started the
		// process ends: this goroutine keeps that thread until the
		// process was waited for.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logf.Close()
		if err := p.cmd.Start(); err != nil {
			started <- fmt.Errorf("temporaltest: start %s: %w", bin, err)
			close(p.exited)
			return
		}
		started <- nil
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// kill kills the process's group and waits until the process is gone.
func (p *process) kill() {
	p.kills.Do(func() {
		select {
		case <-p.exited:
		default:
			killGroup(p.cmd)
		}
	})
	<-p.exited
}

// logTail is the last 16 KB of the process's log.
func (p *process) logTail() string {
	f, err := os.Open(p.log)
	if err != nil {
		return fmt.Sprintf("(the log: %v)", err)
	}
	defer f.Close()
	const max = 16 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		_, _ = f.Seek(fi.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
