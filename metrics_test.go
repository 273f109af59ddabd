package contextos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// steppingClock advances by step at every reading, so every duration the
// runtime measures is above zero.
type steppingClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

// metricPoint is one data point of a collected metric: its attributes
// rendered "k=v,…" (sorted by key), a counter's value or a histogram's
// count and sum.
type metricPoint struct {
	attrs string
	value int64
	count uint64
	sum   float64
}

type collected struct {
	unit, kind string
	points     map[string]metricPoint // by attrs
}

func renderAttrs(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	return strings.Join(parts, ",")
}

// collectMetrics reads the reader's metrics of the runtime's scope by name,
// and every attribute value they carry.
func collectMetrics(t *testing.T, r *sdkmetric.ManualReader) (map[string]collected, []string) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]collected{}
	var values []string
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/contextos/contextos" {
			t.Errorf("metrics in scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			c := collected{unit: m.Unit, points: map[string]metricPoint{}}
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				c.kind = "counter"
				if !d.IsMonotonic {
					c.kind = "updowncounter"
				}
				for _, p := range d.DataPoints {
					c.points[renderAttrs(p.Attributes)] = metricPoint{attrs: renderAttrs(p.Attributes), value: p.Value}
					sets = append(sets, p.Attributes)
				}
			case metricdata.Histogram[float64]:
				c.kind = "histogram"
				for _, p := range d.DataPoints {
					c.points[renderAttrs(p.Attributes)] = metricPoint{attrs: renderAttrs(p.Attributes), count: p.Count, sum: p.Sum}
					sets = append(sets, p.Attributes)
				}
			case metricdata.Histogram[int64]:
				c.kind = "histogram"
				for _, p := range d.DataPoints {
					c.points[renderAttrs(p.Attributes)] = metricPoint{attrs: renderAttrs(p.Attributes), count: p.Count, sum: float64(p.Sum)}
					sets = append(sets, p.Attributes)
				}
			default:
				t.Errorf("%s: data %T", m.Name, m.Data)
			}
			for _, s := range sets {
				for _, kv := range s.ToSlice() {
					values = append(values, kv.Value.String())
				}
			}
			out[m.Name] = c
		}
	}
	return out, values
}

// metricsHarness is bareHarness with the defaults scripted and the given
// providers and clock.
func metricsHarness(t *testing.T, planner contextos.Planner, o contextos.Options, packs ...[]byte) *contextostest.Harness {
	t.Helper()
	o.Evidence = evidence(t)
	o.ReplaySampleRate = 1
	var h *contextostest.Harness
	if len(packs) == 0 {
		h = bareHarness(t, planner, &contextostest.Options{Runtime: o})
	} else {
		h = contextostest.New(t, planner, packs, &contextostest.Options{Runtime: o,
			Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}})
	}
	scriptDefaults(h, "")
	return h
}

