package server

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/internal/sensitive"
)

// tracerName is the instrumentation scope of the handler's spans.
const tracerName = "github.com/contextos/contextos/server"

// knownMethods are the methods a span names as they are (OpenTelemetry's
// HTTP conventions); any other is "_OTHER".
var knownMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "DELETE": true, "CONNECT": true, "OPTIONS": true, "TRACE": true, "PATCH": true}

// traced wraps next with a server span per request, named and described
// per OpenTelemetry's HTTP semantic conventions: "{method} {route}" (the
// route is the pattern the request matched, "/v1/runs/{run_id}", never
// the path with its ids), http.request.method, url.path (redacted and
// clipped: it is the caller's text), url.scheme,
// http.route, http.response.status_code, network.protocol.version and
// server.address; a 5xx answer sets error.type and the error status. The
// span continues the request's W3C trace context (traceparent).
func traced(tp trace.TracerProvider, redact func(string) string, next http.Handler) http.Handler {
	tracer := tp.Tracer(tracerName)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := withoutSecretTraceState(propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		method, original := r.Method, ""
		if !knownMethods[method] {
			method, original = "_OTHER", r.Method
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		attrs := []attribute.KeyValue{
			attribute.String("http.request.method", method),
			attribute.String("url.path", clipMsg(redact(r.URL.Path))), // the caller's text
			attribute.String("url.scheme", scheme),
			attribute.String("network.protocol.version", protocolVersion(r)),
		}
		if original != "" {
			attrs = append(attrs, attribute.String("http.request.method_original", clip(redact(original)))) // the caller's text
		}
		if host := hostOf(r.Host); host != "" {
			host = clip(redact(host)) // the caller's text (the Host header)
			attrs = append(attrs, attribute.String("server.address", host))
		}
		ctx, span := tracer.Start(ctx, spanMethod(method), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w}
		r = r.WithContext(ctx)
		next.ServeHTTP(sw, r)
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		// The mux sets the pattern it matched on the request it was given.
		if route := routeOf(r.Pattern); route != "" {
			span.SetAttributes(attribute.String("http.route", route))
			span.SetName(spanMethod(method) + " " + route)
		}
		if status >= 500 {
			span.SetAttributes(attribute.String("error.type", strconv.Itoa(status)))
			span.SetStatus(codes.Error, "")
		}
	})
}

// spanMethod is the method a span name starts with: "HTTP" for one
// outside the known set.
func spanMethod(method string) string {
	if method == "_OTHER" {
		return "HTTP"
	}
	return method
}

// routeOf is the route of a mux pattern ("GET /v1/runs/{run_id}" or
// "/v1/runs/{run_id}"): its path; "" for the catch-all "/", which
// matches what no route does.
func routeOf(pattern string) string {
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		pattern = pattern[i+1:]
	}
	if i := strings.IndexByte(pattern, '/'); i > 0 {
		pattern = pattern[i:] // a host before the path
	}
	if pattern == "/" {
		return ""
	}
	return pattern
}

func protocolVersion(r *http.Request) string {
	if r.ProtoMajor == 1 {
		return "1." + strconv.Itoa(r.ProtoMinor)
	}
	return strconv.Itoa(r.ProtoMajor)
}

func hostOf(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return hostport
}

// statusWriter remembers the status a handler answered, and keeps the
// writer's flushing (event streams).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the writer's other methods.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withoutSecretTraceState is ctx with the remote span context's
// tracestate redacted as the runtime redacts a request's (where a run's
// request enters): a member whose key is secret-named or whose value, as
// written or percent-decoded, holds a secret the built-in detectors find
// keeps its key and gets sensitive.Redacted for a value, or is dropped
// when the marker would not parse. The span continues the caller's trace
// and the honest members as they came.
func withoutSecretTraceState(ctx context.Context) context.Context {
	sc := trace.SpanContextFromContext(ctx)
	ts := sc.TraceState()
	if ts.Len() == 0 {
		return ctx
	}
	var members []string
	changed := false
	ts.Walk(func(key, value string) bool {
		_, found := sensitive.DetectEscaped(value, sensitive.Secrets)
		if value != sensitive.Redacted && (sensitive.IsSecretKey(key) || found) {
			value, changed = sensitive.Redacted, true
		}
		members = append(members, key+"="+value)
		return true
	})
	if !changed {
		return ctx
	}
	clean, err := trace.ParseTraceState(strings.Join(members, ","))
	if err != nil {
		clean = trace.TraceState{}
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc.WithTraceState(clean))
}
