// Package w3ctrace propagates a run's W3C trace context (traceparent,
// tracestate, baggage) on the runtime's own outbound calls: the parent a
// tool attempt carries, the remote parent a span joins, the headers
// written, and baggage edits. It works on runcontext.Trace, the wire form
// an invoke request carries (runcontext parses and validates it); the
// transports and the run engine use it.
package w3ctrace

import (
	"context"
	"fmt"
	"github.com/contextos/contextos/internal/sortedkeys"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/runcontext"
)

// W3C header names, lower-case as gRPC metadata and MCP _meta want them.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
	HeaderBaggage     = "baggage"
)

var w3c = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Sampled reports whether t's sampled flag is set.
func Sampled(t runcontext.Trace) bool {
	sc, err := spanContext(t)
	return err == nil && sc.IsSampled()
}

func spanContext(t runcontext.Trace) (trace.SpanContext, error) {
	scc, ok := parseIDs(t)
	if !ok {
		return trace.SpanContext{}, fmt.Errorf("%w: invalid trace or span id", runcontext.ErrTraceContext)
	}
	// A tracestate that does not parse is dropped and never affects the
	// traceparent, as the W3C specification and OpenTelemetry's
	// propagator say.
	scc.TraceState, _ = trace.ParseTraceState(t.TraceState)
	scc.Remote = true
	return trace.NewSpanContext(scc), nil
}

// extractSpanContext is spanContext through OpenTelemetry's W3C
// propagator: the definition spanContext and parseIDs are held to
// (TestSpanContextMatchesPropagator, FuzzSpanContextMatchesPropagator).
// A version-00 traceparent is exactly 55 characters (W3C Trace Context,
// section 3.2); the propagator also takes one with a trailing '-' (flags
// "00-"), which the specification and runcontext refuse, so such a header
// is refused here before the propagator reads it.
func extractSpanContext(t runcontext.Trace) (trace.SpanContext, error) {
	tp := t.Traceparent()
	if len(tp) != 55 {
		return trace.SpanContext{}, fmt.Errorf("%w: invalid trace or span id", runcontext.ErrTraceContext)
	}
	ctx := w3c.Extract(context.Background(), propagation.MapCarrier{HeaderTraceparent: tp, HeaderTracestate: t.TraceState})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return sc, fmt.Errorf("%w: invalid trace or span id", runcontext.ErrTraceContext)
	}
	return sc, nil
}

// parseIDs reads the ids and flags of t.Traceparent() as the version-00
// W3C propagator does, without building the header: 32 and 16 lower-case
// hex digits, neither all zeros, and flags of two lower-case hex digits
// with no reserved bit set ("00" when empty). ok is false for anything
// else.
func parseIDs(t runcontext.Trace) (scc trace.SpanContextConfig, ok bool) {
	flags := t.TraceFlags
	if flags == "" {
		flags = "00"
	}
	var f [1]byte
	if !lowerHex(scc.TraceID[:], t.TraceID) || !lowerHex(scc.SpanID[:], t.SpanID) || !lowerHex(f[:], flags) || f[0] > 3 {
		return trace.SpanContextConfig{}, false
	}
	scc.TraceFlags = trace.TraceFlags(f[0]) & (trace.FlagsSampled | trace.FlagsRandom)
	if !scc.TraceID.IsValid() || !scc.SpanID.IsValid() {
		return trace.SpanContextConfig{}, false
	}
	return scc, true
}

// lowerHex decodes s, exactly 2*len(dst) lower-case hex digits, into dst.
func lowerHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, lo := hexValue[s[2*i]], hexValue[s[2*i+1]]
		if hi|lo > 0xf {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

// hexValue is the value of each lower-case hex digit, 0xff for every other
// byte.
var hexValue = func() (t [256]byte) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9':
			t[c] = byte(c - '0')
		case 'a' <= c && c <= 'f':
			t[c] = byte(c - 'a' + 10)
		default:
			t[c] = 0xff
		}
	}
	return t
}()

// Caller is a caller's trace context with its ids and flags parsed once:
// one attempt parses its caller's context here and uses it for the
// remote parent (ContextWithParent) and the headers it writes
// (InjectOutbound), rather than parsing the same text for each.
type Caller struct {
	t   runcontext.Trace
	scc trace.SpanContextConfig // parseIDs(t) when ok
	ok  bool
}

