package cliproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Re-executed as the child: CLIPROC_CHILD names what to do.
	switch os.Getenv("CLIPROC_CHILD") {
	case "":
		goleak.VerifyTestMain(m)
		return
	case "lines":
		os.Stdout.WriteString("one\r\n\n   \ntwo\nthree\r\r\n")
		os.Stdout.WriteString(strings.Repeat("x", 200000) + "\n")
		os.Stdout.WriteString("last-no-newline")
		os.Exit(0)
	case "env":
		os.Stdout.WriteString(os.Getenv("CLIPROC_A") + "|" + os.Getenv("CLIPROC_B") + "\n")
		os.Exit(0)
	case "stdin":
		b := make([]byte, 1<<20)
		n, _ := os.Stdin.Read(b)
		os.Stdout.WriteString("got:" + string(b[:n]) + "\n")
		os.Exit(4)
	case "stderr":
		os.Stderr.WriteString(strings.Repeat("E", 3*StderrKeep))
		os.Exit(7)
	case "grandchild":
		// Start a grandchild that would outlive us, print its pid, block.
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "CLIPROC_CHILD=sleep")
		if err := cmd.Start(); err != nil {
			os.Exit(9)
		}
		os.Stdout.WriteString(strconv.Itoa(cmd.Process.Pid) + "\n")
		select {}
	case "sleep":
		select {}
	case "host":
		os.Exit(playHost())
	case "argv0":
		os.Stdout.WriteString(os.Args[0] + "|" + os.Getenv("CONTEXTOS_CLIPROC_SUPERVISOR") + "\n")
		os.Exit(0)
	}
	os.Exit(99)
}

// fakeAgentScript is the agent CLI of the host scenario: it starts a
// grandchild in its process group, prints its parent's pid, its own and
// the grandchild's, and sleeps.
const fakeAgentScript = `sleep 300 & echo "$PPID $$ $!"; wait`

// playHost is the host scenario: a process running an agent CLI through
// Run, as a host does, that never cancels the run. It prints the line the
// CLI prints (the pids of the CLI's processes) and blocks until it is
// killed.
func playHost() int {
	if os.Getenv("CLIPROC_HOST_ON_TERM") == "exit" {
		// A host that handles SIGTERM by exiting, without cancelling its
		// runs.
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		go func() {
			<-term
			os.Exit(0)
		}()
	}
	printed := make(chan struct{})
	go Run(context.Background(), Cmd{Path: "/bin/sh", Args: []string{"-c", fakeAgentScript}}, func(l Line) {
		os.Stdout.WriteString(string(l.Bytes) + "\n")
		close(printed)
	})
	<-printed
	select {}
}

func child(t *testing.T, scenario string, env map[string]string) Cmd {
	t.Helper()
	e := map[string]string{"CLIPROC_CHILD": scenario}
	for k, v := range env {
		e[k] = v
	}
	return Cmd{Path: os.Args[0], Env: e}
}

func collect(lines *[]Line) func(Line) { return func(l Line) { *lines = append(*lines, l) } }

func TestLinesAreSplitTrimmedAndBounded(t *testing.T) {
	var lines []Line
	res, err := Run(context.Background(), child(t, "lines", nil), collect(&lines))
	if err != nil || !res.Status.Success() {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	want := []string{"one", "two", "three\r", strings.Repeat("x", 200000), "last-no-newline"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d", len(lines), len(want))
	}
	for i, w := range want {
		if string(lines[i].Bytes) != w || lines[i].TooLong != 0 {
			t.Errorf("line %d = %.40q (too long %d), want %.40q", i, lines[i].Bytes, lines[i].TooLong, w)
		}
	}
}

func TestReadLinesTooLongIsReportedByLengthOnly(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("s", MaxLineBytes+10)
	in := "a\n" + huge + "\nb\n" + huge // the last one without a newline
	for name, r := range map[string]func() *strings.Reader{"whole": func() *strings.Reader { return strings.NewReader(in) }} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var lines []Line
			readLines(iotest.HalfReader(r()), collect(&lines))
			if len(lines) != 4 {
				t.Fatalf("got %d lines", len(lines))
			}
			if string(lines[0].Bytes) != "a" || string(lines[2].Bytes) != "b" {
				t.Fatalf("short lines = %q %q", lines[0].Bytes, lines[2].Bytes)
			}
			for _, i := range []int{1, 3} {
				if lines[i].Bytes != nil || lines[i].TooLong != len(huge) {
					t.Errorf("line %d: bytes %d, TooLong %d, want %d", i, len(lines[i].Bytes), lines[i].TooLong, len(huge))
				}
			}
		})
	}
}

