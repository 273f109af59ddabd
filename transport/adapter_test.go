package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/transport"
)

func TestExternalCarriesTheCallOnEveryAttempt(t *testing.T) {
	ts := newToolServer(t, echoEnvelope)
	a := newAdapter(t, transport.Endpoint{Transport: "external", URL: ts.URL, Namespace: "support", Agent: "refund-agent",
		Tools: map[string]transport.ToolInfo{"issue_refund": {Capabilities: []string{"Data.Write", "external.side_effect"}, RiskLevel: "High"}}}, nil)
	for attempt := 1; attempt <= 2; attempt++ {
		out, err := a.Call(bg, call(attempt))
		if err != nil {
			t.Fatal(err)
		}
		if echo := out.Output["echo"].(map[string]any); echo["order_id"] != "ord_881" {
			t.Fatalf("output %v", out.Output)
		}
		if len(out.Mutations) != 1 || out.Mutations[0] != "adp_payments.issue_refund:ik_77aa" {
			t.Fatalf("mutations %v", out.Mutations)
		}
	}
	reqs := ts.requests()
	for i, r := range reqs {
		if r.Header.Get("X-Tool-Contract-Version") != "v1" || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Idempotency-Key") != "ik_77aa" {
			t.Fatalf("attempt %d headers %v", i+1, r.Header)
		}
		if r.Header.Get("Traceparent") != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
			t.Fatalf("traceparent %q", r.Header.Get("Traceparent"))
		}
		req, te := transport.DecodeRequest(r.Body)
		if te != nil {
			t.Fatal(te)
		}
		if req.RequestID != "tool_0123456789abcdef" || req.TaskID != "run_a1b2c3d4e5f60718" || req.Namespace != "support" || req.Agent != "refund-agent" ||
			req.Tool.Name != "adp_payments.issue_refund" || req.Attempt != i+1 || req.IdempotencyKey != "ik_77aa" || req.Runtime.Mode != "external" ||
			req.Trace.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || req.Tool.RiskLevel != "high" || strings.Join(req.Tool.Capabilities, ",") != "data.write,external.side_effect" {
			t.Fatalf("attempt %d envelope %+v", i+1, req)
		}
	}
}

func TestExecuteEchoesRequestIDTraceAndAttempt(t *testing.T) {
	ts := newToolServer(t, func(int, *http.Request, []byte) (int, string) { return 200, `{"status":"ok","output":{"x":1}}` })
	a := newAdapter(t, transport.Endpoint{Transport: "external", URL: ts.URL}, nil)
	req := &transport.Request{RequestID: "req-123", Tool: transport.Tool{Name: "web_search"}, Attempt: 2, Trace: &transport.Trace{TraceID: "trace-abc", SpanID: "span-xyz"}}
	resp := a.Execute(bg, req)
	if resp.ToolContractVersion != "v1" || resp.RequestID != "req-123" || resp.Usage.Attempt != 2 || resp.Trace.TraceID != "trace-abc" || resp.Trace.SpanID != "span-xyz" || resp.Status != "ok" {
		t.Fatalf("%+v", resp)
	}
	// Refusals are responses too, with the same echo.
	bad := a.Execute(bg, &transport.Request{ToolContractVersion: "v9", RequestID: "req-9", Tool: transport.Tool{Name: "t"}, Trace: &transport.Trace{TraceID: "tt"}})
	if bad.Status != "error" || bad.RequestID != "req-9" || bad.Error.Code != "invalid_input" || bad.Error.Retryable || bad.Usage.Attempt != 1 || bad.Trace.TraceID != "tt" {
		t.Fatalf("%+v %+v", bad, bad.Error)
	}
	if len(ts.requests()) != 1 {
		t.Fatal("a refused request reached the tool")
	}
	denied := newToolServer(t, func(int, *http.Request, []byte) (int, string) {
		return 200, `{"status":"denied","error":{"code":"permission_denied","reason":"tool_permission_denied","retryable":false,"message":"vector_db is not allowed"}}`
	})
	_, err := newAdapter(t, transport.Endpoint{Transport: "external", URL: denied.URL}, nil).Call(bg, call(1))
	if te := toolErr(t, err); te.Code != gateway.CodePermissionDenied || te.Retryable {
		t.Fatalf("%+v", te)
	}
}