// Parse parses t's ids and flags as parseIDs does. A Caller of a t that
// is not a valid trace context is usable: it gives no remote parent, and
// its outbound context falls back as Outbound's does.
func Parse(t runcontext.Trace) Caller {
	scc, ok := parseIDs(t)
	return Caller{t: t, scc: scc, ok: ok}
}

// ContextWithParent returns ctx with t as its remote parent span when ctx
// has no valid span context of its own and t is a valid trace context, so
// a span started from it joins the caller's trace (keeping the caller's
// flags and tracestate). Otherwise it returns ctx unchanged.
func ContextWithParent(ctx context.Context, t runcontext.Trace) context.Context {
	c := Parse(t)
	return c.ContextWithParent(ctx)
}

// ContextWithParent is the package's ContextWithParent of c's trace
// context, without parsing it again.
func (c *Caller) ContextWithParent(ctx context.Context) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() || !c.ok {
		return ctx
	}
	scc := c.scc
	// A tracestate that does not parse is dropped, as spanContext drops
	// it.
	scc.TraceState, _ = trace.ParseTraceState(c.t.TraceState)
	scc.Remote = true
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(scc))
}

// Inject writes the W3C headers of t through set (for example
// http.Header.Set). It writes nothing for an invalid trace.
func Inject(t runcontext.Trace, set func(key, value string)) {
	if _, ok := parseIDs(t); !ok {
		return
	}
	inject(t, set)
}

// inject is Inject of a t whose ids parse.
func inject(t runcontext.Trace, set func(key, value string)) {
	h := t.Headers()
	set(HeaderTraceparent, h.TraceParent)
	if h.TraceState != "" {
		set(HeaderTracestate, h.TraceState)
	}
	if h.Baggage != "" {
		set(HeaderBaggage, h.Baggage)
	}
}

// InjectOutbound writes through set the headers
// Inject(Outbound(ctx, t), set) writes for c's trace context t, without
// parsing t's ids again, nor those of the outbound context when they are
// t's own or a valid span's (TestInjectOutboundIsInjectOfOutbound,
// FuzzInjectOutboundIsInjectOfOutbound).
func (c *Caller) InjectOutbound(ctx context.Context, set func(key, value string)) {
	if out, valid := c.outbound(ctx); valid {
		inject(out, set)
	}
}

// BaggageMembers returns the baggage as key → value, parsed by the
// OpenTelemetry baggage package.
func BaggageMembers(t runcontext.Trace) (map[string]string, error) {
	b, err := baggage.Parse(t.Baggage)
	if err != nil {
		return nil, fmt.Errorf("%w: baggage does not parse", runcontext.ErrTraceContext)
	}
	out := make(map[string]string, b.Len())
	for _, m := range b.Members() {
		out[m.Key()] = m.Value()
	}
	return out, nil
}

// WithBaggage returns t with the members set (replacing same-named ones).
// Keys and values are encoded by the OpenTelemetry baggage package.
func WithBaggage(t runcontext.Trace, kv map[string]string) (runcontext.Trace, error) {
	b, err := baggage.Parse(t.Baggage)
	if err != nil {
		return t, fmt.Errorf("%w: baggage does not parse", runcontext.ErrTraceContext)
	}
	for _, k := range sortedkeys.Of(kv) {
		m, err := baggage.NewMemberRaw(k, kv[k])
		if err != nil {
			return t, fmt.Errorf("%w: baggage member %q: %w", runcontext.ErrTraceContext, k, err)
		}
		if b, err = b.SetMember(m); err != nil {
			return t, fmt.Errorf("%w: baggage member %q: %w", runcontext.ErrTraceContext, k, err)
		}
	}
	// Members() order is unspecified; write them sorted so output is stable.
	ms := b.Members()
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	slices.Sort(parts)
	t.Baggage = strings.Join(parts, ",")
	return t, nil
}