// TestOperationalMetrics runs real invocations — an approved refund, a
// paused one and its approval, one refused for want of identity, one a
// must_refuse guardrail rejects (with a starved evidence bucket), one the
// gateway refuses for the tool-call budget, a replay, and compiles of a
// pack the host cannot run and of a pack the registry does not hold — and
// checks every metric the runtime records: name, unit, kind, attributes
// and values.
func TestOperationalMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	clock := &steppingClock{now: contextostest.FixedTime(), step: 10 * time.Millisecond}
	opts := contextos.Options{MeterProvider: mp, TracerProvider: tp, Now: clock.Now}
	ctx := context.Background()

	// Every compile that succeeded, for the expected compile metrics; and
	// what no attribute may carry.
	var compiles []*compiler.CompiledContext
	forbidden := map[string]bool{"1200": true, "4200": true, "INR": true, "ord_881": true, "cus_77": true, "txn_q9": true}
	note := func(req *runcontext.InvokeRequest, rc *runcontext.RunContext, res *contextos.Result) {
		for _, v := range []string{req.RequestID, req.TenantID, req.SessionID, req.Trace.TraceID, rc.RunID, rc.TenantID, rc.User.UserID, rc.User.Delegation.Subject} {
			forbidden[v] = true
		}
		if res != nil {
			forbidden[res.RunID] = true
			compiles = append(compiles, res.Compiled)
			for _, s := range res.Record.SubjectIDs {
				forbidden[s] = true
			}
		}
	}

	// An approved refund, and its replay.
	h := metricsHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), opts)
	req, rc := refundRequest(t, 1200, true)
	approved := h.Invoke(req, rc)
	contextostest.AssertStatus(t, approved, decision.Decided)
	note(req, rc, approved)
	contextostest.AssertReplayEqual(t, h.Replay(approved))

	// A refund that pauses on the finance gate, then is approved.
	h = metricsHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), opts)
	req, rc = refundRequest(t, 4200, true)
	paused := h.Invoke(req, rc)
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	note(req, rc, paused)
	done := h.Approve(paused, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
	contextostest.AssertStatus(t, done, decision.Decided)
	note(req, rc, done)
	resumed := done.Compiled // compiled again on resume: counted once per run
	forbidden["user_finance_lead_77"] = true

	// A refund refused for want of identity (the refund tool is not
	// surfaced; the planner denies).
	h = metricsHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), deniedPlan()), opts)
	req, rc = refundRequest(t, 1200, false)
	refused := h.Invoke(req, rc)
	contextostest.AssertOutcome(t, refused, "denied")
	note(req, rc, refused)

	// A run a must_refuse guardrail rejects before planning, compiled
	// with an evidence bucket too small for the evidence.
	h = metricsHarness(t, contextostest.NewPlanner(), opts)
	req, rc = refundRequest(t, 1200, true)
	req.Input.Context["signals"] = []any{"refund_without_identity"}
	rc.RunBudget.BucketTokens[runcontext.BucketEvidence] = 1
	rejected := h.Invoke(req, rc)
	contextostest.AssertStatus(t, rejected, decision.Rejected)
	note(req, rc, rejected)
	if !slices.Contains(rejected.Compiled.ContextLedger.Budget.TruncatedBuckets, "evidence") {
		t.Fatalf("the starved evidence bucket was not truncated: %v", rejected.Compiled.ContextLedger.Budget)
	}

	// A run the gateway stops at the third call (max_tool_calls 2).
	h = metricsHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), opts)
	req, rc = refundRequest(t, 1200, true)
	rc.RunBudget.MaxToolCalls = 2
	stopped := h.Invoke(req, rc)
	contextostest.AssertStatus(t, stopped, decision.Escalated)
	note(req, rc, stopped)

	// Compiles that fail: a pack that requires a later runtime, and a
	// pack the registry does not hold.
	bad := supportPackWith(t, func(p map[string]any) {
		p["pack_meta"].(map[string]any)["pack_version"] = "1.1.0"
		p["contract_meta"].(map[string]any)["compatibility"].(map[string]any)["requires"].(map[string]any)["runtime"] = ">=9.0.0"
	})
	h = metricsHarness(t, contextostest.NewPlanner(), opts, readTestdata(t, "ctxpack.support-1.0.0.json"), bad)
	for _, ref := range []string{"ctxpack.support@1.1.0", "ctxpack.unknown_tenant_secret@1.0.0"} {
		req, rc = refundRequest(t, 1200, true)
		req.ContextPackRefs = []string{ref}
		if _, err := h.Runtime.Invoke(ctx, req, rc); err == nil {
			t.Fatalf("%s compiled", ref)
		}
		note(req, rc, nil)
	}
	forbidden["ctxpack.unknown_tenant_secret@1.0.0"] = true

	got, values := collectMetrics(t, reader)

	// Expected: the compile metrics follow from the compiled contexts.
	run := "contextos.intent=support.refund,contextos.pack.ref=ctxpack.support@1.0.0"
	surface := metricPoint{attrs: run}
	rules := map[string]metricPoint{}
	truncations := map[string]metricPoint{}
	for _, cc := range compiles {
		if cc == resumed {
			continue
		}
		surface.count++
		surface.sum += float64(len(cc.ContextLedger.Tools))
		for _, d := range cc.ContextLedger.PolicyResults {
			a := fmt.Sprintf("%s,contextos.policy.bundle.id=%s,contextos.policy.rule.outcome=%s,contextos.policy.stage=compile,contextos.rule.id=%s", run, d.BundleID, d.Outcome, d.RuleID)
			p := rules[a]
			p.attrs, p.value = a, p.value+1
			rules[a] = p
		}
		for _, b := range cc.ContextLedger.Budget.TruncatedBuckets {
			a := "contextos.budget.bucket=" + b + "," + run
			p := truncations[a]
			p.attrs, p.value = a, p.value+1
			truncations[a] = p
		}
	}
	if surface.count != 5 || len(rules) == 0 {
		t.Fatalf("%d first compiles, %d rule outcomes: want the first compiles of 5 runs (a resume compiles again, counted by contextos.pack.compiles only)", surface.count, len(rules))
	}
	evidence := func(name string, resolved bool, n int64) metricPoint {
		a := fmt.Sprintf("contextos.decision.key=support.refund.execute,contextos.evidence.name=%s,contextos.evidence.resolved=%v,%s", name, resolved, run)
		return metricPoint{attrs: a, value: n}
	}
	call := func(tool, status string, n uint64) metricPoint {
		return metricPoint{attrs: run + ",contextos.tool.status=" + status + ",gen_ai.tool.name=" + tool, count: n}
	}
	want := map[string]collected{
		"contextos.pack.compiles": {"{compile}", "counter", pointsOf(
			metricPoint{attrs: "contextos.compile.result=success,contextos.pack.ref=ctxpack.support@1.0.0", value: 6},
			metricPoint{attrs: "contextos.compile.result=failure,contextos.pack.ref=ctxpack.support@1.1.0,error.type=pack_incompatible", value: 1},
			metricPoint{attrs: "contextos.compile.result=failure,contextos.pack.ref=unresolved,error.type=pack_not_found", value: 1},
		)},
		"contextos.pack.compile.duration": {"s", "histogram", pointsOf(
			metricPoint{attrs: "contextos.compile.result=success,contextos.pack.ref=ctxpack.support@1.0.0", count: 6},
			metricPoint{attrs: "contextos.compile.result=failure,contextos.pack.ref=ctxpack.support@1.1.0", count: 1},
			metricPoint{attrs: "contextos.compile.result=failure,contextos.pack.ref=unresolved", count: 1},
		)},
		"contextos.compile.tool_surface.size":  {"{capability}", "histogram", pointsOf(surface)},
		"contextos.policy.rule.evaluations":    {"{evaluation}", "counter", rules},
		"contextos.compile.bucket.truncations": {"{truncation}", "counter", truncations},
		"contextos.runs": {"{run}", "counter", pointsOf(
			metricPoint{attrs: run + ",contextos.run.status=DECIDED", value: 3},
			metricPoint{attrs: run + ",contextos.run.status=DEFERRED", value: 1},
			metricPoint{attrs: run + ",contextos.run.status=REJECTED", value: 1},
			metricPoint{attrs: run + ",contextos.run.status=ESCALATED", value: 1},
		)},
		// Four terminal records of support.refund.execute, whose spec
		// requires identity_verified, order_lookup and policy_eval: the
		// rejected run looked nothing up, and the refused one has
		// identity_verified false in its request context.
		"contextos.decision.required_evidence": {"{item}", "counter", pointsOf(
			evidence("identity_verified", true, 4), evidence("identity_verified", false, 1),
			evidence("order_lookup", true, 4), evidence("order_lookup", false, 1),
			evidence("policy_eval", true, 4), evidence("policy_eval", false, 1),
		)},
		"contextos.tool.call.duration": {"s", "histogram", pointsOf(
			call("adp_orders.lookup", "ok", 4), call("adp_policy.eval", "ok", 4),
			call("adp_payments.issue_refund", "completed", 2), call("adp_payments.issue_refund", "paused", 1),
			call("adp_payments.issue_refund", "blocked", 1),
		)},
		"contextos.refusals": {"{refusal}", "counter", pointsOf(
			metricPoint{attrs: run + ",contextos.refusal.reason=tool_runtime_policy_invalid,contextos.refusal.source=gateway", value: 1},
			metricPoint{attrs: run + ",contextos.refusal.reason=guardrail_must_refuse,contextos.refusal.source=guardrail", value: 1},
		)},
		"contextos.replays": {"{replay}", "counter", pointsOf(
			metricPoint{attrs: "contextos.pack.ref=ctxpack.support@1.0.0,contextos.replay.status=replay_equal", value: 1},
		)},
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected metric %s (the runtime records neither release gates nor rollbacks)", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		w, g := want[name], got[name]
		if g.points == nil {
			t.Errorf("no metric %s", name)
			continue
		}
		if g.unit != w.unit || g.kind != w.kind {
			t.Errorf("%s: %s %q, want %s %q", name, g.kind, g.unit, w.kind, w.unit)
		}
		for _, a := range slices.Sorted(maps.Keys(g.points)) {
			if _, ok := w.points[a]; !ok {
				t.Errorf("%s: unexpected point {%s} = %+v", name, a, g.points[a])
			}
		}
		for _, a := range slices.Sorted(maps.Keys(w.points)) {
			wp, gp := w.points[a], g.points[a]
			switch {
			case gp.attrs == "":
				t.Errorf("%s: no point {%s}", name, a)
			case w.kind == "counter" && gp.value != wp.value:
				t.Errorf("%s {%s} = %d, want %d", name, a, gp.value, wp.value)
			case w.kind == "histogram" && gp.count != wp.count:
				t.Errorf("%s {%s}: %d measurements, want %d", name, a, gp.count, wp.count)
			case w.kind == "histogram" && wp.sum != 0 && gp.sum != wp.sum:
				t.Errorf("%s {%s}: sum %v, want %v", name, a, gp.sum, wp.sum)
			case w.kind == "histogram" && w.unit == "s" && gp.sum <= 0:
				// The stepping clock moved during every compile and call.
				t.Errorf("%s {%s}: durations sum to %v, want more than 0", name, a, gp.sum)
			}
		}
	}
	for _, v := range values {
		for f := range forbidden {
			if v == f || strings.Contains(v, f) {
				t.Errorf("an attribute carries %q (%q)", f, v)
			}
		}
	}

	// The spans of the failed compiles and runs carry an error status and
	// an error event, in closed-set words. (The gateway marks the span of
	// a refused call itself.)
	var failed []string
	for _, s := range exp.GetSpans() {
		if s.Status.Code != codes.Error || s.Name != "compile" && s.Name != "invoke_agent" {
			continue
		}
		failed = append(failed, s.Name+": "+s.Status.Description)
		var events []string
		for _, e := range s.Events {
			if e.Name != "exception" {
				continue
			}
			for _, kv := range e.Attributes {
				if kv.Key == "exception.message" {
					events = append(events, kv.Value.AsString())
				}
			}
		}
		if !slices.Equal(events, []string{s.Status.Description}) {
			t.Errorf("span %s (%s): exception events %q", s.Name, s.Status.Description, events)
		}
		for f := range forbidden {
			if strings.Contains(s.Status.Description, f) {
				t.Errorf("span %s status carries %q", s.Name, f)
			}
		}
	}
	slices.Sort(failed)
	wantFailed := []string{
		"compile: compile failed: pack_incompatible",
		"compile: compile failed: pack_not_found",
		"invoke_agent: run failed: pack_incompatible",
		"invoke_agent: run failed: pack_not_found",
		"invoke_agent: run stopped: budget_exceeded",
	}
	if !slices.Equal(failed, wantFailed) {
		t.Errorf("failed spans:\n%s\nwant\n%s", strings.Join(failed, "\n"), strings.Join(wantFailed, "\n"))
	}
}