func TestExternalRejectsNonContractReplies(t *testing.T) {
	for _, body := range []string{`plain text`, `{"result":"no status"}`, `[1,2]`} {
		ts := newToolServer(t, func(int, *http.Request, []byte) (int, string) { return 200, body })
		_, err := newAdapter(t, transport.Endpoint{Transport: "external", URL: ts.URL}, nil).Call(bg, call(1))
		if te := toolErr(t, err); te.Code != gateway.CodeExecutionFailed || !strings.Contains(te.Message, "invalid contract response") {
			t.Errorf("%s → %+v", body, te)
		}
	}
}

func TestHTTPTransport(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, reply string
		status      int
		wantOut     map[string]any
		wantCode    string
		retryable   bool
	}{
		{"raw text", "refund queued", 200, map[string]any{"result": "refund queued"}, "", false},
		{"JSON object", `{"transaction_id":"txn_q9"}`, 200, map[string]any{"transaction_id": "txn_q9"}, "", false},
		{"contract ok", `{"status":"ok","output":{"summary":"s"}}`, 200, map[string]any{"summary": "s"}, "", false},
		{"contract error", `{"status":"error","error":{"code":"execution_failed","retryable":true,"message":"busy"}}`, 200, nil, "execution_failed", true},
		{"400", `bad`, 400, nil, "execution_failed", false},
		{"401", ``, 401, nil, "auth_invalid", false},
		{"403", ``, 403, nil, "auth_forbidden", false},
		{"429", ``, 429, nil, "execution_failed", true},
		{"500", ``, 500, nil, "execution_failed", true},
		{"502", ``, 502, nil, "execution_failed", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ts := newToolServer(t, func(int, *http.Request, []byte) (int, string) { return c.status, c.reply })
			out, err := newAdapter(t, transport.Endpoint{Transport: "http", URL: ts.URL + "/refund"}, nil).Call(bg, call(1))
			if c.wantCode != "" {
				if te := toolErr(t, err); te.Code != c.wantCode || te.Retryable != c.retryable {
					t.Fatalf("%+v", te)
				}
				return
			}
			if err != nil || fmt.Sprint(out.Output) != fmt.Sprint(c.wantOut) {
				t.Fatalf("%v %v", out, err)
			}
			r := ts.requests()[0]
			var body map[string]any
			if json.Unmarshal(r.Body, &body); body["order_id"] != "ord_881" || r.Path != "/refund" || r.Header.Get("X-Tool-Contract-Version") != "" {
				t.Fatalf("http posted %s to %s with %v", r.Body, r.Path, r.Header)
			}
		})
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	release := make(chan struct{})
	// The tool ignores the request's context: it answers only when released.
	ts := newToolServer(t, func(int, *http.Request, []byte) (int, string) { <-release; return 200, `{"status":"ok"}` })
	defer close(release)
	a := newAdapter(t, transport.Endpoint{Transport: "external", URL: ts.URL}, nil)
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel()
	var err error
	within(t, generous, func() { _, err = a.Call(ctx, call(1)) })
	if te := toolErr(t, err); te.Code != gateway.CodeTimeout || !te.Retryable {
		t.Fatalf("%+v", te)
	}
	// The error wraps the cause of the caller's context as well.
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, gateway.ErrTool) {
		t.Fatalf("timeout %v does not wrap context.DeadlineExceeded and gateway.ErrTool", err)
	}
	pre, cancel2 := context.WithCancel(bg)
	cancel2()
	within(t, generous, func() { _, err = a.Call(pre, call(1)) })
	if te := toolErr(t, err); te.Code != gateway.CodeCanceled || !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled call: %v (code %s), want canceled wrapping context.Canceled", err, te.Code)
	}
	// A caller's own cause is wrapped too.
	cause := errors.New("the host is shutting down")
	withCause, cancel3 := context.WithCancelCause(bg)
	cancel3(cause)
	within(t, generous, func() { _, err = a.Call(withCause, call(1)) })
	if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Fatalf("canceled call %v does not wrap context.Canceled and the caller's cause", err)
	}
	if te := toolErr(t, err); te.Code != gateway.CodeCanceled || te.Retryable {
		t.Fatalf("%+v", te)
	}
	if n := len(ts.requests()); n != 1 {
		t.Fatalf("the tool saw %d requests; a call cancelled before it starts must not reach it", n)
	}
}