// Outbound returns the W3C trace context a call made under ctx carries to
// a tool (seed 000: every plane re-emits traceparent on its outbound
// calls). t is the caller's trace context (a run's, as the gateway passes
// it on).
//
// The parent is the current span of ctx when it has a valid span context:
// its trace and span ids and its trace flags, so the sampled flag is the
// one the tracer decided, and its tracestate (t's when the span carries
// none and is in t's trace). With no active span the parent is t itself,
// flags included; when t is not a valid trace context either, the trace
// context of the RunContext in ctx (FromContext) is used the same way.
// Baggage is the caller's, with the members of ctx's OpenTelemetry
// baggage set over it (sorted when merged, verbatim otherwise). A
// tracestate or baggage that does not parse is left out, never forwarded
// as text. The zero Trace when no trace context is valid (Inject writes
// nothing for it).
func Outbound(ctx context.Context, t runcontext.Trace) runcontext.Trace {
	c := Parse(t)
	out, _ := c.outbound(ctx)
	return out
}

// outbound is Outbound(ctx, c.t), and whether its ids and flags parse
// (parseIDs), known without parsing them when they are c's own (which
// parsed) or a valid span context's (lower-case hex of ids that are not
// all zeros: they parse exactly when the flags have no bit above
// FlagsRandom).
func (c *Caller) outbound(ctx context.Context) (runcontext.Trace, bool) {
	caller, ok := c.t, c.ok
	if !ok {
		caller = runcontext.Trace{}
		if rc, ok := runcontext.FromContext(ctx); ok && rc.TraceContext != nil {
			if rt, err := runcontext.TraceFromHeaders(*rc.TraceContext); err == nil {
				caller = rt
			}
		}
	}
	if caller.TraceState != "" {
		if _, err := trace.ParseTraceState(caller.TraceState); err != nil {
			caller.TraceState = ""
		}
	}
	if caller.Baggage != "" {
		if _, err := baggage.Parse(caller.Baggage); err != nil {
			caller.Baggage = ""
		}
	}
	out, valid := caller, ok
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		if ok { // caller is t, whose ids parsed
			out = spanTrace(sc, caller, c.scc)
		} else {
			out = formatSpanTrace(sc, caller)
		}
		// The ids are caller's (which parsed, as did its flags, which are
		// then sc's) or sc's formatted.
		valid = byte(sc.TraceFlags()) <= byte(trace.FlagsSampled|trace.FlagsRandom)
	} else if !ok {
		_, valid = parseIDs(out) // the run context's, or none
	}
	if out.TraceID == "" {
		return runcontext.Trace{}, false
	}
	out.Baggage = mergeBaggage(caller.Baggage, baggage.FromContext(ctx))
	return out, valid
}

// spanTrace is the trace context of the current span sc for a call whose
// caller's trace context is caller (tracestate valid or empty): sc's ids,
// flags and tracestate, or caller's tracestate when sc carries none and is
// in caller's trace. When sc is caller's own context (ContextWithParent's
// remote parent, under a tracer that starts no span of its own), the ids
// are caller's text, which is what formatting sc's would write
// (TestSpanTraceOfTheCallersContext).
//
// scc is parseIDs(caller), whose ids parse.
func spanTrace(sc trace.SpanContext, caller runcontext.Trace, scc trace.SpanContextConfig) runcontext.Trace {
	if sc.TraceID() == scc.TraceID && sc.SpanID() == scc.SpanID && sc.TraceFlags() == scc.TraceFlags {
		out := runcontext.Trace{TraceID: caller.TraceID, SpanID: caller.SpanID, TraceFlags: caller.TraceFlags, TraceState: sc.TraceState().String()}
		if out.TraceFlags == "" {
			out.TraceFlags = "00" // parseIDs reads no flags as 00
		}
		if out.TraceState == "" {
			out.TraceState = caller.TraceState
		}
		return out
	}
	return formatSpanTrace(sc, caller)
}

// formatSpanTrace is spanTrace for any sc: its ids and flags formatted.
func formatSpanTrace(sc trace.SpanContext, caller runcontext.Trace) runcontext.Trace {
	out := runcontext.Trace{TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String(), TraceFlags: fmt.Sprintf("%02x", byte(sc.TraceFlags())),
		TraceState: sc.TraceState().String()}
	if out.TraceState == "" && out.TraceID == caller.TraceID {
		out.TraceState = caller.TraceState
	}
	return out
}

// mergeBaggage sets the members of over on the header base (which
// parses): base verbatim when over is empty, else every member sorted.
func mergeBaggage(base string, over baggage.Baggage) string {
	if over.Len() == 0 {
		return base
	}
	b, _ := baggage.Parse(base)
	for _, m := range over.Members() {
		if nb, err := b.SetMember(m); err == nil {
			b = nb
		}
	}
	ms := b.Members()
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
