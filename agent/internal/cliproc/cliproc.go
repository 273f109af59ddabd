// Package cliproc runs an agent CLI for the built-in backends: it spawns
// the process in its own process group with an environment laid over this
// process's (never changing this process's own), feeds its stdin, hands
// each stdout line to the backend's mapper, keeps a bounded prefix of
// stderr for classification only, kills the whole group when the run's
// context ends, and waits for the exit.
//
// On Linux the group also dies with this process, whatever kills it
// (SIGKILL, a SIGTERM it does not handle, an exit that did not cancel the
// run): the CLI runs under a small supervisor — this executable
// re-executed, recognised by this package's init before the program's
// main runs — that leads the group and kills it on this process's death
// (a parent-death signal, bound to an OS thread kept for the supervisor's
// whole life). Other systems have no parent-death signal: there the group
// dies with the run's context, not with this process.
package cliproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/contextos/contextos/agent"
)

// MaxLineBytes bounds one stdout line; a longer line is skipped and
// reported to the mapper by its length only.
const MaxLineBytes = 16 << 20

// StderrKeep is how much of stderr is kept for classification.
const StderrKeep = 64 << 10

// Cmd is one process to run.
type Cmd struct {
	Path string
	Args []string
	// Dir is the working directory ("" inherits this process's).
	Dir string
	// Env is laid over this process's environment, in sorted key order.
	Env map[string]string
	// Stdin is written to the process's stdin, which is then closed; nil
	// gives it /dev/null.
	Stdin []byte
}

// Line is one stdout line: its bytes (one trailing \r removed), or, for a
// line over MaxLineBytes, only its length in TooLong.
type Line struct {
	Bytes   []byte
	TooLong int
}

// Result is how the process ended.
type Result struct {
	Status agent.ExitStatus
	// Stderr is the first StderrKeep bytes of stderr: for classifying
	// failures, never for messages or events.
	Stderr []byte
}

// ErrSpawn wraps a failure to start the process.
var ErrSpawn = errors.New("cliproc: cannot start process")

// ExitGrace is how long Run waits, after the process exited, for stdout
// and stderr to reach their end; then whatever still holds them (a background job the
// CLI left behind) is killed with the rest of the process group.
const ExitGrace = 5 * time.Second

// Run starts c, calls onLine for each non-blank stdout line in order and
// returns once stdout reached its end and the process exited. When ctx is
// done it kills the process group and still waits for the exit. Nothing
// the CLI started outlives the run: once the process exited, its process
// group is killed (at once if stdout has ended, else after ExitGrace). A
// panic in onLine kills the group and waits for the exit before it goes
// on up. On Linux the group also dies with this process, however it
// dies (see the package doc).
func Run(ctx context.Context, c Cmd, onLine func(Line)) (res Result, err error) {
	if err := ctx.Err(); err != nil {
		return Result{}, errors.Join(ErrSpawn, err)
	}
	// A relative path names a binary relative to this process's working
	// directory, not the agent's (os/exec would resolve it against Dir: an
	// executable planted in the repository would run instead).
	path := c.Path
	if strings.ContainsRune(path, filepath.Separator) || strings.ContainsRune(path, '/') {
		abs, err := filepath.Abs(path)
		if err != nil {
			return Result{}, errors.Join(ErrSpawn, err)
		}
		path = abs
	}
	cmd := exec.Command(path, c.Args...)
	if cmd.Err != nil {
		return Result{}, errors.Join(ErrSpawn, cmd.Err)
	}
	cmd.Dir = c.Dir
	cmd.Env = Environ(c.Env)
	// stdin is our own pipe too: a CLI that exits without reading its
	// prompt, while a job it left holds stdin, must not hold Wait.
	var inW *os.File
	if c.Stdin != nil {
		inR, w, err := os.Pipe()
		if err != nil {
			return Result{}, errors.Join(ErrSpawn, err)
		}
		defer inR.Close()
		cmd.Stdin, inW = inR, w
	}
	// Our own pipes, so the exit is observed while a background job the
	// CLI left behind still holds stdout or stderr open.
	pr, pw, err := os.Pipe()
	if err != nil {
		if inW != nil {
			inW.Close()
		}
		return Result{}, errors.Join(ErrSpawn, err)
	}
	er, ew, err := os.Pipe()
	if err != nil {
		for _, f := range []*os.File{pr, pw, inW} {
			if f != nil {
				f.Close()
			}
		}
		return Result{}, errors.Join(ErrSpawn, err)
	}
	cmd.Stdout, cmd.Stderr = pw, ew
	ch, err := start(ctx, cmd)
	pw.Close()
	ew.Close()
	if err != nil {
		for _, f := range []*os.File{pr, er, inW} {
			if f != nil {
				f.Close()
			}
		}
		return Result{}, errors.Join(ErrSpawn, err)
	}
	stdinDone := make(chan struct{})
	if inW != nil {
		go func() {
			defer close(stdinDone)
			inW.Write(c.Stdin) // an error: the CLI closed stdin or exited
			inW.Close()
		}()
	} else {
		close(stdinDone)
	}
	stderr := &capped{max: StderrKeep}
	stderrDone := make(chan struct{})
	go func() {
		io.Copy(stderr, er)
		close(stderrDone)
	}()
	readDone := make(chan struct{})
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		<-ch.exited
		grace := time.NewTimer(ExitGrace)
		defer grace.Stop()
	wait:
		for _, done := range []chan struct{}{readDone, stderrDone} {
			select {
			case <-done:
			case <-grace.C:
				break wait
			}
		}
		killGroup(ch.cmd)
		pr.Close() // unblocks reads held open by a process outside the group
		er.Close()
		if inW != nil {
			inW.Close() // unblocks a prompt write nobody reads
		}
		<-ch.waited
	}()
	stopKill := context.AfterFunc(ctx, func() { killGroup(ch.cmd) })
	defer func() {
		if p := recover(); p != nil {
			killGroup(ch.cmd)
			close(readDone)
			<-reaped
			stopKill()
			panic(p)
		}
	}()
	readLines(pr, onLine)
	close(readDone)
	<-reaped
	<-stderrDone
	<-stdinDone
	stopKill()
	return Result{Status: ch.status(), Stderr: stderr.Bytes()}, nil
}

