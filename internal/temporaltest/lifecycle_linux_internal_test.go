package temporaltest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
)

// gone waits up to a few seconds until process pid no longer exists.
func gone(pid int) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// refused reports whether nothing listens on hostPort any more.
func refused(hostPort string) bool {
	c, err := net.DialTimeout("tcp", hostPort, time.Second)
	if err == nil {
		c.Close()
	}
	return err != nil
}

// Start's server runs in a process group of its own, serves the
// namespace on the address Start returns (not the default port), and is
// gone with its directory and ports once the test ended.
func TestStartStopsTheServerWithTheTest(t *testing.T) {
	binary(t) // skips or fails like Start when no server is configured
	t.Parallel()
	var s *Server
	t.Run("server", func(t *testing.T) {
		s = Start(t)
		pid := s.proc.cmd.Process.Pid
		if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
			t.Errorf("server pgid = %d, %v; want its own group %d", pgid, err, pid)
		}
		if s.Namespace != Namespace {
			t.Errorf("Namespace = %q, want %q", s.Namespace, Namespace)
		}
		if strings.HasSuffix(s.HostPort, ":7233") {
			t.Errorf("HostPort = %s: the default port, not a free one", s.HostPort)
		}
		c := s.Dial(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := c.DescribeTaskQueue(ctx, "any", enumspb.TASK_QUEUE_TYPE_WORKFLOW); err != nil {
			t.Errorf("DescribeTaskQueue in %s: %v", s.Namespace, err)
		}
	})
	if s == nil {
		t.Fatal("no server started")
	}
	if !gone(s.proc.cmd.Process.Pid) {
		t.Errorf("the server (pid %d) still runs after its test ended", s.proc.cmd.Process.Pid)
	}
	if _, err := syscall.Getpgid(s.proc.cmd.Process.Pid); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the server's process group %d remains: %v", s.proc.cmd.Process.Pid, err)
	}
	if !refused(s.HostPort) {
		t.Errorf("something still listens on %s", s.HostPort)
	}
	if _, err := os.Stat(s.dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the server's directory %s remains: %v", s.dir, err)
	}
}

// envDyingChild marks the test binary re-executed by
// TestServerDiesWithTheTestProcess.
const envDyingChild = "CONTEXTOS_TEMPORALTEST_DYING_CHILD"

// A test process that dies without its cleanups (SIGKILL; a test
// binary's timeout panics past them too) takes its server with it.
func TestServerDiesWithTheTestProcess(t *testing.T) {
	if os.Getenv(envDyingChild) != "" {
		s := Start(t)
		fmt.Printf("SERVER %d %s %s\n", s.proc.cmd.Process.Pid, s.HostPort, s.dir)
		select {} // until killed
	}
	binary(t) // skips or fails like Start when no server is configured
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTheTestProcess$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), envDyingChild+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	var pid int
	var hostPort, dir string
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "SERVER %d %s %s", &pid, &hostPort, &dir); err == nil {
			break
		}
	}
	if pid == 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child reported no server:\n%s", stderr.String())
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the server %d does not run: %v", pid, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	_ = os.RemoveAll(dir) // the dead process's, left behind
	if !gone(pid) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		t.Fatalf("the server (pid %d) outlived its SIGKILLed test process", pid)
	}
	if !refused(hostPort) {
		t.Errorf("something still listens on %s", hostPort)
	}
}

// The server runs on the configuration Start writes, whatever TEMPORAL_*
// settings the test's environment holds.
func TestStartIgnoresTemporalEnvironment(t *testing.T) {
	binary(t) // skips or fails like Start when no server is configured
	t.Setenv("TEMPORAL_ENVIRONMENT", "production")
	t.Setenv("TEMPORAL_SERVICES", "history")
	s := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Dial(t).DescribeTaskQueue(ctx, "any", enumspb.TASK_QUEUE_TYPE_WORKFLOW); err != nil {
		t.Errorf("DescribeTaskQueue in %s: %v", s.Namespace, err)
	}
}
