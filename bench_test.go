package contextos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/engine"
	"github.com/contextos/contextos/pack"
)

// benchRuntime is the 1200 refund, all in memory, with the default
// replay sampling (no packet for a DECIDED run).
func benchRuntime(b *testing.B) *contextostest.Harness {
	return benchHarness(b, newBenchPlanner(b, lookupPlan(), refundPlan(1200)))
}

// benchHarness is the harness of the refund benchmarks around planner,
// its adapters benchAdapters.
func benchHarness(b *testing.B, planner contextos.Planner) *contextostest.Harness {
	return contextostest.New(b, planner, [][]byte{readTestdata(b, "ctxpack.support-1.0.0.json")},
		&contextostest.Options{Runtime: contextos.Options{Evidence: evidence(b), Adapters: benchRegistrations(b)}})
}

// benchAdapter answers each capability with a copy of its outcome, as a
// gatewaytest.ScriptedAdapter scripted by scriptDefaults does, and keeps
// none of the calls it is given. A ScriptedAdapter keeps every call for
// Calls, and a call's envelope is the gateway's (it lives in the
// gateway's record of the call, ≈ 3.6 KB, which it keeps alive): a
// benchmark of many runs would measure what the test double keeps.
type benchAdapter map[string]*gateway.Outcome

// Call implements gateway.Adapter.
func (a benchAdapter) Call(_ context.Context, c *gateway.Call) (*gateway.Outcome, error) {
	o := a[c.Capability]
	if o == nil {
		return nil, gateway.NewToolError(gateway.CodeUnsupportedTool, false, "no script for "+c.Capability, nil)
	}
	out := *o
	out.Mutations = slices.Clone(o.Mutations)
	return &out, nil
}

// benchAdapters are the refund's adapters, scripted as scriptDefaults
// scripts the harness's.
func benchAdapters() map[string]benchAdapter {
	return map[string]benchAdapter{
		"adp_orders":   {"lookup": {Output: map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}}},
		"adp_policy":   {"eval": {Output: map[string]any{"eligible": true}}},
		"adp_payments": {"issue_refund": {Output: map[string]any{"transaction_id": "txn_q9"}, Mutations: []string{"refund:txn_q9"}}},
	}
}

// benchRegistrations registers benchAdapters for every capability of the
// support pack's tool registry, as the harness registers its scripted
// adapters (issue_refund with the payments.refund scope).
func benchRegistrations(b *testing.B) []gateway.Registration {
	p, err := pack.Decode(readTestdata(b, "ctxpack.support-1.0.0.json"))
	if err != nil {
		b.Fatal(err)
	}
	adapters := benchAdapters()
	var regs []gateway.Registration
	for _, a := range p.ToolingLayer.AdapterRegistry {
		caps := map[string]gateway.Capability{}
		for _, c := range a.Capabilities {
			caps[c] = gateway.Capability{}
		}
		if a.AdapterID == "adp_payments" {
			caps["issue_refund"] = gateway.Capability{Scopes: []string{"payments.refund"}}
		}
		regs = append(regs, gateway.Registration{AdapterID: a.AdapterID, Adapter: adapters[a.AdapterID], Capabilities: caps})
	}
	return regs
}

// benchPlanner is contextostest.Planner without its log: it answers turn
// i with a fresh copy of plans[i] as a model's decoded answer would be
// (encoded and decoded once, as Planner.Then does) and keeps none of the
// requests it is asked. contextostest.Planner keeps every request for
// Requests, ≈ 12 KB of live heap a run (the planner's copies of the
// compiled context, request and run context): a benchmark of many runs
// would measure what the test double keeps, which no planner in
// production does, and the collector would scan it on every cycle.
type benchPlanner []*contextos.Plan