// proc is a started CLI: what start returns.
type proc struct {
	cmd *exec.Cmd // the process started: the CLI, or its supervisor
	// exited is closed once the CLI exited; waited once cmd's process
	// was waited for (after exited; a supervisor stays until its group
	// is killed).
	exited, waited chan struct{}
	werr           error             // cmd.Wait's, once waited is closed
	reported       *agent.ExitStatus // the CLI's exit as its supervisor reported it, once exited is closed
}

// status is how the CLI ended: its supervisor's report, else how the
// process started ended.
func (c *proc) status() agent.ExitStatus {
	if c.reported != nil {
		return *c.reported
	}
	return exitStatus(c.cmd, c.werr)
}

// readLines splits r into lines, removing one trailing \r and skipping
// blank lines; it reads r to its end.
func readLines(r io.Reader, onLine func(Line)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	skipping := 0
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if skipping > 0 {
				skipping += len(chunk)
				continue
			}
			if len(long)+len(chunk) > MaxLineBytes+2 { // room for "\r\n"
				skipping = len(long) + len(chunk)
				long = nil
				continue
			}
			long = append(long, chunk...)
			continue
		}
		if len(chunk) > 0 || skipping > 0 || len(long) > 0 {
			switch {
			case skipping > 0:
				onLine(Line{TooLong: skipping + len(bytes.TrimSuffix(chunk, []byte("\n")))})
			default:
				line := chunk
				if len(long) > 0 {
					line = append(long, chunk...)
				}
				line = bytes.TrimSuffix(line, []byte("\n"))
				line = bytes.TrimSuffix(line, []byte("\r"))
				if len(line) > MaxLineBytes {
					onLine(Line{TooLong: len(line)})
					line = nil
				}
				if line != nil {
					if len(bytes.TrimSpace(line)) > 0 {
						onLine(Line{Bytes: bytes.Clone(line)})
					}
				}
			}
			long, skipping = nil, 0
		}
		if err != nil {
			return
		}
	}
}

// Environ returns this process's environment with overlay laid over it
// (overlay keys sorted, each replacing any inherited entry).
func Environ(overlay map[string]string) []string {
	base := os.Environ()
	out := make([]string, 0, len(base)+len(overlay))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := overlay[k]; !over {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(overlay)) {
		out = append(out, k+"="+overlay[k])
	}
	return out
}

// capped keeps the first max bytes written to it and discards the rest.
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (c *capped) Bytes() []byte { return bytes.Clone(c.buf.Bytes()) }
