package cliproc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
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
	}
	os.Exit(99)
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
