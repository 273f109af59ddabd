package contextos_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/replay"
)

// modelPlanner is a planner that names its model.
type modelPlanner struct {
	contextos.Planner
}

func (modelPlanner) PlannerModel() (provider, model string) { return "openai", "gpt-test" }

// withTokens gives a plan a model's usage breakdown.
func withTokens(p *contextos.Plan, in, out int) *contextos.Plan {
	p.Usage.InputTokens, p.Usage.OutputTokens = in, out
	return p
}

// observed is a harness whose runtime traces to a span recorder and
// meters to a manual reader.
func observed(t *testing.T, planner contextos.Planner) (*contextostest.Harness, *tracetest.SpanRecorder, *sdkmetric.ManualReader) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	h := bareHarness(t, planner, &contextostest.Options{Runtime: contextos.Options{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	}})
	scriptDefaults(h, "")
	return h, rec, reader
}

// chatSpans are the ended "chat gpt-test" spans.
func chatSpans(rec *tracetest.SpanRecorder) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "chat gpt-test" {
			out = append(out, s)
		}
	}
	return out
}

func attrsOf(kvs []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// genAIPoints are the GenAI metrics' data points: token sums by token
// type, and the duration histogram's points.
func genAIPoints(t *testing.T, reader *sdkmetric.ManualReader) (tokens map[string]int64, durations []metricdata.HistogramDataPoint[float64], units map[string]string) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	tokens, units = map[string]int64{}, map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "gen_ai.client.token.usage":
				units[m.Name] = m.Unit
				for _, dp := range m.Data.(metricdata.Histogram[int64]).DataPoints {
					a := attrsOf(dp.Attributes.ToSlice())
					if a["gen_ai.operation.name"] != "chat" || a["gen_ai.provider.name"] != "openai" || a["gen_ai.request.model"] != "gpt-test" {
						t.Errorf("token usage attributes %v", a)
					}
					tokens[a["gen_ai.token.type"].(string)] += dp.Sum
				}
			case "gen_ai.client.operation.duration":
				units[m.Name] = m.Unit
				durations = append(durations, m.Data.(metricdata.Histogram[float64]).DataPoints...)
			}
		}
	}
	return tokens, durations, units
}

// A planner that names its model gets a GenAI client span per turn
// ("chat {model}", a child of the turn's plan span) with the GenAI
// attributes and the turn's token usage, and the GenAI client metrics;
// the spans of a replay of the run carry contextos.replay and the replay
// adds no GenAI metric.
func TestGenAISpansAndMetrics(t *testing.T) {
	ctx := context.Background()
	h, rec, reader := observed(t, modelPlanner{contextostest.NewPlanner(withTokens(lookupPlan(), 600, 300), withTokens(refundPlan(1200), 500, 200))})
	res := h.Invoke(refundRequest(t, 1200, true))
	contextostest.AssertStatus(t, res, decision.Decided)

	spans := chatSpans(rec)
	if len(spans) != 2 {
		t.Fatalf("%d chat spans, want one per turn (2)", len(spans))
	}
	plans := map[trace.SpanID]bool{}
	for _, s := range rec.Ended() {
		if s.Name() == "plan" {
			plans[s.SpanContext().SpanID()] = true
		}
	}
	for i, s := range spans {
		a := attrsOf(s.Attributes())
		want := map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-test", "contextos.turn": int64(i),
			"gen_ai.usage.input_tokens": int64([]int{600, 500}[i]), "gen_ai.usage.output_tokens": int64([]int{300, 200}[i])}
		for k, v := range want {
			if a[k] != v {
				t.Errorf("turn %d: %s = %v, want %v", i, k, a[k], v)
			}
		}
		if _, ok := a[contextos.KeyReplay]; ok || s.SpanKind() != trace.SpanKindClient || !plans[s.Parent().SpanID()] {
			t.Errorf("turn %d: replay %v, kind %v, parent a plan span %v", i, a[contextos.KeyReplay], s.SpanKind(), plans[s.Parent().SpanID()])
		}
	}
	tokens, durations, units := genAIPoints(t, reader)
	if tokens["input"] != 1100 || tokens["output"] != 500 || len(tokens) != 2 {
		t.Errorf("token usage %v, want input 1100, output 500", tokens)
	}
	if len(durations) != 1 || durations[0].Count != 2 || units["gen_ai.client.operation.duration"] != "s" || units["gen_ai.client.token.usage"] != "{token}" {
		t.Errorf("duration points %+v, units %v", durations, units)
	}

	// The replay: spans marked, no metric.
	p, err := h.Runtime.Capture(ctx, res.RunID, replay.SourceOperatorCorrection)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Runtime.Replay(ctx, p)
	if err != nil || out.Status != replay.ReplayEqual {
		t.Fatalf("replay: %+v, %v", out, err)
	}
	spans = chatSpans(rec)
	if len(spans) != 4 {
		t.Fatalf("%d chat spans after the replay, want 4", len(spans))
	}
	for _, s := range spans[2:] {
		if a := attrsOf(s.Attributes()); a[contextos.KeyReplay] != true || a["gen_ai.request.model"] != "gpt-test" {
			t.Errorf("replayed turn's span attributes %v", a)
		}
	}
	tokens, durations, _ = genAIPoints(t, reader)
	if tokens["input"] != 1100 || tokens["output"] != 500 || durations[0].Count != 2 {
		t.Errorf("after the replay: token usage %v, %d durations: the replay counted as live work", tokens, durations[0].Count)
	}
}

// A failed turn's span has error.type and the error status, and the usage
// the planner reported with its failure; its duration point has
// error.type. A planner that names no model has no chat span.
func TestGenAIFailedTurnAndUnnamedPlanner(t *testing.T) {
	failing := contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) {
		return nil, &contextos.PlanUsageError{Usage: contextos.PlanUsage{InputTokens: 40, OutputTokens: 2}, Err: errors.New("upstream 500")}
	})
	h, rec, reader := observed(t, modelPlanner{failing})
	h.Invoke(refundRequest(t, 1200, true))
	spans := chatSpans(rec)
	if len(spans) != 1 {
		t.Fatalf("%d chat spans, want 1", len(spans))
	}
	a := attrsOf(spans[0].Attributes())
	if spans[0].Status().Code != codes.Error || a["error.type"] == nil || a["gen_ai.usage.input_tokens"] != int64(40) || a["gen_ai.usage.output_tokens"] != int64(2) {
		t.Errorf("failed turn: status %v, attributes %v", spans[0].Status(), a)
	}
	tokens, durations, _ := genAIPoints(t, reader)
	if tokens["input"] != 40 || tokens["output"] != 2 || len(durations) != 1 || attrsOf(durations[0].Attributes.ToSlice())["error.type"] != a["error.type"] {
		t.Errorf("failed turn's metrics: tokens %v, durations %+v", tokens, durations)
	}

	h, rec, reader = observed(t, contextostest.NewPlanner(withTokens(lookupPlan(), 600, 300), withTokens(refundPlan(1200), 500, 200)))
	h.Invoke(refundRequest(t, 1200, true))
	if n := len(chatSpans(rec)); n != 0 {
		t.Errorf("a planner naming no model has %d chat spans", n)
	}
	if tokens, durations, _ := genAIPoints(t, reader); len(tokens) != 0 || len(durations) != 0 {
		t.Errorf("a planner naming no model has GenAI metrics: %v %v", tokens, durations)
	}
}
