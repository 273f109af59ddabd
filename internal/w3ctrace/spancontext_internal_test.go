package w3ctrace

import (
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/runcontext"
)

func sameSpanContext(t *testing.T, tr runcontext.Trace) {
	t.Helper()
	got, gotErr := spanContext(tr)
	want, wantErr := extractSpanContext(tr)
	if (gotErr == nil) != (wantErr == nil) || !got.Equal(want) || got.TraceState().String() != want.TraceState().String() {
		t.Fatalf("%+v: spanContext = %v, %v; the propagator gives %v, %v", tr, got, gotErr, want, wantErr)
	}
	if _, ok := parseIDs(tr); ok != (wantErr == nil) {
		t.Fatalf("%+v: parseIDs ok = %v; the propagator's error is %v", tr, ok, wantErr)
	}
}

const (
	tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	sid = "00f067aa0ba902b7"
)

// spanContext reads a trace as OpenTelemetry's W3C propagator reads the
// traceparent and tracestate built from it.
func TestSpanContextMatchesPropagator(t *testing.T) {
	for _, tr := range []runcontext.Trace{
		{TraceID: tid, SpanID: sid},
		{TraceID: tid, SpanID: sid, TraceFlags: "01"},
		{TraceID: tid, SpanID: sid, TraceFlags: "02"},
		{TraceID: tid, SpanID: sid, TraceFlags: "03"},
		{TraceID: tid, SpanID: sid, TraceFlags: "04"},
		{TraceID: tid, SpanID: sid, TraceFlags: "ff"},
		{TraceID: tid, SpanID: sid, TraceFlags: "0A"},
		{TraceID: tid, SpanID: sid, TraceFlags: "1"},
		{TraceID: tid, SpanID: sid, TraceFlags: "01-00"},
		{TraceID: tid, SpanID: sid, TraceFlags: "00-"},
		{TraceID: tid, SpanID: sid, TraceFlags: "01-"},
		{TraceID: "00000000000000000000000000000000", SpanID: sid},
		{TraceID: tid, SpanID: "0000000000000000"},
		{TraceID: "4BF92F3577B34DA6A3CE929D0E0E4736", SpanID: sid},
		{TraceID: tid[:31], SpanID: sid},
		{TraceID: tid + "0", SpanID: sid},
		{TraceID: tid + "-" + sid, SpanID: "", TraceFlags: "01"},
		{TraceID: tid[:16] + "-" + tid[17:], SpanID: sid},
		{TraceID: tid, SpanID: sid + "-01"},
		{TraceID: "", SpanID: ""},
		{TraceID: tid, SpanID: sid, TraceFlags: "01", TraceState: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
		{TraceID: tid, SpanID: sid, TraceState: "not a tracestate!"},
		{TraceID: tid, SpanID: sid, TraceState: "a=1,a=2"},
	} {
		sameSpanContext(t, tr)
	}
}

func FuzzSpanContextMatchesPropagator(f *testing.F) {
	f.Add(tid, sid, "01", "congo=t61rcWkgMzE")
	f.Add(tid+"-"+sid, "", "01", "")
	f.Add(tid, sid, "", "x")
	f.Fuzz(func(t *testing.T, traceID, spanID, flags, state string) {
		sameSpanContext(t, runcontext.Trace{TraceID: traceID, SpanID: spanID, TraceFlags: flags, TraceState: state})
	})
}

// sameSpanTrace fails unless spanTrace of caller's own context (and of a
// context that differs from it in one way) is what formatting the span
// context gives.
func sameSpanTrace(t *testing.T, caller runcontext.Trace) {
	t.Helper()
	if _, err := trace.ParseTraceState(caller.TraceState); err != nil {
		caller.TraceState = "" // Outbound drops a tracestate that does not parse
	}
	sc, err := spanContext(caller)
	if err != nil {
		return
	}
	scc, _ := parseIDs(caller)
	for _, c := range []trace.SpanContext{sc, sc.WithTraceFlags(sc.TraceFlags() ^ trace.FlagsSampled), sc.WithTraceState(trace.TraceState{}),
		sc.WithSpanID(trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}), sc.WithTraceID(trace.TraceID{1})} {
		if got, want := spanTrace(c, caller, scc), formatSpanTrace(c, caller); got != want {
			t.Fatalf("%+v under %v: spanTrace %+v, formatted %+v", caller, c, got, want)
		}
	}
}

func TestSpanTraceOfTheCallersContext(t *testing.T) {
	for _, tr := range []runcontext.Trace{
		{TraceID: tid, SpanID: sid},
		{TraceID: tid, SpanID: sid, TraceFlags: "00"},
		{TraceID: tid, SpanID: sid, TraceFlags: "01"},
		{TraceID: tid, SpanID: sid, TraceFlags: "02"},
		{TraceID: tid, SpanID: sid, TraceFlags: "03"},
		{TraceID: tid, SpanID: sid, TraceFlags: "01", TraceState: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
		{TraceID: tid, SpanID: sid, TraceFlags: "01", TraceState: " congo=t61rcWkgMzE , rojo=1 "},
		{TraceID: tid, SpanID: sid, TraceState: "not a tracestate!"},
	} {
		sameSpanTrace(t, tr)
	}
}

func FuzzSpanTraceOfTheCallersContext(f *testing.F) {
	f.Add(tid, sid, "01", "congo=t61rcWkgMzE")
	f.Add(tid, sid, "", " a=1 ,b=2")
	f.Fuzz(func(t *testing.T, traceID, spanID, flags, state string) {
		sameSpanTrace(t, runcontext.Trace{TraceID: traceID, SpanID: spanID, TraceFlags: flags, TraceState: state})
	})
}
