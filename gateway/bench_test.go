package gateway_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

var noop = gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
	return &gateway.Outcome{Output: map[string]any{"ok": true}, Mutations: []string{"m:1"}}, nil
})

func benchFixture(b *testing.B) *fixture {
	return newFixture(b, lowValue, func(fx *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		rc.RunBudget.MaxToolCalls = 1 << 30
		rc.RunBudget.MaxCostCents = 1e12
	})
}

// BenchmarkAdapterDirect is the floor: the no-op adapter called directly.
func BenchmarkAdapterDirect(b *testing.B) {
	call := &gateway.Call{Capability: "lookup", Envelope: &gateway.ToolCallEnvelope{Args: map[string]any{"order_id": "ord_881"}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := noop.Call(ctx, call); err != nil {
			b.Fatal(err)
		}
	}
}

// benchReadOnly measures read-only lookup calls through every check, the
// lookup capability registered as given, the transcript going to sink.
func benchReadOnly(b *testing.B, lookup gateway.Capability, sink gateway.TranscriptSink) {
	f := benchFixture(b)
	reg, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: noop, Capabilities: map[string]gateway.Capability{"lookup": lookup}}}, &gateway.Options{Transcript: sink})
	if err != nil {
		b.Fatal(err)
	}
	run := rebind(b, f, reg)
	req := lookupCall()
	b.ReportAllocs()
	for b.Loop() {
		res, err := run.Call(ctx, req)
		if err != nil || res.Status != gateway.StatusOK {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkGatewayCallReadOnly: a read-only call through every check.
func BenchmarkGatewayCallReadOnly(b *testing.B) {
	benchReadOnly(b, gateway.Capability{ArgsSchema: lookupSchema}, gateway.NewMemoryTranscript())
}

// BenchmarkGatewayCallReadOnlyHonorsContext: the same with an adapter
// declared to honour its context (no watchdog goroutine).
func BenchmarkGatewayCallReadOnlyHonorsContext(b *testing.B) {
	benchReadOnly(b, gateway.Capability{ArgsSchema: lookupSchema, HonorsContext: true}, gateway.NewMemoryTranscript())
}

// BenchmarkGatewayCallWrite: a write call with idempotency, schema
// validation and policy; each iteration is a new step (a new key).
func BenchmarkGatewayCallWrite(b *testing.B) {
	f := benchFixture(b)
	reg, _ := gateway.New([]gateway.Registration{{AdapterID: "adp_payments", Adapter: noop, Capabilities: map[string]gateway.Capability{"issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}}}}}, &gateway.Options{Transcript: gateway.NewMemoryTranscript()})
	run := rebind(b, f, reg)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		req := refundCall(1200)
		req.Step = i
		req.IdempotencyKey = "ik_bench_" + strconv.Itoa(i)
		i++
		res, err := run.Call(ctx, req)
		if err != nil || res.Status != gateway.StatusCompleted {
			b.Fatal(res, err)
		}
	}
}

// countingSink keeps only a count: a durable host sink writes entries out
// of the process, so the process's heap does not grow with every call.
type countingSink struct{ n int }

func (s *countingSink) Append(context.Context, gateway.TranscriptEntry) error { s.n++; return nil }

// BenchmarkGatewayCallReadOnlyDurableSink: the HonorsContext call with a
// sink that keeps nothing in the process (what a host with a durable
// transcript store sees); the in-memory sink's growing heap is left out.
func BenchmarkGatewayCallReadOnlyDurableSink(b *testing.B) {
	sink := &countingSink{}
	benchReadOnly(b, gateway.Capability{ArgsSchema: lookupSchema, HonorsContext: true}, sink)
	if sink.n < 2*b.N {
		b.Fatalf("sink saw %d entries for %d calls", sink.n, b.N)
	}
}
