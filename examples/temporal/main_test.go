package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/contextos/contextos/internal/temporaltest"
	"github.com/contextos/contextos/temporalrun"
)

// childArgsEnv, when set, makes the test binary run the command once
// with these arguments (a JSON list) and exit with its code: the test
// approves from a separate process this way.
const childArgsEnv = "TEMPORAL_EXAMPLE_ARGS"

func TestMain(m *testing.M) {
	if raw, ok := os.LookupEnv(childArgsEnv); ok {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			os.Stderr.WriteString("temporal example child: " + err.Error() + "\n")
			os.Exit(3)
		}
		os.Exit(cli(context.Background(), args, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// syncBuffer is a buffer the run writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The example on a real server: run pauses at the finance gate, approve
// in another process answers it with an Update, and the run finishes
// DECIDED with payments called once.
func TestExample(t *testing.T) {
	srv := temporaltest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	flags := []string{"-server", srv.HostPort, "-namespace", srv.Namespace}
	var out, errs syncBuffer
	done := make(chan int, 1)
	go func() { done <- cli(ctx, append(flags, "run"), &out, &errs) }()

	c, err := client.Dial(srv.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for !strings.Contains(out.String(), "paused") {
		select {
		case code := <-done:
			t.Fatalf("run exited %d before pausing:\n%s%s", code, out.String(), errs.String())
		case <-ctx.Done():
			t.Fatalf("run did not pause:\n%s%s", out.String(), errs.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if p, err := temporalrun.Pending(ctx, c, "refund-ord_881"); err != nil || p == nil || p.GateID != "GATE_FINANCE_APPROVAL" {
		t.Fatalf("pending = %+v, %v", p, err)
	}

	args, _ := json.Marshal(append(flags, "approve"))
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(args))
	approved, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("approve: %v\n%s", err, approved)
	}
	if !strings.Contains(string(approved), "approved GATE_FINANCE_APPROVAL by user_finance_lead_77 (finance_lead)") {
		t.Errorf("approve printed:\n%s", approved)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("run exited %d:\n%s%s", code, out.String(), errs.String())
		}
	case <-ctx.Done():
		t.Fatalf("run did not finish:\n%s%s", out.String(), errs.String())
	}
	for _, want := range []string{
		"adp_payments.issue_refund  completed",
		"decision DECIDED approved (payments called 1 time)",
		"records  DEFERRED, DECIDED, CLOSED",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("run output lacks %q:\n%s", want, out.String())
		}
	}
}
