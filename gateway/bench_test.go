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

// discardSink keeps only a count: a durable host sink writes entries out
// of the process, so the process's heap does not grow with every call. The
// sink's own cost is the host's, as the adapter's is; the benchmarks below
// measure the gateway between the two.
type discardSink struct{ n int }

func (s *discardSink) Append(context.Context, gateway.TranscriptEntry) error { s.n++; return nil }

// benchReadOnly measures read-only lookup calls through every check, the
// lookup capability registered as given, the transcript going to sink.
func benchReadOnly(b *testing.B, lookup gateway.Capability, sink gateway.TranscriptSink) {
	f := benchFixture(b)
	run := ordersRun(b, f, noop, lookup, &gateway.Options{Transcript: sink})
	req := lookupCall()
	b.ReportAllocs()
	for b.Loop() {
		res, err := run.Call(ctx, req)
		if err != nil || res.Status != gateway.StatusOK {
			b.Fatal(res, err)
		}
	}
	if d, ok := sink.(*discardSink); ok && d.n < 2*b.N {
		b.Fatalf("the sink saw %d entries for %d calls", d.n, b.N)
	}
}

// BenchmarkGatewayCallReadOnly: a read-only call through every check
// (surfacing, schema, payload, per-call policy binding, modes, budget),
// recorded as two hashed, chained transcript entries, with the per-attempt
// timeout, span and redaction; the no-op adapter is registered as every
// shipped transport registers (HonorsContext). Less BenchmarkAdapterDirect,
// this is the gateway's overhead.
func BenchmarkGatewayCallReadOnly(b *testing.B) {
	benchReadOnly(b, gateway.Capability{ArgsSchema: lookupSchema, HonorsContext: true}, &discardSink{})
}

// BenchmarkGatewayCallReadOnlyObserved: BenchmarkGatewayCallReadOnly with
// an observer set as RunOptions.Observe, which is told a copy of each
// attempt (the runtime's own recorder is told the gateway's, with no copy).
func BenchmarkGatewayCallReadOnlyObserved(b *testing.B) {
	f := benchFixture(b)
	gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: noop,
		Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema, HonorsContext: true}}}}, &gateway.Options{Transcript: &discardSink{}})
	if err != nil {
		b.Fatal(err)
	}
	seen := 0
	run, err := gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)},
		&gateway.RunOptions{Observe: func(gateway.Attempt) { seen++ }})
	if err != nil {
		b.Fatal(err)
	}
	req := lookupCall()
	b.ReportAllocs()
	for b.Loop() {
		res, err := run.Call(ctx, req)
		if err != nil || res.Status != gateway.StatusOK {
			b.Fatal(res, err)
		}
	}
	if seen < b.N {
		b.Fatalf("the observer saw %d attempts for %d calls", seen, b.N)
	}
}

// BenchmarkGatewayCallReadOnlyWatchdog: the same with an adapter that does
// not declare it honours its context, so each attempt runs on a watchdog
// goroutine (the price of a bounded return from an adapter that ignores
// its context).
func BenchmarkGatewayCallReadOnlyWatchdog(b *testing.B) {
	benchReadOnly(b, gateway.Capability{ArgsSchema: lookupSchema}, &discardSink{})
}

// BenchmarkGatewayCallReadOnlyMemoryTranscript: the same as
// BenchmarkGatewayCallReadOnly with the in-memory transcript, which keeps
// every entry of the (ever longer) run on the heap.
func BenchmarkGatewayCallReadOnlyMemoryTranscript(b *testing.B) {
	benchReadOnly(b, gateway.Capability{ArgsSchema: lookupSchema, HonorsContext: true}, gateway.NewMemoryTranscript())
}

// BenchmarkGatewayCallWrite: a write call with idempotency (a claim and a
// completion in the in-memory store), schema validation, delegation scopes
// and policy; each iteration is a new step (a new key). Registered and
// recorded as BenchmarkGatewayCallReadOnly is.
func BenchmarkGatewayCallWrite(b *testing.B) {
	f := benchFixture(b)
	reg, err := gateway.New([]gateway.Registration{{AdapterID: "adp_payments", Adapter: noop, Capabilities: map[string]gateway.Capability{
		"issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}, HonorsContext: true}}}}, &gateway.Options{Transcript: &discardSink{}})
	if err != nil {
		b.Fatal(err)
	}
	run := rebind(b, f, reg)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		req := refundCall(1200)
		req.Step = gateway.StepID{Turn: i / 1000, Index: i % 1000}
		req.IdempotencyKey = "ik_bench_" + strconv.Itoa(i)
		i++
		res, err := run.Call(ctx, req)
		if err != nil || res.Status != gateway.StatusCompleted {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkGatewayCallWritePerCallGate: BenchmarkGatewayCallWrite under a
// pack whose finance gate reads the call's amount (a refund of 1200, which
// the gate lets through): what the per-call policy evaluation adds to a
// write. A pack that reads no tool.* pays none of it.
func BenchmarkGatewayCallWritePerCallGate(b *testing.B) {
	f := newFixture(b, lowValue, editPack(gateWhenOverArgs), func(fx *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		rc.RunBudget.MaxToolCalls = 1 << 30
		rc.RunBudget.MaxCostCents = 1e12
	})
	reg, err := gateway.New([]gateway.Registration{{AdapterID: "adp_payments", Adapter: noop, Capabilities: map[string]gateway.Capability{
		"issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}, HonorsContext: true}}}}, &gateway.Options{Transcript: &discardSink{}})
	if err != nil {
		b.Fatal(err)
	}
	run := rebind(b, f, reg)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		req := refundCall(1200)
		req.Step = gateway.StepID{Turn: i / 1000, Index: i % 1000}
		req.IdempotencyKey = "ik_bench_" + strconv.Itoa(i)
		i++
		res, err := run.Call(ctx, req)
		if err != nil || res.Status != gateway.StatusCompleted {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkGatewayCallWriteVerified: BenchmarkGatewayCallWritePerCallGate
// with a RunOptions.VerifyWrite hook that lets every write go: what
// asking the hook adds, the call's own decisions included.
func BenchmarkGatewayCallWriteVerified(b *testing.B) {
	f := newFixture(b, lowValue, editPack(gateWhenOverArgs), func(fx *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		rc.RunBudget.MaxToolCalls = 1 << 30
		rc.RunBudget.MaxCostCents = 1e12
	})
	reg, err := gateway.New([]gateway.Registration{{AdapterID: "adp_payments", Adapter: noop, Capabilities: map[string]gateway.Capability{
		"issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}, HonorsContext: true}}}}, &gateway.Options{Transcript: &discardSink{}})
	if err != nil {
		b.Fatal(err)
	}
	asked := 0
	run, err := reg.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)},
		&gateway.RunOptions{VerifyWrite: func(w *gateway.WriteCall) *gateway.ToolError {
			if len(w.Decisions) > 0 {
				asked++
			}
			return nil
		}})
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		req := refundCall(1200)
		req.Step = gateway.StepID{Turn: i / 1000, Index: i % 1000}
		req.IdempotencyKey = "ik_bench_" + strconv.Itoa(i)
		i++
		res, err := run.Call(ctx, req)
		if err != nil || res.Status != gateway.StatusCompleted {
			b.Fatal(res, err)
		}
	}
	if asked < b.N {
		b.Fatalf("the hook was asked with the call's decisions %d times for %d calls", asked, b.N)
	}
}
