//go:build linux

package cliproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/contextos/contextos/agent"
)

// On Linux the CLI's process group dies with this process, however this
// process dies (SIGKILL included). A parent-death signal (Pdeathsig) alone
// cannot do it: it reaches only the direct child, and it fires when the
// thread that forked the child ends, not the process. So the CLI is not
// this process's child. The child is a supervisor: this very executable
// (/proc/self/exe) re-executed, which this package's init recognises
// before anything else of the program runs. It leads the process group,
// starts the CLI in it, reports the CLI's start and exit over a pipe, and
// gets SIGTERM as its parent-death signal: when this process dies it
// kills the whole group. The supervisor is started from a goroutine
// locked to its OS thread for the supervisor's whole life, so the signal
// fires on this process's death and never earlier; the CLI's own
// parent-death signal (SIGKILL) is bound to the supervisor's main thread.
//
// Where the executable cannot be re-executed (no /proc, or a program
// built as a C shared library or plugin, which never runs this package's
// init) the CLI is started directly, in its own process group, with the
// parent-death signal: the CLI dies with this process, what it started
// does not.

// The supervisor's marks: its argv[0] and an environment variable, both
// set only by start.
const (
	supervisorArg0 = "contextos-cliproc-supervisor"
	supervisorEnv  = "CONTEXTOS_CLIPROC_SUPERVISOR"
	supervisorMark = "v1"
)

// The supervisor's file descriptors: the status pipe, then the CLI's
// stdin, stdout and stderr.
const (
	fdStatus = 3 + iota
	fdStdin
	fdStdout
	fdStderr
)

func init() {
	if os.Getenv(supervisorEnv) != supervisorMark {
		return
	}
	// Only start sets the mark, and it is never passed on to the CLI: a
	// process that has it is a supervisor, or must not run at all (it
	// would run the host program as the host's child).
	if len(os.Args) < 4 || os.Args[0] != supervisorArg0 {
		os.Exit(126)
	}
	os.Exit(supervise(os.Args[1], os.Args[2], os.Args[3:]))
}

// selfExe is the executable to re-execute as the supervisor, "" when
// there is none.
var selfExe = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-buildmode" && s.Value != "exe" && s.Value != "pie" {
				return "" // the process is not this program: its init never runs
			}
		}
	}
	const self = "/proc/self/exe"
	if _, err := os.Stat(self); err != nil {
		return ""
	}
	return self
})

// start starts cmd under a supervisor (see above), or directly with a
// parent-death signal when there can be none. When ctx ends before the
// supervisor reported the CLI's start, the supervisor's group is killed.
func start(ctx context.Context, cmd *exec.Cmd) (*proc, error) {
	exe := selfExe()
	if exe == "" {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		ch := &proc{cmd: cmd, waited: make(chan struct{})}
		ch.exited = ch.waited
		if err := startLocked(ch); err != nil {
			return nil, err
		}
		return ch, nil
	}
	stdin, _ := cmd.Stdin.(*os.File)
	if stdin == nil {
		null, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		defer null.Close()
		stdin = null
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer statusW.Close()
	sup := &exec.Cmd{
		Path:        exe,
		Args:        append([]string{supervisorArg0, strconv.Itoa(os.Getpid()), cmd.Path}, cmd.Args...),
		Env:         append(slices.Clip(cmd.Env), supervisorEnv+"="+supervisorMark),
		Dir:         cmd.Dir,
		ExtraFiles:  []*os.File{statusW, stdin, cmd.Stdout.(*os.File), cmd.Stderr.(*os.File)},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM},
	}
	ch := &proc{cmd: sup, exited: make(chan struct{}), waited: make(chan struct{})}
	if err := startLocked(ch); err != nil {
		statusR.Close()
		return nil, err
	}
	statusW.Close()
	stop := context.AfterFunc(ctx, func() { killGroup(sup) })
	lines := bufio.NewScanner(statusR)
	started := lines.Scan() && strings.HasPrefix(lines.Text(), "S ")
	stop()
	if !started {
		statusR.Close()
		killGroup(sup)
		<-ch.waited
		return nil, errors.New("cliproc: the supervisor could not start the process")
	}
	go func() {
		defer close(ch.exited)
		defer statusR.Close()
		if lines.Scan() {
			ch.reported = parseExit(lines.Text())
		}
	}()
	return ch, nil
}

// startLocked starts ch.cmd from a goroutine locked to its OS thread
// until the process was waited for: the process's parent-death signal is
// tied to that thread, which must not end (a locked goroutine that exits
// ends its thread) before the process does.
func startLocked(ch *proc) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := ch.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		ch.werr = ch.cmd.Wait()
		close(ch.waited)
	}()
	return <-started
}

// parseExit reads the supervisor's exit report ("X <code>" or
// "K <signal number>"); nil when it is neither.
func parseExit(s string) *agent.ExitStatus {
	word, num, _ := strings.Cut(s, " ")
	n, err := strconv.Atoi(num)
	if err != nil {
		return nil
	}
	switch word {
	case "X":
		return &agent.ExitStatus{Code: n}
	case "K":
		return &agent.ExitStatus{Code: -1, Signal: syscall.Signal(n).String()}
	}
	return nil
}

// supervise is the supervisor's whole life: start the CLI (path, argv) in
// this process's group, report its start and exit on the status pipe,
// then stay until the group is killed — by the host once the CLI's output
// has ended, or by this process when the host dies (SIGTERM, the
// parent-death signal). It returns only when the CLI could not start.
func supervise(hostPID, path string, argv []string) int {
	// The CLI's parent-death signal is tied to the thread that starts it:
	// this one, kept for the process's life.
	runtime.LockOSThread()
	for fd := fdStatus; fd <= fdStderr; fd++ {
		syscall.CloseOnExec(fd)
	}
	status := os.NewFile(fdStatus, "status")
	stdio := []*os.File{os.NewFile(fdStdin, "stdin"), os.NewFile(fdStdout, "stdout"), os.NewFile(fdStderr, "stderr")}
	host := make(chan os.Signal, 1)
	signal.Notify(host, syscall.SIGTERM)
	killAll := func() {
		_ = syscall.Kill(0, syscall.SIGKILL) // the group, this process included
		os.Exit(1)                           // not reached
	}
	if strconv.Itoa(os.Getppid()) != hostPID {
		killAll() // the host died before its signal could be caught
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, supervisorEnv+"=") })
	cli := &exec.Cmd{Path: path, Args: argv, Env: env, Stdin: stdio[0], Stdout: stdio[1], Stderr: stdio[2],
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	if err := cli.Start(); err != nil {
		fmt.Fprintln(status, "F")
		return 127
	}
	for _, f := range stdio {
		f.Close() // the CLI's alone: its output ends when the CLI's group closes it
	}
	fmt.Fprintln(status, "S", cli.Process.Pid)
	exited := make(chan struct{})
	go func() {
		_ = cli.Wait()
		close(exited)
	}()
	select {
	case <-host:
		killAll()
	case <-exited:
	}
	ws, _ := cli.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		fmt.Fprintln(status, "K", int(ws.Signal()))
	} else {
		fmt.Fprintln(status, "X", cli.ProcessState.ExitCode())
	}
	status.Close()
	<-host
	killAll()
	return 0
}
