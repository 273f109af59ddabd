package w3ctrace_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/contextos/contextos/internal/w3ctrace"
	"github.com/contextos/contextos/runcontext"
)

func TestSampled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		trace runcontext.Trace
		want  bool
	}{
		{"sampled", runcontext.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "b9c7c989f97918e1", TraceFlags: "01"}, true},
		{"not sampled", runcontext.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "b9c7c989f97918e1", TraceFlags: "00"}, false},
		{"no flags", runcontext.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "b9c7c989f97918e1"}, false},
		{"invalid ids", runcontext.Trace{TraceID: "bad", SpanID: "x", TraceFlags: "01"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := w3ctrace.Sampled(tt.trace); got != tt.want {
				t.Errorf("Sampled = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBaggageAndInject(t *testing.T) {
	tc := runcontext.TraceContext{
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-01",
		TraceState:  "tenant=tenant_acme_prod,ctxpack=ctxpack.support@5.2.0",
		Baggage:     "session_id=sess_42f1,decision_id=support.refund.execute,run_id=run_a1b2c3d4e5f60718",
	}
	tr, err := runcontext.TraceFromHeaders(tc)
	if err != nil {
		t.Fatal(err)
	}
	m, err := w3ctrace.BaggageMembers(tr)
	if err != nil || m["run_id"] != "run_a1b2c3d4e5f60718" || len(m) != 3 {
		t.Errorf("BaggageMembers = %v, %v", m, err)
	}
	tr2, err := w3ctrace.WithBaggage(tr, map[string]string{"tenant": "tenant_acme_prod", "run_id": "run_x"})
	if err != nil {
		t.Fatal(err)
	}
	if tr2.Baggage != "decision_id=support.refund.execute,run_id=run_x,session_id=sess_42f1,tenant=tenant_acme_prod" {
		t.Errorf("WithBaggage = %s", tr2.Baggage)
	}
	h := http.Header{}
	w3ctrace.Inject(tr2, h.Set)
	if h.Get("traceparent") != tc.TraceParent || h.Get("tracestate") != tc.TraceState || h.Get("baggage") != tr2.Baggage {
		t.Errorf("Inject wrote %v", h)
	}
	empty := http.Header{}
	w3ctrace.Inject(runcontext.Trace{TraceID: "bad"}, empty.Set)
	if len(empty) != 0 {
		t.Errorf("Inject of invalid trace wrote %v", empty)
	}
	if _, err := w3ctrace.BaggageMembers(runcontext.Trace{Baggage: "=x"}); !errors.Is(err, runcontext.ErrTraceContext) {
		t.Errorf("BaggageMembers bad: %v", err)
	}
}
