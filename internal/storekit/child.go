package storekit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// The protocol between a multi-process test and the children it starts:
// the test binary re-executed to run only TestMultiProcessChild, with
// the job (JSON) in the environment; the child prints the ready line,
// waits for the parent's go line on stdin (so every child starts its work
// at once), does the job and prints its result on one result line.
const (
	childEnv     = "CONTEXTOS_MP_JOB"
	childTest    = "TestMultiProcessChild"
	readyLine    = "MPREADY"
	resultPrefix = "MPRESULT "
)

// ChildJob decodes the job of a re-executed child into job. Run directly
// (no job in the environment), it skips t: the entry test has nothing to
// do.
func ChildJob(t *testing.T, job any) {
	t.Helper()
	raw := os.Getenv(childEnv)
	if raw == "" {
		t.Skip("helper process of the multi-process tests: runs only when a test re-executes the binary")
	}
	if err := json.Unmarshal([]byte(raw), job); err != nil {
		t.Fatalf("child: job: %v", err)
	}
}

// ChildReady tells the parent the child is ready and waits for its go.
func ChildReady(t *testing.T) {
	t.Helper()
	fmt.Println(readyLine)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("child: waiting for go: %v", err)
	}
}

// ChildResult prints the child's result for the parent.
func ChildResult(t *testing.T, result any) {
	t.Helper()
	b, err := json.Marshal(result)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(resultPrefix + string(b))
}

// Child is a running child process.
type Child struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ready  chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	out    bytes.Buffer // stdout and stderr, for failure messages
	result string       // the result line's JSON
	err    error        // cmd.Wait's
}

// StartChild starts the test binary as a child doing job (its package's
// TestMultiProcessChild reads it with ChildJob); it is killed when t ends
// if it still runs.
func StartChild(t *testing.T, name string, job any) *Child {
	t.Helper()
	b, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+childTest+"$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	c := &Child{name: name, cmd: cmd, ready: make(chan struct{}), done: make(chan struct{})}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &lockedWriter{c: c}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		readyOnce := sync.OnceFunc(func() { close(c.ready) })
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			switch {
			case line == readyLine:
				readyOnce()
			case strings.HasPrefix(line, resultPrefix):
				c.result = strings.TrimPrefix(line, resultPrefix)
			default:
				c.out.WriteString(line + "\n")
			}
			c.mu.Unlock()
		}
		err := cmd.Wait()
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

type lockedWriter struct{ c *Child }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.out.Write(b)
}

// Output is what the child printed besides its protocol lines.
func (c *Child) Output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// Done is closed when the child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Exit returns the child's result line (empty when it printed none) and
// its exit error; call it after Done.
func (c *Child) Exit() (result string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.result, c.err
}

// Release waits until every child is ready, then lets them all go.
func Release(t *testing.T, ctx context.Context, children ...*Child) {
	t.Helper()
	for _, c := range children {
		select {
		case <-c.ready:
		case <-c.done:
			_, err := c.Exit()
			t.Fatalf("%s exited before it was ready: %v\n%s", c.name, err, c.Output())
		case <-ctx.Done():
			t.Fatalf("%s not ready: %v\n%s", c.name, ctx.Err(), c.Output())
		}
	}
	for _, c := range children {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
}

// Result waits for the child to exit and decodes its result into v; a
// child that failed or printed no result fails t.
func (c *Child) Result(t *testing.T, ctx context.Context, v any) {
	t.Helper()
	select {
	case <-c.done:
	case <-ctx.Done():
		t.Fatalf("%s did not finish: %v\n%s", c.name, ctx.Err(), c.Output())
	}
	res, err := c.Exit()
	if err != nil || res == "" {
		t.Fatalf("%s failed (%v):\n%s", c.name, err, c.Output())
	}
	if err := json.Unmarshal([]byte(res), v); err != nil {
		t.Fatalf("%s: result: %v", c.name, err)
	}
}

// Kill SIGKILLs the child and waits until it is gone.
func (c *Child) Kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// FinanceLead approves the refund's finance gate.
var FinanceLead = contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}

// Context bounds a multi-process test: three minutes.
func Context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// AssertRecords checks the run's stored records have statuses want, in
// order, and the whole chain verifies.
func AssertRecords(t *testing.T, ctx context.Context, records decision.Store, runID string, want ...decision.Status) {
	t.Helper()
	recs, err := records.List(ctx, decision.Filter{RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	var got []decision.Status
	for _, r := range recs {
		got = append(got, r.Status)
	}
	if !slices.Equal(got, want) {
		t.Errorf("records of %s = %v, want %v", runID, got, want)
	}
	if err := records.Verify(ctx); err != nil {
		t.Errorf("Verify = %v", err)
	}
}
