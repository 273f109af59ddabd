package runcontext

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/internal/canon"
)

// W3C header names.
const (
	headerTraceparent = "traceparent"
	headerTracestate  = "tracestate"
)

// traceContext extracts a span context from the traceparent and
// tracestate headers (headerCarrier). The baggage header is parsed on its
// own (TraceFromHeaders): a baggage propagator would find none in the
// carrier.
var traceContext propagation.TraceContext

// headerCarrier carries a TraceContext's traceparent and tracestate
// headers to the propagator, as a map holding those two would, without
// making the map.
type headerCarrier struct{ traceparent, tracestate string }

func (c headerCarrier) Get(key string) string {
	switch key {
	case headerTraceparent:
		return c.traceparent
	case headerTracestate:
		return c.tracestate
	}
	return ""
}

func (headerCarrier) Set(string, string) {}

func (headerCarrier) Keys() []string { return []string{headerTraceparent, headerTracestate} }

// ParseTraceparent parses a W3C traceparent header with the OpenTelemetry
// propagator: version-traceid-spanid-flags in lowercase hex, ids not all
// zero.
func ParseTraceparent(s string) (Trace, error) {
	return TraceFromHeaders(TraceContext{TraceParent: s})
}

// TraceFromHeaders parses the three W3C headers. A tracestate or baggage
// header that does not parse is an error (never silently dropped).
func TraceFromHeaders(tc TraceContext) (Trace, error) {
	if len(tc.TraceParent) > 512 {
		return Trace{}, fmt.Errorf("%w: traceparent too long", ErrTraceContext)
	}
	ctx := traceContext.Extract(context.Background(), headerCarrier{tc.TraceParent, tc.TraceState})
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
		TraceFlags: flagsHex(byte(sc.TraceFlags())),
		TraceState: tc.TraceState,
		Baggage:    tc.Baggage,
	}, nil
}

// flagsHex is fmt.Sprintf("%02x", b).
func flagsHex(b byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&0xf]})
}

// Traceparent returns the version-00 traceparent header for t.
func (t Trace) Traceparent() string {
	flags := t.TraceFlags
	if flags == "" {
		flags = "00"
	}
	return "00-" + t.TraceID + "-" + t.SpanID + "-" + flags
}

// Headers returns t as the three W3C headers.
func (t Trace) Headers() TraceContext {
	return TraceContext{TraceParent: t.Traceparent(), TraceState: t.TraceState, Baggage: t.Baggage}
}

func checkTraceID(ps *problems, path, id string) {
	switch {
	case id == "":
		ps.add(path, CodeRequired, "is required (32 lowercase hex)")
	case !canon.IsLowerHex(id, 32):
		ps.add(path, CodeFormat, "must be 32 lowercase hex digits")
	case strings.Trim(id, "0") == "":
		ps.add(path, CodeFormat, "must not be all zeros")
	}
}

func checkTrace(ps *problems, path string, t Trace) {
	// A member's path is written only when it has a problem: every
	// request is checked, and most are well formed.
	if !validID(t.TraceID, 32) {
		checkTraceID(ps, path+".trace_id", t.TraceID)
	}
	switch {
	case t.SpanID == "":
		ps.add(path+".span_id", CodeRequired, "is required (16 lowercase hex)")
	case !canon.IsLowerHex(t.SpanID, 16):
		ps.add(path+".span_id", CodeFormat, "must be 16 lowercase hex digits")
	case strings.Trim(t.SpanID, "0") == "":
		ps.add(path+".span_id", CodeFormat, "must not be all zeros")
	}
	if t.TraceFlags != "" && !canon.IsLowerHex(t.TraceFlags, 2) {
		ps.add(path+".trace_flags", CodeFormat, "must be 2 lowercase hex digits")
	}
	if t.TraceState != "" {
		checkTraceState(ps, path+".tracestate", t.TraceState)
	}
	if t.Baggage != "" {
		checkBaggage(ps, path+".baggage", t.Baggage)
	}
}

// plainTraceparent reports whether tp is a version-00 traceparent of
// traceID, 00-<traceID>-<16 lowercase hex>-<flags 00 to 03>, with ids
// not all zeros: one ParseTraceparent accepts, with traceID for its
// trace id, read without the propagator (and its context and strings).
// Any other traceparent is left to ParseTraceparent.
func plainTraceparent(tp, traceID string) bool {
	return len(tp) == 55 && tp[:3] == "00-" && tp[3:35] == traceID && validID(traceID, 32) &&
		tp[35] == '-' && validID(tp[36:52], 16) && tp[52] == '-' && tp[53] == '0' && tp[54] >= '0' && tp[54] <= '3'
}

// validID reports whether id is n lowercase hex digits, not all zeros:
// a trace or span id checkTraceID and checkTrace pass.
func validID(id string, n int) bool {
	return canon.IsLowerHex(id, n) && strings.Trim(id, "0") != ""
}

func checkTraceState(ps *problems, path, s string) {
	if s == "" {
		return
	}
	if _, err := trace.ParseTraceState(s); err != nil {
		ps.add(path, CodeFormat, "is not a valid W3C tracestate")
	}
}

func checkBaggage(ps *problems, path, s string) {
	if s == "" {
		return
	}
	if _, err := baggage.Parse(s); err != nil {
		ps.add(path, CodeFormat, "is not a valid W3C baggage header")
	}
}
