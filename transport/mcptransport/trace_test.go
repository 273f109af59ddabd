package mcptransport_test

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/mcptransport"
)

const (
	traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSp = "00f067aa0ba902b7"
)

// The W3C trace context in _meta keeps the caller's sampled flag (never a
// hard-coded 01), takes the current span as the parent when it is in the
// caller's trace (the transport's attempt span, when the host's tracer
// records), and forwards tracestate and baggage.
func TestTraceContextInMeta(t *testing.T) {
	t.Parallel()
	caller := func(flags string) runcontext.Trace {
		return runcontext.Trace{TraceID: traceID, SpanID: callerSp, TraceFlags: flags, TraceState: "vendor=opaque", Baggage: "tenant=acme"}
	}
	remote := func(ctx context.Context, flags trace.TraceFlags) context.Context {
		tid, _ := trace.TraceIDFromHex(traceID)
		sid, _ := trace.SpanIDFromHex("1111111111111111")
		return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true}))
	}
	tests := []struct {
		name   string
		trace  runcontext.Trace
		ctx    func(context.Context) context.Context
		record bool   // the host's tracer records the attempt span (parent-based sampling)
		always bool   // ... and samples every span, whatever the caller decided
		want   string // the traceparent ("span" stands for the recorded attempt span's id, "*" for an unsampled one's)
		state  bool   // tracestate and baggage forwarded
	}{
		{name: "sampled caller", trace: caller("01"), want: "00-" + traceID + "-" + callerSp + "-01", state: true},
		{name: "unsampled caller", trace: caller("00"), want: "00-" + traceID + "-" + callerSp + "-00", state: true},
		{name: "caller without flags: not sampled", trace: runcontext.Trace{TraceID: traceID, SpanID: callerSp}, want: "00-" + traceID + "-" + callerSp + "-00"},
		{name: "recording tracer: the attempt span is the parent, the caller's flag kept", trace: caller("00"),
			ctx: func(ctx context.Context) context.Context { return remote(ctx, 0) }, record: true, want: "00-" + traceID + "-*-00", state: true},
		{name: "always-sampling tracer: the attempt span's own sampled flag", trace: caller("00"), always: true,
			ctx: func(ctx context.Context) context.Context { return remote(ctx, 0) }, record: true, want: "00-" + traceID + "-span-01", state: true},
		{name: "current span of the caller's trace (no-op tracer)", trace: caller("01"),
			ctx: func(ctx context.Context) context.Context { return remote(ctx, trace.FlagsSampled) }, want: "00-" + traceID + "-1111111111111111-01", state: true},
		{name: "no span of the host's: the attempt span joins the caller's trace", trace: caller("01"), record: true, want: "00-" + traceID + "-span-01", state: true},
		{name: "no caller trace, no span: none", trace: runcontext.Trace{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seen := &received{}
			opts := &mcptransport.Options{}
			rec := tracetest.NewSpanRecorder()
			if tc.record {
				sampler := sdktrace.ParentBased(sdktrace.AlwaysSample())
				if tc.always {
					sampler = sdktrace.AlwaysSample()
				}
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(rec))
				defer tp.Shutdown(bg)
				opts.TracerProvider = tp
			}
			a := memAdapter(t, paymentsServer(seen), transport.Endpoint{}, opts)
			ctx := bg
			if tc.ctx != nil {
				ctx = tc.ctx(ctx)
			}
			c := &gateway.Call{Envelope: &gateway.ToolCallEnvelope{ToolCallID: "tool_0123456789abcdef", RunID: "run_1", CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "o"}},
				Capability: "lookup", Attempt: 1, Trace: tc.trace}
			if _, err := a.Call(ctx, c); err != nil {
				t.Fatal(err)
			}
			_, metas := seen.calls()
			want := tc.want
			if tc.record && !strings.Contains(want, "*") {
				spans := rec.Ended()
				if len(spans) != 1 {
					t.Fatalf("%d spans", len(spans))
				}
				want = strings.Replace(want, "span", spans[0].SpanContext().SpanID().String(), 1)
			}
			got, _ := metas[0][mcptransport.MetaTraceparent].(string)
			if pre, post, wild := strings.Cut(want, "*"); wild {
				// An unsampled attempt span is not recorded: its id is unknown,
				// but it is not the caller's span, and the flag is the caller's.
				if !strings.HasPrefix(got, pre) || !strings.HasSuffix(got, post) || strings.Contains(got, callerSp) || len(got) != 55 {
					t.Errorf("traceparent %q, want %q", got, want)
				}
			} else if got != want {
				t.Errorf("traceparent %q, want %q", got, want)
			}
			ts, _ := metas[0][mcptransport.MetaTracestate].(string)
			bgg, _ := metas[0][mcptransport.MetaBaggage].(string)
			if tc.state != (ts == "vendor=opaque" && bgg == "tenant=acme") || !tc.state && (ts != "" || bgg != "") {
				t.Errorf("tracestate %q baggage %q, forwarded = %v", ts, bgg, tc.state)
			}
		})
	}
}
