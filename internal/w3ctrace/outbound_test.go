package w3ctrace_test

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/internal/w3ctrace"
	"github.com/contextos/contextos/runcontext"
)

// spanCtx is ctx with a current span: trace id tid, span id 1122…, flags
// and tracestate as given.
func spanCtx(t *testing.T, ctx context.Context, tid string, flags trace.TraceFlags, state string) context.Context {
	t.Helper()
	id, err := trace.TraceIDFromHex(tid)
	if err != nil {
		t.Fatal(err)
	}
	sid, _ := trace.SpanIDFromHex("1122334455667788")
	ts, err := trace.ParseTraceState(state)
	if err != nil {
		t.Fatal(err)
	}
	return trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: id, SpanID: sid, TraceFlags: flags, TraceState: ts}))
}

// headers are the three W3C headers an outbound call carries.
type headers struct{ TraceParent, TraceState, Baggage string }

func TestOutbound(t *testing.T) {
	t.Parallel()
	const (
		tid   = "4bf92f3577b34da6a3ce929d0e0e4736"
		other = "0af7651916cd43dd8448eb211c80319c"
		state = "tenant=tenant_acme_prod,ctxpack=ctxpack.support@5.2.0"
		bag   = "session_id=sess_42f1,run_id=run_a1b2c3d4e5f60718"
	)
	sampled := runcontext.Trace{TraceID: tid, SpanID: "b9c7c989f97918e1", TraceFlags: "01", TraceState: state, Baggage: bag}
	unsampled := sampled
	unsampled.TraceFlags = "00"
	bg := context.Background()
	withBag := func(ctx context.Context, kv ...string) context.Context {
		var ms []baggage.Member
		for i := 0; i < len(kv); i += 2 {
			m, err := baggage.NewMemberRaw(kv[i], kv[i+1])
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		b, err := baggage.New(ms...)
		if err != nil {
			t.Fatal(err)
		}
		return baggage.ContextWithBaggage(ctx, b)
	}
	rcCtx := runcontext.NewContext(bg, &runcontext.RunContext{TraceContext: &runcontext.TraceContext{TraceParent: "00-" + tid + "-b9c7c989f97918e1-01", TraceState: state, Baggage: bag}})

	for _, tc := range []struct {
		name   string
		caller runcontext.Trace
		ctx    context.Context
		want   headers
	}{
		{"no span: the caller's sampled flag", sampled, bg, headers{"00-" + tid + "-b9c7c989f97918e1-01", state, bag}},
		{"no span: the caller's unsampled flag", unsampled, bg, headers{"00-" + tid + "-b9c7c989f97918e1-00", state, bag}},
		{"no span, no flags: not sampled", runcontext.Trace{TraceID: tid, SpanID: "b9c7c989f97918e1"}, bg, headers{"00-" + tid + "-b9c7c989f97918e1-00", "", ""}},
		{"current span is the parent, its sampled flag", unsampled, spanCtx(t, bg, tid, trace.FlagsSampled, ""), headers{"00-" + tid + "-1122334455667788-01", state, bag}},
		{"current span unsampled", sampled, spanCtx(t, bg, tid, 0, ""), headers{"00-" + tid + "-1122334455667788-00", state, bag}},
		{"the span's own tracestate wins", sampled, spanCtx(t, bg, tid, trace.FlagsSampled, "vendor=x"), headers{"00-" + tid + "-1122334455667788-01", "vendor=x", bag}},
		{"a span of another trace keeps no caller tracestate", sampled, spanCtx(t, bg, other, trace.FlagsSampled, ""), headers{"00-" + other + "-1122334455667788-01", "", bag}},
		{"ctx baggage merged over the caller's, sorted", sampled, withBag(bg, "run_id", "run_x", "tenant", "acme"),
			headers{"00-" + tid + "-b9c7c989f97918e1-01", state, "run_id=run_x,session_id=sess_42f1,tenant=acme"}},
		{"no caller trace: the run context's", runcontext.Trace{}, rcCtx, headers{"00-" + tid + "-b9c7c989f97918e1-01", state, bag}},
		{"invalid caller ids: the run context's", runcontext.Trace{TraceID: "nope", SpanID: "x"}, rcCtx, headers{"00-" + tid + "-b9c7c989f97918e1-01", state, bag}},
		{"caller tracestate and baggage that do not parse are dropped", runcontext.Trace{TraceID: tid, SpanID: "b9c7c989f97918e1", TraceFlags: "01", TraceState: "###", Baggage: "=x\r\nX: 1"}, bg,
			headers{"00-" + tid + "-b9c7c989f97918e1-01", "", ""}},
		{"span only", runcontext.Trace{}, spanCtx(t, bg, tid, trace.FlagsSampled, ""), headers{"00-" + tid + "-1122334455667788-01", "", ""}},
		{"nothing valid anywhere", runcontext.Trace{TraceID: tid}, bg, headers{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			w3ctrace.Inject(w3ctrace.Outbound(tc.ctx, tc.caller), h.Set)
			got := headers{h.Get(w3ctrace.HeaderTraceparent), h.Get(w3ctrace.HeaderTracestate), h.Get(w3ctrace.HeaderBaggage)}
			if got != tc.want {
				t.Errorf("headers %+v\nwant    %+v", got, tc.want)
			}
			if tc.want.TraceParent != "" {
				if _, err := runcontext.TraceFromHeaders(runcontext.TraceContext(got)); err != nil {
					t.Errorf("the headers do not parse: %v", err)
				}
			}
		})
	}
}
