package contextos_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/runcontext"
)

func TestSpanTreeFollowsRequestTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{TracerProvider: tp}})
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	spans := exp.GetSpans()
	names := map[string]int{}
	var root tracetest.SpanStub
	for _, s := range spans {
		names[s.Name]++
		if s.SpanContext.TraceID().String() != req.Trace.TraceID {
			t.Errorf("span %s has trace %s, want the request's %s", s.Name, s.SpanContext.TraceID(), req.Trace.TraceID)
		}
		if s.Name == "invoke_agent" {
			root = s
		}
		for _, a := range s.Attributes {
			v := a.Value.String()
			for _, secret := range []string{"tok_user_7a", "tok_agent_92", "u:user:771"} {
				if strings.Contains(v, secret) {
					t.Errorf("span %s attribute %s carries a secret", s.Name, a.Key)
				}
			}
		}
	}
	for _, stage := range []string{"invoke_agent", "compile", "plan", "verify", "score", "record"} {
		if names[stage] == 0 {
			t.Errorf("no %q span (have %v)", stage, names)
		}
	}
	if names["plan"] != 2 || names["verify"] != 2 || names["score"] != 2 {
		t.Errorf("stage spans = %v, want two turns", names)
	}
	// One span per tool call, from the gateway.
	calls := 0
	for _, s := range spans {
		if s.Parent.SpanID() == root.SpanContext.SpanID() && strings.Contains(s.Name, "adp_") {
			calls++
		}
	}
	if calls != 3 {
		t.Errorf("tool call spans under the run = %d, want 3 (%v)", calls, names)
	}
	if root.Parent.SpanID().String() != req.Trace.SpanID {
		t.Errorf("run span's parent = %s, want the request's span %s", root.Parent.SpanID(), req.Trace.SpanID)
	}
	want := map[string]string{"contextos.tenant_id": "tenant_acme_prod", "contextos.pack_ref": "ctxpack.support@1.0.0",
		"contextos.compiled_context_hash": res.Compiled.Hash(), "contextos.decision_status": "DECIDED"}
	for _, a := range root.Attributes {
		if w, ok := want[string(a.Key)]; ok {
			if a.Value.String() != w {
				t.Errorf("%s = %s, want %s", a.Key, a.Value.String(), w)
			}
			delete(want, string(a.Key))
		}
	}
	if len(want) > 0 {
		t.Errorf("run span lacks %v", want)
	}
	// The stage spans carry theirs too: the compile its hash, each score
	// its verdict (the run's spans record them only when recording).
	verdicts, compiled := []string{}, ""
	for _, s := range spans {
		for _, a := range s.Attributes {
			switch {
			case s.Name == "score" && a.Key == "contextos.verdict":
				verdicts = append(verdicts, a.Value.String())
			case s.Name == "compile" && a.Key == "contextos.compiled_context_hash":
				compiled = a.Value.String()
			}
		}
	}
	if len(verdicts) != 2 || compiled != res.Compiled.Hash() {
		t.Errorf("score spans' verdicts %v, compile span's hash %q; want two verdicts and %s", verdicts, compiled, res.Compiled.Hash())
	}
}

func TestStreamYieldsTypedEventsEndingWithResult(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), nil)
	req, rc := refundRequest(t, 4200, true)
	req.Mode = runcontext.ModeStream
	var kinds []contextos.EventKind
	var final *contextos.Result
	for e, err := range h.Runtime.Stream(context.Background(), req, rc) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, e.Kind)
		if e.Kind == contextos.EventResult {
			final = e.Final
		}
	}
	want := []contextos.EventKind{"compiled", "plan", "verdict", "tool_call", "tool_result", "tool_call", "tool_result", "verdict",
		"plan", "verdict", "tool_call", "tool_result", "pause", "decision", "result"}
	if !slices.Equal(kinds, want) {
		t.Errorf("events = %v\nwant     %v", kinds, want)
	}
	if final == nil || final.Status != decision.Deferred {
		t.Errorf("final = %+v", final)
	}
}

func TestStreamStopsWhenTheConsumerStops(t *testing.T) {
	planner := contextostest.NewPlanner(lookupPlan(), refundPlan(1200))
	h := harness(t, planner, nil)
	req, rc := refundRequest(t, 1200, true)
	n := 0
	for e := range h.Runtime.Stream(context.Background(), req, rc) {
		n++
		if e.Kind == contextos.EventPlan {
			break
		}
	}
	if n != 2 {
		t.Errorf("consumed %d events", n)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
}

func TestStreamReportsInvalidRequestAsErrorEvent(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(), nil)
	req, rc := refundRequest(t, 1200, true)
	req.ContextPackRefs = []string{"ctxpack.support@latest"}
	n := 0
	for e, err := range h.Runtime.Stream(context.Background(), req, rc) {
		n++
		if err == nil || e.Kind != contextos.EventError {
			t.Errorf("event %s, err %v", e.Kind, err)
		}
	}
	if n != 1 {
		t.Errorf("the stream yielded %d events, want one error event", n)
	}
}

func TestLongRunningCheckpointsEveryStep(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
	req, rc := refundRequest(t, 1200, true)
	req.Mode = runcontext.ModeLongRunning
	counts := map[contextos.EventKind]int{}
	for e, err := range h.Runtime.Stream(context.Background(), req, rc) {
		if err != nil {
			t.Fatal(err)
		}
		counts[e.Kind]++
		if e.Kind == contextos.EventProgress {
			cp, err := loadState(context.Background(), h.Checkpoints, rc.RunID)
			if err != nil || len(cp.Results) == 0 {
				t.Errorf("no checkpoint after a step: %v", err)
			}
		}
	}
	// A heartbeat (an IN_FLIGHT checkpoint) before each of the two planner
	// turns and after each of the three steps; progress after each step.
	if counts[contextos.EventProgress] != 3 || counts[contextos.EventHeartbeat] != 5 {
		t.Errorf("events = %v", counts)
	}
}
