package main

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/contextos/contextos/internal/refundmodel"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpCollector is an OTLP/HTTP collector: it keeps every export request
// it is sent, raw and decoded.
type otlpCollector struct {
	*httptest.Server
	mu      sync.Mutex
	raw     [][]byte
	traces  []*coltracepb.ExportTraceServiceRequest
	metrics []*colmetricpb.ExportMetricsServiceRequest
}

func newOTLPCollector(t *testing.T) *otlpCollector {
	c := &otlpCollector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.raw = append(c.raw, body)
		var resp proto.Message
		switch r.URL.Path {
		case "/v1/traces":
			m := &coltracepb.ExportTraceServiceRequest{}
			err, resp = proto.Unmarshal(body, m), &coltracepb.ExportTraceServiceResponse{}
			c.traces = append(c.traces, m)
		case "/v1/metrics":
			m := &colmetricpb.ExportMetricsServiceRequest{}
			err, resp = proto.Unmarshal(body, m), &colmetricpb.ExportMetricsServiceResponse{}
			c.metrics = append(c.metrics, m)
		default:
			http.NotFound(w, r)
			return
		}
		if err != nil {
			t.Errorf("%s: %v", r.URL.Path, err)
		}
		out, _ := proto.Marshal(resp)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(c.Close)
	return c
}

// spans are the spans exported, with their resource's service.name.
func (c *otlpCollector) spans() (spans []*tracepb.Span, services []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, req := range c.traces {
		for _, rs := range req.ResourceSpans {
			services = append(services, attrString(rs.GetResource().GetAttributes(), "service.name"))
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
	}
	return spans, services
}

// metricNames are the names of the metrics exported.
func (c *otlpCollector) metricNames() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := map[string]bool{}
	for _, req := range c.metrics {
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					names[m.Name] = true
				}
			}
		}
	}
	return names
}

func attrString(attrs []*commonpb.KeyValue, key string) string {
	for _, a := range attrs {
		if a.Key == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

func attrInt(attrs []*commonpb.KeyValue, key string) int64 {
	for _, a := range attrs {
		if a.Key == key {
			return a.GetValue().GetIntValue()
		}
	}
	return -1
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, contextos serve exports its
// spans and metrics over OTLP: an HTTP server span per request, the
// run's spans under it, a GenAI client span per model turn ("chat
// {model}" with the provider, model and token usage), and the
// gen_ai.client.* metrics, under the OTEL_SERVICE_NAME resource; what is
// buffered is sent when it stops; no key, token or card number is sent.
func TestServeExportsTelemetry(t *testing.T) {
	col := newOTLPCollector(t)
	model := &refundmodel.OpenAI{APIKey: "sk-serve-otel-key"}
	msrv := httptest.NewServer(model)
	defer msrv.Close()
	t.Setenv("OPENAI_BASE_URL", msrv.URL)
	t.Setenv("OPENAI_API_KEY", "sk-serve-otel-key")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	t.Setenv("OTEL_SERVICE_NAME", "refund-approvals")
	t.Setenv("OTEL_SDK_DISABLED", "")
	dir := t.TempDir()
	key, flags := serveFiles(t, dir)
	flags = append(withoutFlag(flags, "--plan"), "--planner", "openai:gpt-test", "--store", "sqlite:"+filepath.Join(dir, "contextos.db"))
	svc := startServeProc(t, flags...)
	agent := hsToken(t, key, "agent_17", "tenant_acme_prod", "support_agent")
	code, run := call(t, "POST", svc.url+"/v1/runs", agent, refundRunBody(t, "req_otel_1"))
	if code != http.StatusOK || run["state"] != "paused" {
		t.Fatalf("POST /v1/runs: %d %v\n%s", code, run, svc.log())
	}
	svc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-svc.done:
	case <-time.After(45 * time.Second):
		t.Fatalf("serve did not stop:\n%s", svc.log())
	}

	spans, services := col.spans()
	if len(spans) == 0 {
		t.Fatalf("no span was exported:\n%s", svc.log())
	}
	for _, s := range services {
		if s != "refund-approvals" {
			t.Errorf("service.name = %q, want OTEL_SERVICE_NAME's", s)
		}
	}
	byName := map[string][]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	post := byName["POST /v1/runs"]
	if len(post) != 1 || post[0].Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Fatalf("the POST /v1/runs server span: %v (spans: %v)", post, names(byName))
	}
	// The run's spans are in the run context's trace (its trace_id), the
	// trace its records name.
	invoke := byName["invoke_agent"]
	if len(invoke) != 1 || hex.EncodeToString(invoke[0].TraceId) != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("invoke_agent is not in the run context's trace: %v", invoke)
	}
	chats := byName["chat gpt-test"]
	if len(chats) != 2 { // the lookups, then the refund that pauses
		t.Fatalf("%d chat spans, want 2 (spans: %v)", len(chats), names(byName))
	}
	for _, c := range chats {
		if c.Kind != tracepb.Span_SPAN_KIND_CLIENT || attrString(c.Attributes, "gen_ai.provider.name") != "openai" ||
			attrString(c.Attributes, "gen_ai.request.model") != "gpt-test" || attrInt(c.Attributes, "gen_ai.usage.input_tokens") != 1200 ||
			attrInt(c.Attributes, "gen_ai.usage.output_tokens") != 60 || string(c.TraceId) != string(invoke[0].TraceId) {
			t.Errorf("chat span: kind %v, attributes %v", c.Kind, c.Attributes)
		}
	}
	got := col.metricNames()
	for _, m := range []string{"gen_ai.client.token.usage", "gen_ai.client.operation.duration"} {
		if !got[m] {
			t.Errorf("metric %s was not exported (got %v)", m, got)
		}
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, b := range col.raw {
		for _, secret := range []string{"sk-serve-otel-key", agent, string(key), "4111 1111 1111 1111"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("an export holds a secret (%.12s…)", secret)
			}
		}
	}
}

func names(m map[string][]*tracepb.Span) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	return out
}

// The environment turns the export on and configures it: without an
// OTLP endpoint, or with OTEL_SDK_DISABLED=true, there is none; a
// protocol other than http/protobuf is refused by its variable's name.
func TestTelemetryFromEnvironment(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		on   bool
		err  string
	}{
		{"no endpoint", map[string]string{"OTEL_SERVICE_NAME": "x"}, false, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, true, ""},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"}, true, ""},
		{"metrics endpoint", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:1/v1/metrics"}, true, ""},
		{"disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "TRUE"}, false, ""},
		{"explicit http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, true, ""},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"traces http/json", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, false, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{"headers", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20t,X-Scope=acme"}, true, ""},
		{"headers without =", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_HEADERS": "Authorization: Bearer t"}, false, "OTEL_EXPORTER_OTLP_HEADERS: pair 1"},
		{"traces headers bad escape", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=b,Authorization=Bearer%zz"}, false, "OTEL_EXPORTER_OTLP_TRACES_HEADERS: pair 2"},
		{"prometheus metrics", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_METRICS_EXPORTER": "prometheus"}, false, "OTEL_METRICS_EXPORTER"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tel, err := newTelemetry(context.Background(), func(k string) string { return c.env[k] })
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one naming %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (tel != nil) != c.on || (tel.tracerProvider() != nil || tel.meterProvider() != nil) != c.on {
				t.Fatalf("export on = %v, want %v", tel != nil, c.on)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = tel.shutdown(ctx) // the collector is not there: nothing was buffered, so nothing is lost
		})
	}
}
