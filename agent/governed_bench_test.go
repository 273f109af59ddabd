package agent_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// benchScript is the benchmarks' agent: two tool calls, a text, a final
// text and usage, no waiting.
var benchScript = codingScript("done")

// BenchmarkDirectAgentRun is one run of the in-process backend, driven
// directly: start, read every event, wait.
func BenchmarkDirectAgentRun(b *testing.B) {
	be := newTestBackend("coder", benchScript)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		run, err := be.Run(ctx, agent.RunRequest{Prompt: "fix it " + strconv.Itoa(i), Env: map[string]string{"TRACEPARENT": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
		if err != nil {
			b.Fatal(err)
		}
		for range run.Events() {
		}
		if _, err := run.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGovernedAgentCall is the same run as a governed call: the
// gateway's checks (surfaced, schema, policy, delegation, budget, the
// inactive gate), the idempotency claim, the adapter's mapping and summary,
// redaction and the hash-chained transcript (discarded). Each call has
// its own prompt, so none is served as a duplicate.
func BenchmarkGovernedAgentCall(b *testing.B) {
	be := newTestBackend("coder", benchScript)
	ad := agent.NewAdapter(be, &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}})
	run := governedRun(b, ad.Registration())
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		res, err := run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_coder.run", Args: map[string]any{"prompt": "fix it " + strconv.Itoa(i)}, Step: gateway.StepID{Index: i % 1000, Turn: i / 1000}})
		if err != nil {
			b.Fatal(err)
		}
		if res.Status != gateway.StatusCompleted {
			b.Fatalf("%s %+v", res.Status, res.Error)
		}
	}
}

// discard is a transcript sink that keeps nothing.
type discard struct{}

func (discard) Append(context.Context, gateway.TranscriptEntry) error { return nil }

// governedRun binds a gateway with regs to a run of the coder pack in
// which no gate is active and the budget does not run out.
func governedRun(b *testing.B, regs ...gateway.Registration) *gateway.Run {
	b.Helper()
	p, err := pack.Decode(coderPack)
	if err != nil {
		b.Fatal(err)
	}
	prepared, err := compiler.Prepare([]compiler.Input{{Ref: pack.MustParseRef("ctxpack.coder@1.0.0"), Pack: p}}, &compiler.Options{Ontologies: []string{"ont.code@1.0.0"}})
	if err != nil {
		b.Fatal(err)
	}
	req, rc := planRequest(b)
	rc.RunBudget.MaxToolCalls = 1 << 30
	rc.RunBudget.MaxCostCents = 1e15
	rc.RunBudget.WallClockMS = 1 << 40
	cc, err := prepared.Compile(context.Background(), req, rc)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)
	gw, err := gateway.New(regs, &gateway.Options{Transcript: discard{}, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	run, err := gw.NewRun(gateway.RunConfig{Prepared: prepared, Compiled: cc, Request: req, RunContext: rc, Meter: runcontext.NewMeter(rc.RunBudget, now)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return run
}
