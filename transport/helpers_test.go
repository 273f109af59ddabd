package transport_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/contextos/contextos/gateway"
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
		Trace: runcontext.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"},
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
	te, ok := err.(*gateway.ToolError)
	if !ok {
		t.Fatalf("error %v (%T) is not a *gateway.ToolError", err, err)
	}
	return te
}

func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if took := time.Since(start); took > d {
		t.Fatalf("took %v, want at most %v", took, d)
	}
}
