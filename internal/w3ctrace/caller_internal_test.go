package w3ctrace

import (
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/runcontext"
)

// injected is what an injection writes, in order.
func injected(inject func(set func(key, value string))) []string {
	var out []string
	inject(func(k, v string) { out = append(out, k, v) })
	return out
}

// sameInjection fails unless a Caller of tr writes, under ctx, the headers
// Inject(Outbound(ctx, tr)) writes, and gives the remote parent
// ContextWithParent gives.
func sameInjection(t *testing.T, ctx context.Context, tr runcontext.Trace) {
	t.Helper()
	want := injected(func(set func(k, v string)) { Inject(Outbound(ctx, tr), set) })
	c := Parse(tr)
	got := injected(func(set func(k, v string)) { c.InjectOutbound(ctx, set) })
	if !slices.Equal(got, want) {
		t.Fatalf("%+v under %v: InjectOutbound writes %q; Inject(Outbound) writes %q", tr, trace.SpanContextFromContext(ctx), got, want)
	}
	var wantParent trace.SpanContext
	if trace.SpanContextFromContext(ctx).IsValid() {
		wantParent = trace.SpanContextFromContext(ctx)
	} else if sc, err := spanContext(tr); err == nil {
		wantParent = sc
	}
	gotParent := trace.SpanContextFromContext(c.ContextWithParent(ctx))
	if !gotParent.Equal(wantParent) || gotParent.TraceState().String() != wantParent.TraceState().String() {
		t.Fatalf("%+v: ContextWithParent's parent is %v; spanContext gives %v", tr, gotParent, wantParent)
	}
}

// contexts are the contexts an attempt's headers are written under: none
// of a span, the caller's own remote parent (a no-op tracer's span), a
// span of its own with each flag byte that matters, and a run context's
// trace.
func contexts(t *testing.T, tr runcontext.Trace) []context.Context {
	bg := context.Background()
	out := []context.Context{bg, ContextWithParent(bg, tr)}
	id, _ := trace.TraceIDFromHex(tid)
	other, _ := trace.SpanIDFromHex("1122334455667788")
	for _, f := range []trace.TraceFlags{0, 1, 2, 3, 4, 0x81, 0xff} {
		out = append(out, trace.ContextWithSpanContext(bg, trace.NewSpanContext(trace.SpanContextConfig{TraceID: id, SpanID: other, TraceFlags: f})))
	}
	if sc, err := spanContext(tr); err == nil {
		out = append(out, trace.ContextWithSpanContext(bg, sc.WithTraceFlags(sc.TraceFlags()|4)))
	}
	rc := &runcontext.RunContext{TraceContext: &runcontext.TraceContext{TraceParent: "00-" + tid + "-" + sid + "-01", TraceState: "rojo=1"}}
	out = append(out, runcontext.NewContext(bg, rc))
	m, _ := baggage.NewMemberRaw("tenant", "acme")
	b, _ := baggage.New(m)
	out = append(out, baggage.ContextWithBaggage(bg, b))
	return out
}

// A Caller's headers and parent are those of the functions that parse the
// caller's text each time.
func TestInjectOutboundIsInjectOfOutbound(t *testing.T) {
	for _, tr := range []runcontext.Trace{
		{TraceID: tid, SpanID: sid},
		{TraceID: tid, SpanID: sid, TraceFlags: "01", TraceState: "congo=t61rcWkgMzE", Baggage: "k=v"},
		{TraceID: tid, SpanID: sid, TraceFlags: "03"},
		{TraceID: tid, SpanID: sid, TraceFlags: "04"},
		{TraceID: tid, SpanID: sid, TraceState: "not a tracestate!", Baggage: "not baggage;;="},
		{TraceID: "4BF92F3577B34DA6A3CE929D0E0E4736", SpanID: sid},
		{TraceID: "00000000000000000000000000000000", SpanID: sid},
		{},
	} {
		for _, ctx := range contexts(t, tr) {
			sameInjection(t, ctx, tr)
		}
	}
}

func FuzzInjectOutboundIsInjectOfOutbound(f *testing.F) {
	f.Add(tid, sid, "01", "congo=t61rcWkgMzE", "k=v")
	f.Add(tid, sid, "04", "", "")
	f.Add("", "", "", "", "")
	f.Fuzz(func(t *testing.T, traceID, spanID, flags, state, bag string) {
		tr := runcontext.Trace{TraceID: traceID, SpanID: spanID, TraceFlags: flags, TraceState: state, Baggage: bag}
		for _, ctx := range contexts(t, tr) {
			sameInjection(t, ctx, tr)
		}
	})
}
