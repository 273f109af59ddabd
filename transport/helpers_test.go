package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/w3ctrace"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bg = context.Background()

// seen is one request a test server received.
type seen struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// toolServer is a loopback tool endpoint whose replies a test scripts.
type toolServer struct {
	*httptest.Server
	mu    sync.Mutex
	reqs  []seen
	reply func(n int, r *http.Request, body []byte) (int, string)
}

func newToolServer(t testing.TB, reply func(n int, r *http.Request, body []byte) (int, string)) *toolServer {
	t.Helper()
	ts := &toolServer{reply: reply}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts.mu.Lock()
		n := len(ts.reqs)
		ts.reqs = append(ts.reqs, seen{r.Method, r.URL.Path, r.Header.Clone(), body})
		ts.mu.Unlock()
		status, out := ts.reply(n, r, body)
		if status == 0 {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, out)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *toolServer) requests() []seen {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]seen(nil), ts.reqs...)
}

// echoEnvelope answers an external request with an ok response echoing
// the request's input.
func echoEnvelope(_ int, _ *http.Request, body []byte) (int, string) {
	var req transport.Request
	json.Unmarshal(body, &req)
	out, _ := json.Marshal(transport.Response{ToolContractVersion: "v1", RequestID: req.RequestID, Status: "ok", Output: map[string]any{"echo": req.Input}})
	return 200, string(out)
}

// call is a gateway call of adp_payments.issue_refund.
func call(attempt int) *gateway.Call {
	return &gateway.Call{
		Envelope: &gateway.ToolCallEnvelope{EnvelopeVersion: gateway.CallEnvelopeVersion, ToolCallID: "tool_0123456789abcdef", RunID: "run_a1b2c3d4e5f60718",
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", CapabilityID: "adp_payments.issue_refund", Args: map[string]any{"order_id": "ord_881", "amount_inr": 1200.0}},
		Capability: "issue_refund", Attempt: attempt, IdempotencyKey: "ik_77aa",
		Trace: runcontext.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", TraceFlags: "01"},
	}
}

func newAdapter(t testing.TB, ep transport.Endpoint, opts *transport.Options) *transport.Adapter {
	t.Helper()
	ep.AllowPrivate = true // loopback test servers
	a, err := transport.NewAdapter(ep, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func toolErr(t *testing.T, err error) *gateway.ToolError {
	t.Helper()
	var te *gateway.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *gateway.ToolError", err, err)
	}
	return te
}

// generous bounds a return that must not wait for a tool that ignores its
// context: far above the deadlines the tests set (tens of milliseconds),
// so a loaded two-core machine running -race does not trip it, and far
// below the tool's own stall (the test's end).
const generous = 10 * time.Second

func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if took := time.Since(start); took > d {
		t.Fatalf("took %v, want at most %v", took, d)
	}
}

// contextWithRemote is ctx with tr as its remote parent span context, as
// the runtime extracts a request's trace context.
func contextWithRemote(t testing.TB, ctx context.Context, tr runcontext.Trace) context.Context {
	t.Helper()
	tid, err := oteltrace.TraceIDFromHex(tr.TraceID)
	if err != nil {
		t.Fatal(err)
	}
	sid, _ := oteltrace.SpanIDFromHex(tr.SpanID)
	ts, _ := oteltrace.ParseTraceState(tr.TraceState)
	var flags oteltrace.TraceFlags
	if w3ctrace.Sampled(tr) {
		flags = oteltrace.FlagsSampled
	}
	return oteltrace.ContextWithRemoteSpanContext(ctx, oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, TraceState: ts, Remote: true}))
}
