package runcontext

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceFromHeadersReference is TraceFromHeaders as it was written first:
// the composite W3C propagator over a map carrier, the flags through
// fmt. FuzzTraceFromHeadersReference holds TraceFromHeaders to it.
func traceFromHeadersReference(tc TraceContext) (Trace, error) {
	if len(tc.TraceParent) > 512 {
		return Trace{}, fmt.Errorf("%w: traceparent too long", ErrTraceContext)
	}
	w3c := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	ctx := w3c.Extract(context.Background(), propagation.MapCarrier{headerTraceparent: tc.TraceParent, headerTracestate: tc.TraceState})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return Trace{}, fmt.Errorf("%w: traceparent is not version-traceid-spanid-flags in lowercase hex with non-zero ids", ErrTraceContext)
	}
	if tc.TraceState != "" && sc.TraceState().Len() == 0 {
		return Trace{}, fmt.Errorf("%w: tracestate does not parse", ErrTraceContext)
	}
	if tc.Baggage != "" {
		if _, err := baggage.Parse(tc.Baggage); err != nil {
			return Trace{}, fmt.Errorf("%w: baggage does not parse", ErrTraceContext)
		}
	}
	return Trace{
		TraceID:    sc.TraceID().String(),
		SpanID:     sc.SpanID().String(),
		TraceFlags: fmt.Sprintf("%02x", byte(sc.TraceFlags())),
		TraceState: tc.TraceState,
		Baggage:    tc.Baggage,
	}, nil
}

// TraceFromHeaders parses (and refuses) exactly what the composite
// propagator over a map carrier did, and returns the same trace.
func FuzzTraceFromHeadersReference(f *testing.F) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-"
	for _, flags := range []string{"00", "01", "02", "03", "04", "ff", "0F"} {
		f.Add(tp+flags, "", "")
	}
	f.Add(tp+"01", "vendor=a,other=b", "k=v;p=1")
	f.Add(tp+"01", "bad state", "")
	f.Add(tp+"01", "", "not baggage ;;")
	f.Add(tp+"01-extra", "", "")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-09-future", "a=b", "")
	f.Add("ff-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-01", "", "")
	f.Add("00-00000000000000000000000000000000-b9c7c989f97918e1-01", "", "")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, traceparent, tracestate, bag string) {
		tc := TraceContext{TraceParent: traceparent, TraceState: tracestate, Baggage: bag}
		got, gerr := TraceFromHeaders(tc)
		want, werr := traceFromHeadersReference(tc)
		if got != want || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("%+v: %+v, %v; the reference: %+v, %v", tc, got, gerr, want, werr)
		}
	})
}