func pointsOf(ps ...metricPoint) map[string]metricPoint {
	out := map[string]metricPoint{}
	for _, p := range ps {
		out[p.attrs] = p
	}
	return out
}

// A replay that cannot be run counts as an error, under no pack ref from
// the packet.
func TestReplayThatCannotRunCountsAsError(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	h := metricsHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), contextos.Options{MeterProvider: mp})
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	p, err := h.Runtime.Packets().Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	// A runtime whose registry does not hold the packet's pack.
	other := metricsHarness(t, contextostest.NewPlanner(), contextos.Options{MeterProvider: mp}, supportPackWith(t, func(p map[string]any) {
		p["pack_meta"].(map[string]any)["pack_version"] = "2.0.0"
	}))
	if _, err := other.Runtime.Replay(context.Background(), p); err == nil {
		t.Fatal("a packet of a pack the registry does not hold replayed")
	}
	// A tampered packet.
	p.Invoke = json.RawMessage(strings.Replace(string(p.Invoke), "1200", "1300", 1))
	if rep, err := h.Runtime.Replay(context.Background(), p); rep == nil || err == nil {
		t.Fatalf("a tampered packet: %v, %v", rep, err)
	}
	got, _ := collectMetrics(t, reader)
	want := pointsOf(
		metricPoint{attrs: "contextos.pack.ref=unresolved,contextos.replay.status=error", value: 1},
		metricPoint{attrs: "contextos.pack.ref=unresolved,contextos.replay.status=invalid", value: 1},
	)
	r := got["contextos.replays"]
	if len(r.points) != len(want) {
		t.Errorf("replays = %+v, want %+v", r.points, want)
	}
	for a, w := range want {
		if r.points[a].value != w.value {
			t.Errorf("replays {%s} = %d, want %d", a, r.points[a].value, w.value)
		}
	}
}

// New refuses a meter provider that returns no instrument.
func TestNewRefusesABrokenMeterProvider(t *testing.T) {
	_, err := contextos.New(contextostest.NewPlanner(), pack.NewMemoryRegistry(nil), runcontext.NewStaticKeys(nil),
		&contextos.Options{MeterProvider: nilMeterProvider{}})
	if !errors.Is(err, contextos.ErrConfig) || !strings.Contains(err.Error(), "MeterProvider") {
		t.Errorf("err = %v, want ErrConfig naming MeterProvider", err)
	}
}

// nilMeterProvider returns no run counter.
type nilMeterProvider struct{ noop.MeterProvider }

func (nilMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return nilMeter{} }

type nilMeter struct{ noop.Meter }

func (nilMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errors.New("refused")
}

// BenchmarkInvokeRefundMetered is BenchmarkInvokeRefund with the SDK's
// meter provider: the cost of recording the operational metrics.
func BenchmarkInvokeRefundMetered(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	h := contextostest.New(b, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), [][]byte{readTestdata(b, "ctxpack.support-1.0.0.json")},
		&contextostest.Options{Runtime: contextos.Options{Evidence: evidence(b), MeterProvider: mp}, Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}})
	scriptDefaults(h, "")
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
