package runcontext

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

func TestParseTraceparent(t *testing.T) {
	tr, err := ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-01")
	if err != nil {
		t.Fatal(err)
	}
	if tr.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || tr.SpanID != "b9c7c989f97918e1" || tr.TraceFlags != "01" || !tr.Sampled() {
		t.Errorf("ParseTraceparent = %+v", tr)
	}
	if tr.Traceparent() != "00-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-01" {
		t.Errorf("Traceparent() = %s", tr.Traceparent())
	}
	for _, bad := range []string{
		"",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1",
		"00-00000000000000000000000000000000-b9c7c989f97918e1-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-b9c7c989f97918e1-01",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-01",
		"00-4bf92f3577b34da6a3ce929d0e0e473-b9c7c989f97918e1-01",
	} {
		if _, err := ParseTraceparent(bad); !errors.Is(err, ErrTraceContext) {
			t.Errorf("ParseTraceparent(%q) = %v, want ErrTraceContext", bad, err)
		}
	}
}

func TestTraceHeadersAndBaggage(t *testing.T) {
	tc := TraceContext{
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-01",
		TraceState:  "tenant=tenant_acme_prod,ctxpack=ctxpack.support@5.2.0",
		Baggage:     "session_id=sess_42f1,decision_id=support.refund.execute,run_id=run_a1b2c3d4e5f60718",
	}
	tr, err := TraceFromHeaders(tc)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Headers() != tc {
		t.Errorf("Headers() = %+v, want %+v", tr.Headers(), tc)
	}
	m, err := tr.BaggageMembers()
	if err != nil || m["run_id"] != "run_a1b2c3d4e5f60718" || len(m) != 3 {
		t.Errorf("BaggageMembers = %v, %v", m, err)
	}
	tr2, err := tr.WithBaggage(map[string]string{"tenant": "tenant_acme_prod", "run_id": "run_x"})
	if err != nil {
		t.Fatal(err)
	}
	if tr2.Baggage != "decision_id=support.refund.execute,run_id=run_x,session_id=sess_42f1,tenant=tenant_acme_prod" {
		t.Errorf("WithBaggage = %s", tr2.Baggage)
	}
	h := http.Header{}
	tr2.Inject(h.Set)
	if h.Get("traceparent") != tc.TraceParent || h.Get("tracestate") != tc.TraceState || h.Get("baggage") != tr2.Baggage {
		t.Errorf("Inject wrote %v", h)
	}
	empty := http.Header{}
	Trace{TraceID: "bad"}.Inject(empty.Set)
	if len(empty) != 0 {
		t.Errorf("Inject of invalid trace wrote %v", empty)
	}
	if _, err := TraceFromHeaders(TraceContext{TraceParent: tc.TraceParent, Baggage: "=x"}); !errors.Is(err, ErrTraceContext) {
		t.Errorf("bad baggage: %v", err)
	}
	if _, err := TraceFromHeaders(TraceContext{TraceParent: tc.TraceParent, TraceState: "###"}); !errors.Is(err, ErrTraceContext) {
		t.Errorf("bad tracestate: %v", err)
	}
	if _, err := (Trace{Baggage: "=x"}).BaggageMembers(); !errors.Is(err, ErrTraceContext) {
		t.Errorf("BaggageMembers bad: %v", err)
	}
}

func TestContextHelpers(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Error("empty context carries a run context")
	}
	rc := &RunContext{RunID: "run_1"}
	got, ok := FromContext(NewContext(context.Background(), rc))
	if !ok || got != rc {
		t.Errorf("FromContext = %v, %v", got, ok)
	}
	if _, ok := FromContext(NewContext(context.Background(), nil)); ok {
		t.Error("nil run context reported present")
	}
}
