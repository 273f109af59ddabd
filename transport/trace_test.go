package transport_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/contextos/contextos/internal/w3ctrace"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/transport"
)

// Every request of an attempt (the post, and a webhook's polls) carries
// the caller's trace context: parented on the attempt's span with the
// sampled flag the tracer decided, or, with no tracer, on the caller's
// span with the caller's flags; tracestate and baggage forwarded.
func TestTraceContextReachesTheTool(t *testing.T) {
	t.Parallel()
	const (
		tid   = "4bf92f3577b34da6a3ce929d0e0e4736"
		state = "tenant=tenant_acme_prod,ctxpack=ctxpack.support@5.2.0"
		bag   = "session_id=sess_42f1,run_id=run_a1b2c3d4e5f60718"
	)
	for _, tc := range []struct {
		name     string
		flags    string
		provider func(*tracetest.SpanRecorder) *transport.Options
		// wantFlags is the flag sent; attemptSpan: the parent is the
		// attempt's span (else the caller's span b9c7…).
		wantFlags   string
		attemptSpan bool
	}{
		{"no tracer, caller sampled", "01", func(*tracetest.SpanRecorder) *transport.Options {
			return &transport.Options{TracerProvider: noop.NewTracerProvider()}
		}, "01", false},
		{"no tracer, caller not sampled", "00", func(*tracetest.SpanRecorder) *transport.Options {
			return &transport.Options{TracerProvider: noop.NewTracerProvider()}
		}, "00", false},
		{"tracer samples the caller's sampled trace", "01", func(r *tracetest.SpanRecorder) *transport.Options {
			return &transport.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))}
		}, "01", true},
		{"tracer keeps the caller's decision not to sample", "00", func(r *tracetest.SpanRecorder) *transport.Options {
			return &transport.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))}
		}, "00", true},
	} {
		for _, mode := range []string{"http", "external", "webhook"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				ts := newToolServer(t, func(n int, _ *http.Request, _ []byte) (int, string) {
					if mode == "webhook" && n == 0 {
						return 202, ``
					}
					return 200, `{"status":"ok","output":{}}`
				})
				rec := tracetest.NewSpanRecorder()
				a := newAdapter(t, transport.Endpoint{Transport: mode, URL: ts.URL, PollInterval: time.Millisecond}, tc.provider(rec))
				c := call(1)
				c.Trace = runcontext.Trace{TraceID: tid, SpanID: "b9c7c989f97918e1", TraceFlags: tc.flags, TraceState: state, Baggage: bag}
				// The run's span context is in ctx, as the runtime puts it.
				ctx := context.Background()
				carrier := map[string]string{}
				w3ctrace.Inject(c.Trace, func(k, v string) { carrier[k] = v })
				parsed, _ := runcontext.TraceFromHeaders(runcontext.TraceContext{TraceParent: carrier["traceparent"], TraceState: carrier["tracestate"]})
				ctx = contextWithRemote(t, ctx, parsed)
				if _, err := a.Call(ctx, c); err != nil {
					t.Fatal(err)
				}
				parent := "b9c7c989f97918e1"
				reqs := ts.requests()
				if tc.attemptSpan {
					// A sampled span is recorded; an unsampled one is not, and
					// still has an id of its own, the parent of every request.
					if spans := rec.Started(); len(spans) == 1 {
						parent = spans[0].SpanContext().SpanID().String()
					} else if got, err := runcontext.ParseTraceparent(reqs[0].Header.Get("Traceparent")); len(spans) == 0 && err == nil && got.SpanID != parent {
						parent = got.SpanID
					} else {
						t.Fatalf("%d spans; the first request's traceparent %q", len(spans), reqs[0].Header.Get("Traceparent"))
					}
				}
				if mode == "webhook" && len(reqs) < 2 {
					t.Fatalf("%d requests", len(reqs))
				}
				for i, r := range reqs {
					want := "00-" + tid + "-" + parent + "-" + tc.wantFlags
					if r.Header.Get("Traceparent") != want || r.Header.Get("Tracestate") != state || r.Header.Get("Baggage") != bag {
						t.Errorf("request %d (%s): traceparent %q tracestate %q baggage %q, want %q", i, r.Method, r.Header.Get("Traceparent"), r.Header.Get("Tracestate"), r.Header.Get("Baggage"), want)
					}
				}
			})
		}
	}
}
