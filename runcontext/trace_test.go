package runcontext

import (
	"context"
	"errors"
	"testing"
)

func TestParseTraceparent(t *testing.T) {
	tr, err := ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-01")
	if err != nil {
		t.Fatal(err)
	}
	if tr.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || tr.SpanID != "b9c7c989f97918e1" || tr.TraceFlags != "01" {
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

func TestTraceHeaders(t *testing.T) {
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
	if _, err := TraceFromHeaders(TraceContext{TraceParent: tc.TraceParent, Baggage: "=x"}); !errors.Is(err, ErrTraceContext) {
		t.Errorf("bad baggage: %v", err)
	}
	if _, err := TraceFromHeaders(TraceContext{TraceParent: tc.TraceParent, TraceState: "###"}); !errors.Is(err, ErrTraceContext) {
		t.Errorf("bad tracestate: %v", err)
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
