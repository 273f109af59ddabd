package opmetrics_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/contextos/contextos/internal/opmetrics"
)

// collect reads every metric of the reader by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != opmetrics.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, opmetrics.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// attrs renders an attribute set as "k=v,k=v" (sorted by key).
func attrs(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	return strings.Join(parts, ",")
}

// point is one data point: its attributes and its value (a sum, or a
// histogram's count and sum).
type point struct {
	attrs string
	count uint64
	sum   float64
}

// points returns m's points sorted by attributes, and its kind.
func points(t *testing.T, m metricdata.Metrics) (string, []point) {
	t.Helper()
	var kind string
	var out []point
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		kind = "counter"
		if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
			t.Errorf("%s: monotonic %v, temporality %v", m.Name, d.IsMonotonic, d.Temporality)
		}
		for _, p := range d.DataPoints {
			out = append(out, point{attrs: attrs(p.Attributes), sum: float64(p.Value)})
		}
	case metricdata.Histogram[float64]:
		kind = "histogram"
		for _, p := range d.DataPoints {
			out = append(out, point{attrs: attrs(p.Attributes), count: p.Count, sum: p.Sum})
		}
	case metricdata.Histogram[int64]:
		kind = "histogram"
		for _, p := range d.DataPoints {
			out = append(out, point{attrs: attrs(p.Attributes), count: p.Count, sum: float64(p.Sum)})
		}
	default:
		t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
	}
	slices.SortFunc(out, func(a, b point) int { return strings.Compare(a.attrs, b.attrs) })
	return kind, out
}

