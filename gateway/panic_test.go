package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/runcontext"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records returns the JSON log records written.
func (s *syncBuffer) records(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

const panicValue = "boom: secret backend state 4111111111111111"

// An adapter that panics gives a failed result that is returned and
// recorded, and Call's error matches ErrAdapterPanic, on the caller's
// goroutine (an adapter that honours its context) and on the watchdog's;
// the panic value and stack go to the log at Error level, nowhere else.
func TestAdapterPanic(t *testing.T) {
	t.Parallel()
	for _, honors := range []bool{true, false} {
		name := "watchdog goroutine"
		if honors {
			name = "caller's goroutine"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			logs := &syncBuffer{}
			run := ordersRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
				panic(panicValue)
			}), gateway.Capability{ArgsSchema: lookupSchema, HonorsContext: honors, MaxAttempts: 3},
				&gateway.Options{Transcript: canonChecked{t, f.recorder}, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
			res, err := run.Call(ctx, lookupCall())
			if !errors.Is(err, gateway.ErrAdapterPanic) {
				t.Errorf("Call error = %v, want ErrAdapterPanic", err)
			}
			if res == nil {
				t.Fatal("no result returned with the panic")
			}
			if res.Status != gateway.StatusFailed || res.Error == nil || res.Error.Code != gateway.CodeExecutionFailed || res.Error.Message != "the adapter panicked" || res.Error.Retryable || res.Metadata.Attempts != 1 {
				t.Errorf("result = %s %+v attempts %d, want failed execution_failed \"the adapter panicked\" after one attempt", res.Status, res.Error, res.Metadata.Attempts)
			}
			b, _ := json.Marshal(res)
			if strings.Contains(string(b), "4111111111111111") || strings.Contains(string(b), "goroutine") || strings.Contains(err.Error(), "4111111111111111") {
				t.Errorf("the panic value or stack reached the result or error: %s / %v", b, err)
			}
			results := f.recorder.Results()
			if len(results) != 1 || results[0].ToolCallID != res.ToolCallID || results[0].Status != gateway.StatusFailed || res.Metadata.ToolTranscriptID == "" {
				t.Errorf("recorded results = %+v, want the failed result", results)
			}
			if _, err := gateway.VerifyTranscript(f.recorder.Entries()); err != nil {
				t.Errorf("transcript chain: %v", err)
			}
			recs := logs.records(t)
			var logged map[string]any
			for _, r := range recs {
				if r["msg"] == "adapter panicked" {
					logged = r
				}
			}
			if logged == nil || logged["level"] != "ERROR" || logged["panic_type"] != "string" || strings.Contains(fmt.Sprint(recs), panicValue) || logged["tool_call_id"] != res.ToolCallID ||
				!strings.Contains(logged["stack"].(string), "goroutine") || !strings.Contains(logged["stack"].(string), "panic_test.go") {
				t.Errorf("log records = %v, want one Error record with the panic's type (never its value) and the stack", recs)
			}
		})
	}
}

// A write whose adapter panics completes its idempotency claim with the
// failed result: the same write again is a duplicate and never runs.
func TestAdapterPanicWriteKept(t *testing.T) {
	f := newFixture(t, lowValue, func(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		fx.payments = gatewaytest.NewScriptedAdapter()
		fx.payments.On("issue_refund").Panic()
	})
	res, err := f.run.Call(ctx, refundCall(1200))
	if !errors.Is(err, gateway.ErrAdapterPanic) || res.Status != gateway.StatusFailed {
		t.Fatalf("refund = %s, %v; want failed with ErrAdapterPanic", res.Status, err)
	}
	again, err := f.run.Call(ctx, refundCall(1200))
	if err != nil || !again.Metadata.Duplicate || again.Status != gateway.StatusFailed || again.Error.Message != "the adapter panicked" {
		t.Errorf("the same refund again = %s duplicate %v %+v, %v", again.Status, again.Metadata.Duplicate, again.Error, err)
	}
	if n := f.payments.CallCount("issue_refund"); n != 1 {
		t.Errorf("issue_refund ran %d times, want once", n)
	}
}