func TestEnvOverlayReachesOnlyTheChild(t *testing.T) {
	t.Setenv("CLIPROC_A", "parent-a")
	t.Setenv("CLIPROC_B", "parent-b")
	var lines []Line
	if _, err := Run(context.Background(), child(t, "env", map[string]string{"CLIPROC_B": "child-b"}), collect(&lines)); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || string(lines[0].Bytes) != "parent-a|child-b" {
		t.Fatalf("child saw %v", lines)
	}
	if os.Getenv("CLIPROC_B") != "parent-b" {
		t.Fatal("the parent's environment changed")
	}
	env := Environ(map[string]string{"CLIPROC_B": "x", "CLIPROC_Z": "z"})
	var bs []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "CLIPROC_B=") {
			bs = append(bs, kv)
		}
	}
	if len(bs) != 1 || bs[0] != "CLIPROC_B=x" || env[len(env)-1] != "CLIPROC_Z=z" {
		t.Fatalf("Environ: B entries %q, last %q", bs, env[len(env)-1])
	}
}

func TestStdinIsWrittenAndExitCodeKept(t *testing.T) {
	c := child(t, "stdin", nil)
	c.Stdin = []byte("the prompt\n")
	var lines []Line
	res, err := Run(context.Background(), c, collect(&lines))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status.Code != 4 || res.Status.Success() || res.Status.String() != "exit status 4" {
		t.Fatalf("status %+v", res.Status)
	}
	if len(lines) != 1 || string(lines[0].Bytes) != "got:the prompt" {
		t.Fatalf("lines %v", lines)
	}
}

func TestStderrIsCapped(t *testing.T) {
	res, err := Run(context.Background(), child(t, "stderr", nil), func(Line) {})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stderr) != StderrKeep || res.Status.Code != 7 {
		t.Fatalf("stderr %d bytes, status %+v", len(res.Stderr), res.Status)
	}
}

func TestSpawnFailure(t *testing.T) {
	_, err := Run(context.Background(), Cmd{Path: filepath.Join(t.TempDir(), "missing-binary")}, func(Line) {})
	if !errors.Is(err, ErrSpawn) {
		t.Fatalf("err = %v, want ErrSpawn", err)
	}
}

func TestContextEndKillsTheProcessGroup(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("process groups are unix")
	}
	ctx, cancel := context.WithCancel(context.Background())
	pid := make(chan int, 1)
	done := make(chan Result, 1)
	go func() {
		res, err := Run(ctx, child(t, "grandchild", nil), func(l Line) {
			n, _ := strconv.Atoi(string(bytes.TrimSpace(l.Bytes)))
			pid <- n
		})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	gc := <-pid
	cancel()
	res := <-done
	if res.Status.Signal != "killed" || res.Status.Code != -1 {
		t.Fatalf("status %+v, want killed", res.Status)
	}
	// The grandchild was in the group: it is gone (or a zombie being
	// reaped by init) within a generous bound.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := syscall.Kill(gc, 0)
		if errors.Is(err, syscall.ESRCH) || zombie(gc) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still alive after the group was killed", gc)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// zombie reports whether pid is a zombie (dead, not yet reaped).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	return ok && strings.HasPrefix(rest, "Z")
}

func TestLineOfExactlyMaxBytesIsKept(t *testing.T) {
	for _, term := range []string{"\n", "\r\n"} {
		var lines []Line
		readLines(strings.NewReader(strings.Repeat("a", MaxLineBytes)+term+"b\n"), collect(&lines))
		if len(lines) != 2 || len(lines[0].Bytes) != MaxLineBytes || lines[0].TooLong != 0 || string(lines[1].Bytes) != "b" {
			t.Fatalf("terminator %q: %d lines, first %d bytes, TooLong %d", term, len(lines), len(lines[0].Bytes), lines[0].TooLong)
		}
	}
}

// A CLI that exits while a background job it started keeps stdout open:
// Run returns once the grace has passed, and the job is killed with the
// group.
func TestExitWithStdoutHeldByABackgroundJob(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("process groups are unix")
	}
	var lines []Line
	res, err := Run(context.Background(), Cmd{Path: "/bin/sh", Args: []string{"-c", "sleep 300 & echo $!; exit 0"}}, collect(&lines))
	if err != nil || !res.Status.Success() {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if len(lines) != 1 {
		t.Fatalf("lines %v", lines)
	}
	pid, _ := strconv.Atoi(string(lines[0].Bytes))
	waitGone(t, pid)
}

// A mapper that panics does not leave the CLI running: the group is
// killed and reaped before the panic goes on.
func TestPanickingMapperKillsTheProcess(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("process groups are unix")
	}
	var pid int
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the mapper's panic was swallowed")
			}
		}()
		Run(context.Background(), Cmd{Path: "/bin/sh", Args: []string{"-c", "echo $$; exec sleep 300"}}, func(l Line) {
			pid, _ = strconv.Atoi(string(l.Bytes))
			panic("mapper bug")
		})
	}()
	if pid == 0 {
		t.Fatal("no pid read")
	}
	waitGone(t, pid)
}

func TestEndedContextSpawnsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	marker := filepath.Join(t.TempDir(), "spawned")
	_, err := Run(ctx, Cmd{Path: "/bin/sh", Args: []string{"-c", "touch " + marker}}, func(Line) {})
	if !errors.Is(err, ErrSpawn) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a process was spawned for an ended context")
	}
}