func TestWebhook(t *testing.T) {
	t.Run("200 is final", func(t *testing.T) {
		ts := newToolServer(t, func(int, *http.Request, []byte) (int, string) { return 200, `{"status":"ok","output":{"done":true}}` })
		out, err := newAdapter(t, transport.Endpoint{Transport: "webhook", URL: ts.URL + "/jobs", PollInterval: time.Millisecond}, nil).Call(bg, call(1))
		if err != nil || out.Output["done"] != true || len(ts.requests()) != 1 {
			t.Fatalf("%v %v %d", out, err, len(ts.requests()))
		}
	})
	t.Run("202 202 200", func(t *testing.T) {
		ts := newToolServer(t, func(n int, r *http.Request, _ []byte) (int, string) {
			if n < 2 {
				return 202, ``
			}
			return 200, `{"status":"ok","request_id":"tool_0123456789abcdef","output":{"polled":true}}`
		})
		out, err := newAdapter(t, transport.Endpoint{Transport: "webhook", URL: ts.URL + "/jobs/", PollInterval: 5 * time.Millisecond}, nil).Call(bg, call(1))
		if err != nil || out.Output["polled"] != true {
			t.Fatalf("%v %v", out, err)
		}
		reqs := ts.requests()
		if len(reqs) != 3 || reqs[0].Method != "POST" || reqs[1].Method != "GET" || reqs[2].Path != "/jobs/tool_0123456789abcdef" {
			t.Fatalf("%+v", reqs)
		}
	})
	t.Run("202 forever times out", func(t *testing.T) {
		ts := newToolServer(t, func(int, *http.Request, []byte) (int, string) { return 202, `` })
		ctx, cancel := context.WithTimeout(bg, 60*time.Millisecond)
		defer cancel()
		var err error
		within(t, generous, func() {
			_, err = newAdapter(t, transport.Endpoint{Transport: "webhook", URL: ts.URL, PollInterval: 5 * time.Millisecond}, nil).Call(ctx, call(1))
		})
		if te := toolErr(t, err); te.Code != gateway.CodeTimeout || !te.Retryable || te.Details["request_id"] != "tool_0123456789abcdef" {
			t.Fatalf("%+v", te)
		}
	})
	t.Run("poll error is terminal", func(t *testing.T) {
		ts := newToolServer(t, func(n int, _ *http.Request, _ []byte) (int, string) {
			if n == 0 {
				return 202, ``
			}
			return 403, ``
		})
		_, err := newAdapter(t, transport.Endpoint{Transport: "webhook", URL: ts.URL, PollInterval: time.Millisecond}, nil).Call(bg, call(1))
		if te := toolErr(t, err); te.Code != gateway.CodeAuthForbidden {
			t.Fatalf("%+v", te)
		}
	})
	t.Run("push delivery", func(t *testing.T) {
		ts := newToolServer(t, func(int, *http.Request, []byte) (int, string) { return 202, `` })
		a := newAdapter(t, transport.Endpoint{Transport: "webhook", URL: ts.URL, PollInterval: time.Hour}, nil)
		push := newToolServer(t, nil)
		push.Config.Handler = a.PushHandler()
		done := make(chan error, 1)
		var out *gateway.Outcome
		go func() {
			var err error
			out, err = a.Call(bg, call(1))
			done <- err
		}()
		body := `{"tool_contract_version":"v1","request_id":"tool_0123456789abcdef","status":"ok","output":{"pushed":true}}`
		deadline := time.Now().Add(generous)
		for {
			res, err := http.Post(push.URL, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode == http.StatusAccepted {
				break
			}
			if res.StatusCode != http.StatusNotFound || time.Now().After(deadline) {
				t.Fatalf("push answered %d", res.StatusCode)
			}
			time.Sleep(time.Millisecond) // the call has not registered yet
		}
		if err := <-done; err != nil || out.Output["pushed"] != true {
			t.Fatalf("%v %v", out, err)
		}
		if a.Deliver(&transport.Response{RequestID: "tool_0123456789abcdef", Status: "ok"}) {
			t.Fatal("a second delivery found a waiting call")
		}
		res, _ := http.Post(push.URL, "application/json", strings.NewReader(`not json`))
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("bad push answered %d", res.StatusCode)
		}
	})
}