func TestEveryMethodRecordsItsMetric(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := opmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := opmetrics.Labels{PackRef: "ctxpack.support@1.0.0", Intent: "support.refund"}
	if !m.Enabled(ctx) {
		t.Fatal("an SDK provider's metrics are not enabled")
	}
	m.Compile(ctx, "ctxpack.support@1.0.0", "", 20*time.Millisecond)
	m.Compile(ctx, "ctxpack.support@1.1.0", "pack_incompatible", 5*time.Millisecond)
	m.ToolSurface(ctx, l, 3)
	m.RuleEvaluation(ctx, l, opmetrics.StageCompile, "POLICY_RETURNS_V4", "R_REFUND_REQUIRES_IDV", "allow")
	m.RuleEvaluation(ctx, l, opmetrics.StageCompile, "POLICY_RETURNS_V4", "R_REFUND_REQUIRES_IDV", "allow")
	m.BucketTruncation(ctx, l, "evidence")
	m.RequiredEvidence(ctx, l, "support.refund.execute", "order_lookup", true)
	m.RequiredEvidence(ctx, l, "support.refund.execute", "policy_eval", false)
	m.Replay(ctx, "ctxpack.support@1.0.0", "replay_equal")
	m.ReleaseGate(ctx, "ctxpack.support@1.1.0", "policy", true)
	m.ReleaseGate(ctx, "ctxpack.support@1.1.0", "safety", false)
	m.Rollback(ctx, "ctxpack.support", "prod", 90*time.Second)
	m.Run(ctx, l, "DECIDED")
	m.ToolCall(ctx, l, "adp_orders.lookup", "ok", 250*time.Millisecond)
	m.Refusal(ctx, l, opmetrics.SourceGateway, "tool_permission_denied")

	run := "contextos.intent=support.refund,contextos.pack.ref=ctxpack.support@1.0.0"
	want := map[string]struct {
		unit, kind string
		points     []point
	}{
		opmetrics.NameCompiles: {"{compile}", "counter", []point{
			{attrs: "contextos.compile.result=failure,contextos.pack.ref=ctxpack.support@1.1.0,error.type=pack_incompatible", sum: 1},
			{attrs: "contextos.compile.result=success,contextos.pack.ref=ctxpack.support@1.0.0", sum: 1},
		}},
		opmetrics.NameCompileDuration: {"s", "histogram", []point{
			{attrs: "contextos.compile.result=failure,contextos.pack.ref=ctxpack.support@1.1.0", count: 1, sum: 0.005},
			{attrs: "contextos.compile.result=success,contextos.pack.ref=ctxpack.support@1.0.0", count: 1, sum: 0.02},
		}},
		opmetrics.NameToolSurface: {"{capability}", "histogram", []point{{attrs: run, count: 1, sum: 3}}},
		opmetrics.NameRuleEvaluations: {"{evaluation}", "counter", []point{{attrs: run +
			",contextos.policy.bundle.id=POLICY_RETURNS_V4,contextos.policy.rule.outcome=allow,contextos.policy.stage=compile,contextos.rule.id=R_REFUND_REQUIRES_IDV", sum: 2}}},
		opmetrics.NameBucketTruncations: {"{truncation}", "counter", []point{{attrs: "contextos.budget.bucket=evidence," + run, sum: 1}}},
		opmetrics.NameRequiredEvidence: {"{item}", "counter", []point{
			{attrs: "contextos.decision.key=support.refund.execute,contextos.evidence.name=order_lookup,contextos.evidence.resolved=true," + run, sum: 1},
			{attrs: "contextos.decision.key=support.refund.execute,contextos.evidence.name=policy_eval,contextos.evidence.resolved=false," + run, sum: 1},
		}},
		opmetrics.NameReplays: {"{replay}", "counter", []point{{attrs: "contextos.pack.ref=ctxpack.support@1.0.0,contextos.replay.status=replay_equal", sum: 1}}},
		opmetrics.NameReleaseGates: {"{evaluation}", "counter", []point{
			{attrs: "contextos.pack.ref=ctxpack.support@1.1.0,contextos.release_gate.metric=policy,contextos.release_gate.result=pass", sum: 1},
			{attrs: "contextos.pack.ref=ctxpack.support@1.1.0,contextos.release_gate.metric=safety,contextos.release_gate.result=fail", sum: 1},
		}},
		opmetrics.NameRollbackDuration: {"s", "histogram", []point{{attrs: "contextos.pack.id=ctxpack.support,deployment.environment.name=prod", count: 1, sum: 90}}},
		opmetrics.NameRuns:             {"{run}", "counter", []point{{attrs: run + ",contextos.run.status=DECIDED", sum: 1}}},
		opmetrics.NameToolCallDuration: {"s", "histogram", []point{{attrs: run + ",contextos.tool.status=ok,gen_ai.tool.name=adp_orders.lookup", count: 1, sum: 0.25}}},
		opmetrics.NameRefusals: {"{refusal}", "counter", []point{{attrs: run +
			",contextos.refusal.reason=tool_permission_denied,contextos.refusal.source=gateway", sum: 1}}},
	}
	got := collect(t, reader)
	if len(got) != len(want) {
		t.Errorf("%d metrics, want %d", len(got), len(want))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("no metric %s", name)
			continue
		}
		if g.Unit != w.unit || g.Description == "" {
			t.Errorf("%s: unit %q (want %q), description %q", name, g.Unit, w.unit, g.Description)
		}
		kind, pts := points(t, g)
		if kind != w.kind {
			t.Errorf("%s: kind %s, want %s", name, kind, w.kind)
		}
		if !slices.Equal(pts, w.points) {
			t.Errorf("%s points:\n got %+v\nwant %+v", name, pts, w.points)
		}
	}
}

func TestHistogramsUseExplicitBoundaries(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := opmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := opmetrics.Labels{PackRef: "p@1.0.0", Intent: "i"}
	m.Compile(ctx, "p@1.0.0", "", time.Millisecond)
	m.ToolCall(ctx, l, "a.b", "ok", time.Millisecond)
	m.Rollback(ctx, "p", "prod", time.Second)
	m.ToolSurface(ctx, l, 1)
	got := collect(t, reader)
	for _, tc := range []struct {
		name   string
		bounds []float64
	}{
		{opmetrics.NameCompileDuration, opmetrics.CompileBuckets},
		{opmetrics.NameToolCallDuration, opmetrics.ToolCallBuckets},
		{opmetrics.NameRollbackDuration, opmetrics.RollbackBuckets},
		{opmetrics.NameToolSurface, opmetrics.ToolSurfaceBuckets},
	} {
		var b []float64
		switch d := got[tc.name].Data.(type) {
		case metricdata.Histogram[float64]:
			b = d.DataPoints[0].Bounds
		case metricdata.Histogram[int64]:
			b = d.DataPoints[0].Bounds
		}
		if !slices.Equal(b, tc.bounds) {
			t.Errorf("%s bounds = %v, want %v", tc.name, b, tc.bounds)
		}
		if !slices.IsSorted(b) {
			t.Errorf("%s bounds are not sorted", tc.name)
		}
	}
}