// waitGone waits (generously) until pid no longer runs.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || zombie(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A CLI that exits without reading a prompt bigger than the pipe buffer,
// while a job it started keeps stdin open, does not hold Run.
func TestUnreadPromptDoesNotHoldTheRun(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("process groups are unix")
	}
	c := Cmd{Path: "/bin/sh", Args: []string{"-c", "exec 3<&0; sleep 300 <&3 >/dev/null 2>&1 & exec 3<&-; echo $!; exit 0"}, Stdin: bytes.Repeat([]byte("p"), 1<<20)}
	var lines []Line
	res, err := Run(context.Background(), c, collect(&lines))
	if err != nil || !res.Status.Success() || len(lines) != 1 {
		t.Fatalf("Run = %+v, %v, %v", res, err, lines)
	}
	pid, _ := strconv.Atoi(string(lines[0].Bytes))
	waitGone(t, pid)
}

// A relative binary path is this process's, never one in the agent's
// working directory.
func TestRelativeBinaryIsResolvedAgainstTheCaller(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("shell scripts")
	}
	caller, agentDir := t.TempDir(), t.TempDir()
	for dir, say := range map[string]string{caller: "caller", agentDir: "PLANTED"} {
		if err := os.WriteFile(filepath.Join(dir, "fake"), []byte("#!/bin/sh\necho "+say+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(caller)
	var lines []Line
	if _, err := Run(context.Background(), Cmd{Path: "./fake", Dir: agentDir}, collect(&lines)); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || string(lines[0].Bytes) != "caller" {
		t.Fatalf("ran %v, want the caller's ./fake", lines)
	}
}

// A CLI backend's process group dies with the host process, however the
// host dies: SIGKILL (no code of the host runs) or SIGTERM with the
// default disposition (a host that did not cancel the run). The host is
// this test binary re-executed; its CLI is a shell script with a child of
// its own. Every process of the CLI's group is gone within the bound,
// polled, never slept on.
func TestHostDeathKillsTheProcessGroup(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a parent-death signal is Linux's")
	}
	for _, tc := range []struct {
		name   string
		sig    syscall.Signal
		onTerm string // the host's SIGTERM handling: "" the default (death), "exit"
	}{
		{"sigkill", syscall.SIGKILL, ""},
		{"sigterm", syscall.SIGTERM, ""},
		{"sigterm_handled_by_exiting", syscall.SIGTERM, "exit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			host := exec.Command(os.Args[0])
			host.Env = append(os.Environ(), "CLIPROC_CHILD=host", "CLIPROC_HOST_ON_TERM="+tc.onTerm)
			out, err := host.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := host.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				host.Process.Kill()
				host.Wait()
				t.Fatalf("the host printed %q: %v", line, err)
			}
			var pids []int
			for _, f := range strings.Fields(line) {
				pid, err := strconv.Atoi(f)
				if err != nil || pid <= 1 {
					t.Fatalf("the CLI printed %q", line)
				}
				pids = append(pids, pid)
			}
			if len(pids) != 3 {
				t.Fatalf("the CLI printed %q, want its parent's, its own and its child's pid", line)
			}
			t.Cleanup(func() {
				for _, pid := range pids {
					if alive(pid) {
						syscall.Kill(pid, syscall.SIGKILL) // a failed test leaves nothing behind
					}
				}
			})
			for _, pid := range pids {
				if !alive(pid) {
					t.Fatalf("process %d is gone before the host died", pid)
				}
			}
			if err := host.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			if err := host.Wait(); (err == nil) != (tc.onTerm == "exit") {
				t.Fatalf("the host ended with %v", err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for _, pid := range pids {
				for alive(pid) {
					if time.Now().After(deadline) {
						t.Fatalf("process %d (of %v: the supervisor, the CLI, its child) outlived the host", pid, pids)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
}

// alive reports whether pid runs (a zombie awaiting its reaping does not).
func alive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) && !zombie(pid)
}

// The CLI gets its own argv[0] and none of the supervisor's marks.
func TestTheCLISeesNoSupervisor(t *testing.T) {
	var lines []Line
	c := child(t, "argv0", nil)
	if _, err := Run(context.Background(), c, collect(&lines)); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || string(lines[0].Bytes) != os.Args[0]+"|" {
		t.Fatalf("the CLI saw %v, want its own path and no mark", lines)
	}
}

// A signal that ends the CLI is reported as the CLI's, not the
// supervisor's.
func TestSignalExitIsTheCLIs(t *testing.T) {
	res, err := Run(context.Background(), Cmd{Path: "/bin/sh", Args: []string{"-c", "kill -TERM $$"}}, func(Line) {})
	if err != nil || res.Status.Signal != "terminated" || res.Status.Code != -1 {
		t.Fatalf("Run = %+v, %v; want terminated", res.Status, err)
	}
}