func TestNewAdapterRefusesBadEndpoints(t *testing.T) {
	for name, ep := range map[string]transport.Endpoint{
		"missing endpoint":   {Transport: "external"},
		"unknown transport":  {Transport: "queue", URL: "https://tools.example.com"},
		"grpc here":          {Transport: "grpc", URL: "https://tools.example.com"},
		"bad scheme":         {Transport: "http", URL: "ftp://tools.example.com"},
		"loopback":           {Transport: "http", URL: "http://127.0.0.1:8080"},
		"localhost":          {Transport: "http", URL: "http://localhost:8080"},
		"private":            {Transport: "http", URL: "http://10.1.2.3"},
		"metadata":           {Transport: "http", URL: "http://169.254.169.254/latest", AllowPrivate: true},
		"credentials in URL": {Transport: "http", URL: "https://u:p@tools.example.com"},
		"unknown profile":    {Transport: "http", URL: "https://tools.example.com", Auth: &transport.Auth{Profile: "kerberos", SecretRef: "k"}},
		"api key no header":  {Transport: "http", URL: "https://tools.example.com", Auth: &transport.Auth{Profile: "api_key_header", SecretRef: "k"}},
		"oauth2 no url":      {Transport: "http", URL: "https://tools.example.com", Auth: &transport.Auth{Profile: "oauth2_client_credentials", SecretRef: "k"}},
		"bad jitter":         {Transport: "http", URL: "https://tools.example.com", Retry: transport.Retry{Jitter: "random"}},
	} {
		if _, err := transport.NewAdapter(ep, nil); !errors.Is(err, transport.ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
	if _, err := transport.NewAdapter(transport.Endpoint{Transport: "http", URL: "https://tools.example.com"}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestRetryDelay(t *testing.T) {
	r := transport.Retry{MaxAttempts: 5, Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	for i, want := range []time.Duration{10, 20, 40, 50, 50} {
		if got := transport.RetryDelay(r, "tool_1", i+1); got != want*time.Millisecond {
			t.Errorf("attempt %d: %v, want %v", i+1, got, want*time.Millisecond)
		}
	}
	for _, j := range []transport.Jitter{transport.JitterFull, transport.JitterEqual} {
		r := transport.Retry{Backoff: 100 * time.Millisecond, MaxBackoff: time.Second, Jitter: j, Seed: 7}
		seen := map[time.Duration]bool{}
		for attempt := 1; attempt <= 3; attempt++ {
			d := transport.RetryDelay(r, "tool_1", attempt)
			if d != transport.RetryDelay(r, "tool_1", attempt) {
				t.Fatalf("%s jitter is not reproducible", j)
			}
			base := min(100*time.Millisecond<<(attempt-1), time.Second)
			lo := time.Duration(0)
			if j == transport.JitterEqual {
				lo = base / 2
			}
			if d < lo || d > base {
				t.Fatalf("%s attempt %d: %v outside [%v, %v]", j, attempt, d, lo, base)
			}
			seen[d] = true
		}
		other := r
		other.Seed = 8
		if transport.RetryDelay(other, "tool_1", 1) == transport.RetryDelay(r, "tool_1", 1) && transport.RetryDelay(other, "tool_1", 2) == transport.RetryDelay(r, "tool_1", 2) {
			t.Errorf("%s jitter ignores the seed", j)
		}
	}
	if transport.RetryDelay(transport.Retry{}, "x", 3) != 0 {
		t.Error("no backoff waits")
	}
}

func TestAdapterConformance(t *testing.T) {
	for _, tr := range []string{"http", "external", "webhook"} {
		t.Run(tr, func(t *testing.T) {
			gatewaytest.RunAdapterTests(t, func(t *testing.T) gatewaytest.AdapterHarness {
				release := make(chan struct{})
				ts := newToolServer(t, func(_ int, r *http.Request, body []byte) (int, string) {
					if strings.Contains(string(body), "slow") {
						select {
						case <-release:
						case <-r.Context().Done():
						}
					}
					if strings.Contains(string(body), "v9") {
						return 400, `unsupported`
					}
					return 200, `{"status":"ok","output":{"ok":true}}`
				})
				t.Cleanup(func() { close(release) })
				a := newAdapter(t, transport.Endpoint{Transport: tr, URL: ts.URL, PollInterval: time.Millisecond}, nil)
				valid, invalid, slow := call(1), call(1), call(1)
				invalid.Envelope = cloneEnv(invalid.Envelope, map[string]any{"version": "v9"})
				slow.Envelope = cloneEnv(slow.Envelope, map[string]any{"mode": "slow"})
				return gatewaytest.AdapterHarness{Adapter: a, Valid: valid, Invalid: invalid, Slow: slow}
			})
		})
	}
}

func cloneEnv(e *gateway.ToolCallEnvelope, args map[string]any) *gateway.ToolCallEnvelope {
	c := *e
	c.Args = args
	return &c
}

func TestTelemetryNamesTheSecretNeverItsValue(t *testing.T) {
	const secret = "tok-VERY-SECRET-4711"
	ts := newToolServer(t, func(int, *http.Request, []byte) (int, string) {
		return 500, `{"error":"upstream said Authorization: Bearer ` + secret + `"}`
	})
	var logs bytes.Buffer
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	a := newAdapter(t, transport.Endpoint{Transport: "external", URL: ts.URL, Auth: &transport.Auth{SecretRef: "payments-token"}},
		&transport.Options{Secrets: transport.MapSecrets{"payments-token": secret}, TracerProvider: tp, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	_, err := a.Call(bg, call(2))
	te := toolErr(t, err)
	if te.Code != gateway.CodeExecutionFailed || !te.Retryable {
		t.Fatalf("%+v", te)
	}
	if ts.requests()[0].Header.Get("Authorization") != "Bearer "+secret {
		t.Fatal("the bearer secret was not sent")
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	attrs := map[string]string{}
	for _, kv := range spans[0].Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	for k, want := range map[string]string{"tool.auth_profile": "bearer", "tool.auth_secret_ref": "payments-token", "tool.attempt": "2", "tool.code": "execution_failed",
		"tool.request_id": "tool_0123456789abcdef", "tool.contract_version": "v1", "tool.trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"} {
		if attrs[k] != want {
			t.Errorf("span %s = %q, want %q", k, attrs[k], want)
		}
	}
	for where, text := range map[string]string{"error": te.Error() + fmt.Sprint(te.Details), "log": logs.String(), "span": fmt.Sprint(attrs)} {
		if strings.Contains(text, secret) {
			t.Errorf("the secret value is in the %s: %s", where, text)
		}
	}
	if !strings.Contains(logs.String(), `"tool_auth_secret_ref":"payments-token"`) || !strings.Contains(logs.String(), `"tool_code":"execution_failed"`) {
		t.Errorf("log line lacks fields: %s", logs.String())
	}
}
