package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/contextos/contextos/server"
)

// A request's span carries none of the credentials a caller put in what
// the span is described by: an unknown method's name (kept as
// http.request.method_original), the Host header (server.address) and
// the tracestate the span continues.
func TestHTTPSpansCarryNoCallerSecret(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newEnv(t, &envOptions{handler: server.Options{TracerProvider: tp}})
	key := "ghp_" + strings.Repeat("Ab1", 12)
	e.do(key, "/v1/runs", e.token(agent), nil)
	e.do("GET", "/nowhere", e.token(agent), nil,
		"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate", "congo="+key)
	req, err := http.NewRequest("GET", e.srv.URL+"/nowhere", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = key + ":80"
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	} else {
		t.Fatal(err)
	}
	n := 0
	for _, s := range rec.Ended() {
		if s.InstrumentationScope().Name != "github.com/contextos/contextos/server" {
			continue
		}
		n++
		text := fmt.Sprint(s.Name(), s.Attributes(), s.SpanContext().TraceState().String(), s.Parent().TraceState().String())
		if strings.Contains(text, "Ab1Ab1") {
			t.Errorf("span %s carries the caller's key: %s", s.Name(), text)
		}
	}
	if n != 3 {
		t.Fatalf("%d server spans, want 3", n)
	}
}
