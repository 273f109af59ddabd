package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/planner"
	"github.com/contextos/contextos/planner/anthropic"
	"github.com/contextos/contextos/planner/internal/plannertest"
)

// capturedRequest is the canonical run's second plan request (with the
// lookup's and eval's results), recorded from a harness run.
func capturedRequest(t testing.TB) *contextos.PlanRequest {
	t.Helper()
	f := newFake(t, ok(lookupAndEval()), ok(refundAndDecide()))
	rec := &recorder{p: newPlanner(t, f, false, nil)}
	h := plannertest.New(t, rec, nil)
	contextostest.AssertPending(t, h.Invoke(), plannertest.FinanceGate)
	if len(rec.reqs) != 2 {
		t.Fatalf("%d plan requests", len(rec.reqs))
	}
	return rec.reqs[1]
}

// roundTrip is an http.RoundTripper from a function.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// streamBody is the SSE body the fake sends for rp.
func streamBody(rp reply) []byte {
	w := httptest.NewRecorder()
	writeStream(w, testModel, rp)
	return w.Body.Bytes()
}

// FuzzResponse feeds arbitrary response bodies, as JSON and as an event
// stream, through a planner turn: it never panics, and a plan it returns
// has usage the runtime accepts, a JSON form, and no steps when it asks to
// be replanned.
func FuzzResponse(f *testing.F) {
	req := capturedRequest(f)
	for _, a := range []*answer{lookupAndEval(), refundAndDecide(), {blocks: []block{text("hi")}, stop: "end_turn"},
		{blocks: []block{tool("t", fnLookup, `{"order_id":`)}, stop: "max_tokens", out: 9}, {stop: "refusal", refusal: "no"}} {
		f.Add(messageJSON(testModel, a), false)
		f.Add(streamBody(reply{answer: a}), true)
	}
	f.Add(streamBody(reply{answer: lookupAndEval(), cut: true}), true)
	f.Add(streamBody(reply{answer: lookupAndEval(), event: errorBody("overloaded_error")}), true)
	f.Add([]byte(`{"content":[{"type":"tool_use","input":[]}],"usage":{"input_tokens":-1}}`), false)
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		ctype := "application/json"
		if stream {
			ctype = "text/event-stream"
		}
		client := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ctype}}, Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
		})}
		p, err := anthropic.New(anthropic.Options{Model: testModel, APIKey: testKey, BaseURL: "http://127.0.0.1:9", HTTPClient: client,
			MaxRetries: -1, Stream: stream, Prices: map[string]planner.Price{testModel: testPrice}, Getenv: func(string) string { return "" }})
		if err != nil {
			t.Fatal(err)
		}
		plan, err := p.Plan(context.Background(), req)
		if err != nil {
			return
		}
		u := plan.Usage
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.CachedInputTokens < 0 || u.CachedInputTokens > u.InputTokens || u.CostCents < 0 || u.Tokens < 0 {
			t.Errorf("usage %+v", u)
		}
		if plan.Replan != "" && (len(plan.Steps) > 0 || plan.Decision != nil) {
			t.Errorf("a replan with steps: %+v", plan)
		}
		if _, err := json.Marshal(plan); err != nil {
			t.Errorf("plan has no JSON form: %v", err)
		}
	})
}

// BenchmarkPlan is one planner turn (the canonical second turn: render,
// request, the loopback API's answer, parse), batch and streamed.
func BenchmarkPlan(b *testing.B) {
	req := capturedRequest(b)
	for _, stream := range []bool{false, true} {
		b.Run(map[bool]string{false: "batch", true: "stream"}[stream], func(b *testing.B) {
			f := newFake(b)
			f.repeat = &reply{answer: refundAndDecide()}
			p := newPlanner(b, f, stream, nil)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				plan, err := p.Plan(ctx, req)
				if err != nil || plan.Decision == nil {
					b.Fatalf("plan %+v, %v", plan, err)
				}
			}
		})
	}
}