// calls makes one call of every method.
func calls(ctx context.Context, m *opmetrics.Metrics, l opmetrics.Labels) {
	m.Compile(ctx, l.PackRef, "", time.Millisecond)
	m.Compile(ctx, l.PackRef, "pack_signature", time.Millisecond)
	m.ToolSurface(ctx, l, 3)
	m.RuleEvaluation(ctx, l, opmetrics.StageCompile, "B", "R", "allow")
	m.BucketTruncation(ctx, l, "evidence")
	m.RequiredEvidence(ctx, l, "d", "e", true)
	m.Replay(ctx, l.PackRef, "replay_equal")
	m.ReleaseGate(ctx, l.PackRef, "policy", true)
	m.Rollback(ctx, "p", "prod", time.Second)
	m.Run(ctx, l, "DECIDED")
	m.ToolCall(ctx, l, "a.b", "ok", time.Millisecond)
	m.Refusal(ctx, l, opmetrics.SourceGateway, "tool_permission_denied")
}

func TestDisabledPathAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	l := opmetrics.Labels{PackRef: "p@1.0.0", Intent: "i"}
	fromNil, err := opmetrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	fromNoop, err := opmetrics.New(noop.NewMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*opmetrics.Metrics{"New(nil)": fromNil, "noop provider": fromNoop, "nil *Metrics": nil} {
		if m.Enabled(ctx) {
			t.Errorf("%s: enabled", name)
		}
		if n := testing.AllocsPerRun(100, func() { calls(ctx, m, l) }); n != 0 {
			t.Errorf("%s: %v allocations per call of every method, want 0", name, n)
		}
	}
}

// failingMeter refuses the run counter.
type failingMeter struct {
	noop.Meter
	nilInstrument bool
}

func (f failingMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	if name != opmetrics.NameRuns {
		return f.Meter.Int64Counter(name, opts...)
	}
	if f.nilInstrument {
		return nil, errors.New("refused")
	}
	c, _ := f.Meter.Int64Counter(name, opts...)
	return c, errors.New("refused")
}

type failingProvider struct {
	noop.MeterProvider
	nilInstrument bool
}

func (p failingProvider) Meter(string, ...metric.MeterOption) metric.Meter {
	return failingMeter{nilInstrument: p.nilInstrument}
}

func TestNewReportsRefusedInstruments(t *testing.T) {
	m, err := opmetrics.New(failingProvider{})
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("err = %v, want the provider's refusal", err)
	}
	if m == nil {
		t.Fatal("an instrument returned with its error is not kept")
	}
	m.Run(context.Background(), opmetrics.Labels{}, "DECIDED") // usable
	m, err = opmetrics.New(failingProvider{nilInstrument: true})
	if err == nil || m != nil {
		t.Errorf("a provider that returned no instrument: %v, %v", m, err)
	}
}

func BenchmarkDisabled(b *testing.B) {
	ctx := context.Background()
	l := opmetrics.Labels{PackRef: "ctxpack.support@1.0.0", Intent: "support.refund"}
	m, err := opmetrics.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		calls(ctx, m, l)
	}
}

func BenchmarkEnabled(b *testing.B) {
	ctx := context.Background()
	l := opmetrics.Labels{PackRef: "ctxpack.support@1.0.0", Intent: "support.refund"}
	m, err := opmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		calls(ctx, m, l)
	}
}
