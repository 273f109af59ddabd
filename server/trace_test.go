package server_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/server"
)

// Every request is a server span named by its method and route (never
// its ids), with the HTTP semantic conventions' attributes, continuing
// the caller's traceparent; an unknown path has no route, an event
// stream's span ends with the stream.
func TestHTTPSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newEnv(t, &envOptions{handler: server.Options{TracerProvider: tp}})
	runID := e.startPaused("req_span_1")
	e.do("GET", "/v1/runs/"+runID, e.token(agent), nil, "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	e.do("GET", "/v1/runs/"+runID+"/events", e.token(agent), nil)
	e.do("GET", "/nowhere", e.token(agent), nil)
	e.do("BREW", "/v1/runs", e.token(agent), nil)

	type span struct {
		Name   string
		Kind   trace.SpanKind
		Attrs  map[string]any
		Parent string
		Error  bool
	}
	var got []span
	for _, s := range rec.Ended() {
		if s.InstrumentationScope().Name != "github.com/contextos/contextos/server" {
			continue
		}
		attrs := map[string]any{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.AsInterface()
		}
		if attrs["server.address"] != "127.0.0.1" {
			t.Errorf("%s: server.address %v", s.Name(), attrs["server.address"])
		}
		delete(attrs, "server.address")
		parent := ""
		if s.Parent().IsValid() {
			parent = s.Parent().TraceID().String()
		}
		got = append(got, span{Name: s.Name(), Kind: s.SpanKind(), Attrs: attrs, Parent: parent, Error: s.Status().Code == codes.Error})
	}
	base := func(method, path string, status int, more ...attribute.KeyValue) map[string]any {
		m := map[string]any{"http.request.method": method, "url.path": path, "url.scheme": "http", "network.protocol.version": "1.1", "http.response.status_code": int64(status)}
		for _, kv := range more {
			m[string(kv.Key)] = kv.Value.AsInterface()
		}
		return m
	}
	want := []span{
		{Name: "POST /v1/runs", Kind: trace.SpanKindServer, Attrs: base("POST", "/v1/runs", 200, attribute.String("http.route", "/v1/runs"))},
		{Name: "GET /v1/runs/{run_id}", Kind: trace.SpanKindServer, Attrs: base("GET", "/v1/runs/"+runID, 200, attribute.String("http.route", "/v1/runs/{run_id}")),
			Parent: "4bf92f3577b34da6a3ce929d0e0e4736"},
		{Name: "GET /v1/runs/{run_id}/events", Kind: trace.SpanKindServer, Attrs: base("GET", "/v1/runs/"+runID+"/events", 200, attribute.String("http.route", "/v1/runs/{run_id}/events"))},
		{Name: "GET", Kind: trace.SpanKindServer, Attrs: base("GET", "/nowhere", 404)},
		{Name: "HTTP /v1/runs", Kind: trace.SpanKindServer, Attrs: base("_OTHER", "/v1/runs", 405, attribute.String("http.route", "/v1/runs"), attribute.String("http.request.method_original", "BREW"))},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	for _, s := range got {
		if strings.Contains(s.Name, runID) {
			t.Errorf("span name %q holds a run id", s.Name)
		}
	}
}

// A 5xx answer's span has error.type and the error status.
func TestHTTPSpanOfAServerError(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newEnv(t, &envOptions{noAuth: true, handler: server.Options{TracerProvider: tp}})
	if r := e.do("GET", "/readyz", "", nil); r.status != 503 {
		t.Fatalf("readyz without an authenticator: %d", r.status)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	if s.Name() != "GET /readyz" || s.Status().Code != codes.Error || attrs["error.type"].AsString() != "503" || attrs["http.response.status_code"].AsInt64() != 503 {
		t.Errorf("span %s status %v attrs %v", s.Name(), s.Status(), attrs)
	}
}