func newBenchPlanner(b *testing.B, plans ...*contextos.Plan) benchPlanner {
	out := make(benchPlanner, len(plans))
	for i, p := range plans {
		doc, err := json.Marshal(p)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = new(contextos.Plan)
		if err := json.Unmarshal(doc, out[i]); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// Plan implements contextos.Planner.
func (p benchPlanner) Plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.Turn >= len(p) {
		return nil, fmt.Errorf("the benchmark's planner has no turn %d", req.Turn+1)
	}
	return engine.ClonePlan(p[req.Turn]), nil
}

func BenchmarkInvokeRefund(b *testing.B) {
	h := benchRuntime(b)
	req, rc := refundRequest(b, 1200, true)
	ctx := context.Background()
	b.ReportAllocs()
	done := historyMetrics(b)
	i := 0
	for b.Loop() {
		i++
		rc.RunID = "run_bench_" + strconv.Itoa(i)
		res, err := h.Runtime.Invoke(ctx, req, rc)
		if err != nil || res.Status != decision.Decided {
			b.Fatalf("%v %v", res.Status, err)
		}
	}
	done()
	runtime.KeepAlive(h)
}

// historyMetrics reports, when the returned func is called after the
// benchmark's loop, what a run costs as the runs stored before it grow:
// cpu-ns/op, the process's CPU time per run (user and system, the
// collector's included; on a shared machine it moves less than ns/op,
// which counts waiting), and kept-B/run, the live heap the runs left
// behind, per run (measured after a collection at each end: what the
// runtime's stores and the harness keep, and what the collector marks
// on every cycle from then on). Run it at several -benchtime Nx to see
// the curve. With the collector off (GOGC=off, how the instruction
// counts are taken) it forces no collection, whose cost would grow with
// the runs, and reports no kept-B/run.
func historyMetrics(b *testing.B) func() {
	percent := debug.SetGCPercent(-1) // only read: set back at once
	debug.SetGCPercent(percent)
	gcOff := percent < 0
	var ms runtime.MemStats
	var heap uint64
	if !gcOff {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heap = ms.HeapAlloc
	}
	start := cpuTime(b)
	return func() {
		b.StopTimer()
		cpu := cpuTime(b) - start
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		if !gcOff {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(int64(ms.HeapAlloc)-int64(heap))/float64(b.N), "kept-B/run")
		}
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkUnmeteredInvokeRefund is BenchmarkInvokeRefund with a planner
// that reports no usage: such a run saves no checkpoint for its planner
// spend (a takeover has none to charge), so it must cost what it did
// before takeovers charged planner turns.
func BenchmarkUnmeteredInvokeRefund(b *testing.B) {
	lookup, refund := lookupPlan(), refundPlan(1200)
	lookup.Usage, refund.Usage = contextos.PlanUsage{}, contextos.PlanUsage{}
	h := benchHarness(b, newBenchPlanner(b, lookup, refund))
	req, rc := refundRequest(b, 1200, true)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		rc.RunID = "run_bench_" + strconv.Itoa(i)
		res, err := h.Runtime.Invoke(ctx, req, rc)
		if err != nil || res.Status != decision.Decided {
			b.Fatalf("%v %v", res.Status, err)
		}
	}
}

// BenchmarkRefundPlainLoop is the floor BenchmarkInvokeRefund is measured
// against: the same scripted refund agent (the same planner and plans, the
// same scripted adapters and outputs) as a plain hand-written Go loop that
// asks the planner, calls each step's adapter and keeps its result until a
// plan proposes the decision, with none of the governance: no pack, policy,
// budget, gate, transcript, record or checkpoint.
func BenchmarkRefundPlainLoop(b *testing.B) {
	planner := newBenchPlanner(b, lookupPlan(), refundPlan(1200))
	adapters := map[string]gateway.Adapter{}
	for id, a := range benchAdapters() {
		adapters[id] = a
	}
	req, rc := refundRequest(b, 1200, true)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var results []contextos.StepResult
		var proposal *contextos.DecisionProposal
		for turn := 0; proposal == nil; turn++ {
			plan, err := planner.Plan(ctx, &contextos.PlanRequest{Request: req, Run: rc, Turn: turn, Results: results})
			if err != nil {
				b.Fatal(err)
			}
			for i, step := range plan.Steps {
				adapterID, capName, _ := strings.Cut(step.CapabilityID, ".")
				env := &gateway.ToolCallEnvelope{RunID: rc.RunID, CapabilityID: step.CapabilityID, Args: step.Args}
				out, err := adapters[adapterID].Call(ctx, &gateway.Call{Envelope: env, Capability: capName, Attempt: 1})
				if err != nil {
					b.Fatal(err)
				}
				results = append(results, contextos.StepResult{Turn: turn, Index: i, Step: step,
					Result: &gateway.ToolResultEnvelope{CapabilityID: step.CapabilityID, Output: out.Output}})
			}
			proposal = plan.Decision
		}
		if proposal.Outcome != "approved" || len(results) != 3 {
			b.Fatalf("the plain loop ended %q after %d calls", proposal.Outcome, len(results))
		}
	}
}

func BenchmarkInvokeRefundParallel(b *testing.B) {
	h := benchRuntime(b)
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req, rc := refundRequest(b, 1200, true)
		for pb.Next() {
			rc := rc.Clone()
			rc.RunID = "run_bench_" + strconv.FormatInt(n.Add(1), 10)
			res, err := h.Runtime.Invoke(ctx, req, rc)
			if err != nil || res.Status != decision.Decided {
				b.Errorf("%v %v", res, err)
				return
			}
		}
	})
}
