package gatewaytest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
)

func TestScriptedAdapterConformance(t *testing.T) {
	gatewaytest.RunAdapterTests(t, func(t *testing.T) gatewaytest.AdapterHarness {
		a := gatewaytest.NewScriptedAdapter()
		a.On("lookup").ReturnOutput(map[string]any{"ok": true})
		a.On("slow").ReturnOutput(nil).Delay(5 * time.Second)
		env := func(c string) *gateway.ToolCallEnvelope {
			return &gateway.ToolCallEnvelope{CapabilityID: "adp_x." + c, Args: map[string]any{}}
		}
		return gatewaytest.AdapterHarness{
			Adapter: a,
			Valid:   &gateway.Call{Envelope: env("lookup"), Capability: "lookup", Attempt: 1},
			Invalid: &gateway.Call{Envelope: env("nope"), Capability: "nope", Attempt: 1},
			Slow:    &gateway.Call{Envelope: env("slow"), Capability: "slow", Attempt: 1},
		}
	})
}

func TestMemoryIdempotencyConformance(t *testing.T) {
	gatewaytest.RunIdempotencyStoreTests(t, func(*testing.T) gateway.IdempotencyStore { return gateway.NewMemoryIdempotency() })
}

func TestMemoryApprovalLogConformance(t *testing.T) {
	gatewaytest.RunApprovalLogTests(t, func(*testing.T) gateway.ApprovalLog { return gateway.NewMemoryApprovalLog() })
}

func TestTranscriptSinkConformance(t *testing.T) {
	t.Run("MemoryTranscript", func(t *testing.T) {
		gatewaytest.RunTranscriptSinkTests(t, func(*testing.T) (gateway.TranscriptSink, func() []gateway.TranscriptEntry) {
			m := gateway.NewMemoryTranscript()
			return m, func() []gateway.TranscriptEntry { return m.Entries("") }
		})
	})
	t.Run("MemoryTranscriptLimit", func(t *testing.T) {
		gatewaytest.RunTranscriptSinkTests(t, func(*testing.T) (gateway.TranscriptSink, func() []gateway.TranscriptEntry) {
			m := gateway.NewMemoryTranscriptLimit(2)
			return m, func() []gateway.TranscriptEntry { return m.Entries("") }
		})
	})
	t.Run("Recorder", func(t *testing.T) {
		gatewaytest.RunTranscriptSinkTests(t, func(*testing.T) (gateway.TranscriptSink, func() []gateway.TranscriptEntry) {
			r := &gatewaytest.Recorder{}
			return r, r.Entries
		})
	})
}

func TestTranscriptReaderConformance(t *testing.T) {
	t.Run("MemoryTranscript", func(t *testing.T) {
		gatewaytest.RunTranscriptReaderTests(t, func(*testing.T) (gateway.TranscriptSink, gateway.TranscriptReader) {
			m := gateway.NewMemoryTranscript()
			return m, m
		})
	})
	t.Run("Recorder", func(t *testing.T) {
		gatewaytest.RunTranscriptReaderTests(t, func(*testing.T) (gateway.TranscriptSink, gateway.TranscriptReader) {
			r := &gatewaytest.Recorder{}
			return r, r
		})
	})
}

func TestScriptedAdapterMatchersAndSequences(t *testing.T) {
	a := gatewaytest.NewScriptedAdapter()
	a.On("get").WhenArgs(map[string]any{"id": "a"}).ReturnOutput(map[string]any{"v": 1})
	a.On("get").FailRetryable("busy").ReturnOutput(map[string]any{"v": 2})
	call := func(id string) (*gateway.Outcome, error) {
		return a.Call(t.Context(), &gateway.Call{Capability: "get", Envelope: &gateway.ToolCallEnvelope{Args: map[string]any{"id": id}}})
	}
	if out, err := call("a"); err != nil || out.Output["v"] != 1 {
		t.Errorf("matcher: %v %v", out, err)
	}
	if _, err := call("b"); err == nil {
		t.Error("sequence step 1 should fail")
	}
	if out, err := call("b"); err != nil || out.Output["v"] != 2 {
		t.Errorf("sequence step 2: %v %v", out, err)
	}
	if out, _ := call("b"); out.Output["v"] != 2 {
		t.Error("the last step should repeat")
	}
	if a.CallCount("get") != 4 {
		t.Errorf("CallCount = %d", a.CallCount("get"))
	}
	a.Reset()
	if len(a.Calls()) != 0 {
		t.Error("Reset kept calls")
	}
}

// Spending makes a step report what its attempt spent: a failing step
// returns it beside its error, a succeeding one on its outcome; a step
// without it reports nothing.
func TestScriptedAdapterSpending(t *testing.T) {
	a := gatewaytest.NewScriptedAdapter()
	a.On("run").Fail("exit 3").Spending(25, 2484).ReturnOutput(map[string]any{"ok": true}).Spending(1, 7).Fail("plain")
	call := func() (*gateway.Outcome, error) {
		return a.Call(t.Context(), &gateway.Call{Capability: "run", Envelope: &gateway.ToolCallEnvelope{}})
	}
	if out, err := call(); err == nil || out == nil || out.CostCents != 25 || out.Tokens != 2484 || out.Output != nil {
		t.Errorf("failing step: %+v, %v; want its error and 25 cents, 2484 tokens beside it", out, err)
	}
	if out, err := call(); err != nil || out.Output["ok"] != true || out.CostCents != 1 || out.Tokens != 7 {
		t.Errorf("succeeding step: %+v, %v", out, err)
	}
	if out, err := call(); err == nil || out != nil {
		t.Errorf("step without Spending: %+v, %v; want only its error", out, err)
	}
	// A step its context cuts off during its delay returns its spend
	// beside the context's error.
	slow := gatewaytest.NewScriptedAdapter()
	slow.On("run").ReturnOutput(map[string]any{"ok": true}).Delay(time.Hour).Spending(3, 40)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if out, err := slow.Call(ctx, &gateway.Call{Capability: "run", Envelope: &gateway.ToolCallEnvelope{}}); !errors.Is(err, context.Canceled) || out == nil || out.CostCents != 3 || out.Tokens != 40 || out.Output != nil {
		t.Errorf("cut-off step: %+v, %v; want context.Canceled and 3 cents, 40 tokens beside it", out, err)
	}
}
