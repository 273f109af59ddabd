package w3ctrace_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/contextos/contextos/internal/w3ctrace"
	"github.com/contextos/contextos/runcontext"
)

// version00 is a traceparent the W3C Trace Context (level 1) allows a
// sender to write: version 00, lower-case hex ids that are not all zeros.
var version00 = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// sameAsPropagator fails unless the headers an attempt under the caller's
// own context (a tracer that starts no span, as ContextWithParent and a
// no-op tracer leave it) carries are the ones OpenTelemetry's W3C
// propagator writes for that context: a caller trace with upper-case,
// all-zero, short or long ids, version ff or bad flags is never passed on
// as its text.
func sameAsPropagator(t *testing.T, caller runcontext.Trace) {
	t.Helper()
	ctx := w3ctrace.ContextWithParent(context.Background(), caller)
	ctx, span := noop.NewTracerProvider().Tracer("t").Start(ctx, "attempt")
	defer span.End()
	got := map[string]string{}
	w3ctrace.Inject(w3ctrace.Outbound(ctx, caller), func(k, v string) { got[k] = v })
	want := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, want)
	if got[w3ctrace.HeaderTraceparent] != want.Get("traceparent") {
		t.Fatalf("%+v: traceparent %q, the propagator's %q", caller, got[w3ctrace.HeaderTraceparent], want.Get("traceparent"))
	}
	if tp := got[w3ctrace.HeaderTraceparent]; tp != "" && (!version00.MatchString(tp) || strings.Contains(tp, strings.Repeat("0", 32)) || strings.Contains(tp, "-"+strings.Repeat("0", 16)+"-")) {
		t.Fatalf("%+v: traceparent %q is not one W3C allows", caller, tp)
	}
	// The caller's tracestate travels as its text (Outbound), which may
	// differ from the propagator's rendering of it (white space, empty
	// members) but never in what it says.
	gotState, err := trace.ParseTraceState(got[w3ctrace.HeaderTracestate])
	if err != nil || gotState.String() != want.Get("tracestate") {
		t.Fatalf("%+v: tracestate %q (%v), the propagator's %q", caller, got[w3ctrace.HeaderTracestate], err, want.Get("tracestate"))
	}
}

func TestOutboundUnderTheCallersContextIsThePropagators(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, c := range []runcontext.Trace{
		{TraceID: tid, SpanID: sid}, {TraceID: tid, SpanID: sid, TraceFlags: "01"}, {TraceID: tid, SpanID: sid, TraceFlags: "03"},
		{TraceID: strings.ToUpper(tid), SpanID: sid, TraceFlags: "01"}, {TraceID: tid, SpanID: strings.ToUpper(sid)},
		{TraceID: tid, SpanID: sid, TraceFlags: "0A"}, {TraceID: tid, SpanID: sid, TraceFlags: "ff"}, {TraceID: tid, SpanID: sid, TraceFlags: "04"},
		{TraceID: tid, SpanID: sid, TraceFlags: "1"}, {TraceID: tid, SpanID: sid, TraceFlags: "001"},
		{TraceID: strings.Repeat("0", 32), SpanID: sid}, {TraceID: tid, SpanID: strings.Repeat("0", 16)},
		{TraceID: tid[:31], SpanID: sid}, {TraceID: tid + "0", SpanID: sid}, {TraceID: "ff-" + tid[3:], SpanID: sid},
		{TraceID: tid[:30] + "-0", SpanID: sid}, {TraceID: tid[:31] + "\x00", SpanID: sid}, {TraceID: tid[:31] + "é"[:1], SpanID: sid},
		{TraceID: tid, SpanID: sid, TraceFlags: "01", TraceState: "Bad=State"}, {TraceID: tid, SpanID: sid, TraceState: " a=1 , b=2 "},
	} {
		sameAsPropagator(t, c)
	}
}

func FuzzOutboundUnderTheCallersContextIsThePropagators(f *testing.F) {
	f.Add("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "01", "a=1")
	f.Add("4BF92F3577B34DA6A3CE929D0E0E4736", "00f067aa0ba902b7", "FF", "")
	f.Fuzz(func(t *testing.T, traceID, spanID, flags, state string) {
		sameAsPropagator(t, runcontext.Trace{TraceID: traceID, SpanID: spanID, TraceFlags: flags, TraceState: state})
	})
}
