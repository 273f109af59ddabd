// Package cliproc runs an agent CLI for the built-in backends: it spawns
// the process in its own process group with an environment laid over this
// process's (never changing this process's own), feeds its stdin, hands
// each stdout line to the backend's mapper, keeps a bounded prefix of
// stderr for classification only, kills the whole group when the run's
// context ends, and waits for the exit.
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

// Run starts c, calls onLine for each non-blank stdout line in order and
// returns once stdout reached its end and the process exited. When ctx is
// done it kills the process group and still waits for the exit.
func Run(ctx context.Context, c Cmd, onLine func(Line)) (Result, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = Environ(c.Env)
	setGroup(cmd)
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	stderr := &capped{max: StderrKeep}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Result{}, errors.Join(ErrSpawn, err)
	}
	if err := cmd.Start(); err != nil {
		return Result{}, errors.Join(ErrSpawn, err)
	}
	stopKill := context.AfterFunc(ctx, func() { killGroup(cmd) })
	defer stopKill()
	readLines(stdout, onLine)
	// Stdout ended: the process closed it or died. Wait for the exit; a
	// grandchild holding stderr open must not hold the run forever.
	cmd.WaitDelay = 5 * time.Second
	werr := cmd.Wait()
	res := Result{Status: exitStatus(cmd, werr), Stderr: stderr.Bytes()}
	return res, nil
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
			if len(long)+len(chunk) > MaxLineBytes {
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
				onLine(Line{TooLong: skipping + len(chunk)})
			default:
				line := chunk
				if len(long) > 0 {
					if len(long)+len(chunk) > MaxLineBytes {
						onLine(Line{TooLong: len(long) + len(chunk)})
						line = nil
					} else {
						line = append(long, chunk...)
					}
				}
				if line != nil {
					line = bytes.TrimSuffix(line, []byte("\n"))
					line = bytes.TrimSuffix(line, []byte("\r"))
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
