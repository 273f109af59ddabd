package grpctransport_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/grpctransport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bg = context.Background()

// serveTools starts an in-process gRPC tool server on loopback.
func serveTools(t testing.TB, ex transport.Executor) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	grpctransport.Register(s, ex)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return "grpc://" + lis.Addr().String()
}

func newAdapter(t testing.TB, url string, auth *transport.Auth, secrets transport.SecretResolver) *grpctransport.Adapter {
	t.Helper()
	a, err := grpctransport.New(transport.Endpoint{Transport: "grpc", URL: url, AllowPrivate: true, Auth: auth}, &grpctransport.Options{Plaintext: true, Options: transport.Options{Secrets: secrets}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func call(attempt int, args map[string]any) *gateway.Call {
	return &gateway.Call{Envelope: &gateway.ToolCallEnvelope{ToolCallID: "tool_0123456789abcdef", RunID: "run_1", CapabilityID: "adp_payments.issue_refund", Args: args},
		Capability: "issue_refund", Attempt: attempt, IdempotencyKey: "ik_1", Trace: runcontext.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"}}
}

type recorder struct {
	mu   sync.Mutex
	reqs []*transport.Request
	md   []metadata.MD
}

func (r *recorder) Execute(ctx context.Context, req *transport.Request) *transport.Response {
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	r.reqs, r.md = append(r.reqs, req), append(r.md, md)
	r.mu.Unlock()
	if req.Input["mode"] == "slow" {
		// The tool answers only well after the caller gave up, so the
		// caller's own deadline, not a race with this answer, ends the call
		// (CI once saw the answer win on a loaded machine under -race).
		<-ctx.Done()
		time.Sleep(300 * time.Millisecond)
	}
	if req.Input["mode"] == "deny" {
		return &transport.Response{Status: "denied", Error: &transport.Failure{Code: "permission_denied", Message: "no"}}
	}
	return &transport.Response{Status: "ok", Output: map[string]any{"amount": req.Input["amount_inr"]}}
}

func TestRoundTrip(t *testing.T) {
	rec := &recorder{}
	a := newAdapter(t, serveTools(t, rec), &transport.Auth{SecretRef: "payments-token"}, transport.MapSecrets{"payments-token": "tok"})
	for attempt := 1; attempt <= 2; attempt++ {
		out, err := a.Call(bg, call(attempt, map[string]any{"amount_inr": 1200.0}))
		if err != nil || out.Output["amount"] != 1200.0 || out.Mutations[0] != "adp_payments.issue_refund:ik_1" {
			t.Fatalf("%v %v", out, err)
		}
	}
	for i, req := range rec.reqs {
		if req.RequestID != "tool_0123456789abcdef" || req.Attempt != i+1 || req.IdempotencyKey != "ik_1" || req.Runtime.Mode != "grpc" || req.Trace.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Fatalf("%+v", req)
		}
		md := rec.md[i]
		if md.Get("authorization")[0] != "Bearer tok" || md.Get("idempotency-key")[0] != "ik_1" || md.Get("x-tool-contract-version")[0] != "v1" || md.Get("content-type")[0] != "application/grpc+json" {
			t.Fatalf("metadata %v", md)
		}
	}
	resp := a.Execute(bg, &transport.Request{RequestID: "req-123", Tool: transport.Tool{Name: "t"}, Attempt: 3, Trace: &transport.Trace{TraceID: "tr", SpanID: "sp"}})
	if resp.RequestID != "req-123" || resp.Usage.Attempt != 3 || resp.Trace.SpanID != "sp" || resp.ToolContractVersion != "v1" {
		t.Fatalf("%+v", resp)
	}
	_, err := a.Call(bg, call(1, map[string]any{"mode": "deny"}))
	if te := toolErr(t, err); te.Code != gateway.CodePermissionDenied || te.Retryable {
		t.Fatalf("%+v", te)
	}
}

func TestServerRefusesUnknownVersion(t *testing.T) {
	rec := &recorder{}
	// Past the client's own normalisation: a raw call with version v9.
	conn, err := grpc.NewClient(strings.TrimPrefix(serveTools(t, rec), "grpc://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var resp transport.Response
	err = conn.Invoke(bg, grpctransport.FullMethod, &transport.Request{ToolContractVersion: "v9", RequestID: "r", Tool: transport.Tool{Name: "t"}}, &resp, grpc.CallContentSubtype("json"))
	if err != nil || resp.Status != "error" || resp.Error.Code != "invalid_input" || resp.Error.Retryable || resp.RequestID != "r" || len(rec.reqs) != 0 {
		t.Fatalf("%v %+v", err, resp)
	}
}

func TestStatusMapping(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	s.RegisterService(&grpc.ServiceDesc{ServiceName: grpctransport.ServiceName, HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{{MethodName: "Execute",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var req transport.Request
			dec(&req)
			return nil, status.Error(codes.Code(req.Input["code"].(float64)), "from the tool with token=abc")
		}}}}, struct{}{})
	go s.Serve(lis)
	defer s.Stop()
	a := newAdapter(t, "grpc://"+lis.Addr().String(), nil, nil)
	for c, want := range map[codes.Code]struct {
		code      string
		retryable bool
	}{
		codes.Unauthenticated: {"auth_invalid", false}, codes.PermissionDenied: {"auth_forbidden", false},
		codes.Unavailable: {"execution_failed", true}, codes.InvalidArgument: {"execution_failed", true}, codes.NotFound: {"execution_failed", true},
		codes.ResourceExhausted: {"execution_failed", true}, codes.Internal: {"execution_failed", true},
	} {
		_, err := a.Call(bg, call(1, map[string]any{"code": float64(c)}))
		te := toolErr(t, err)
		if te.Code != want.code || te.Retryable != want.retryable || te.Details["grpc_code"] != c.String() || strings.Contains(te.Message, "abc") {
			t.Errorf("%v → %+v, want %v", c, te, want)
		}
	}
}

func TestTimeoutCancelAndConformance(t *testing.T) {
	url := serveTools(t, &recorder{})
	a := newAdapter(t, url, nil, nil)
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := a.Call(ctx, call(1, map[string]any{"mode": "slow"}))
	// The tool waits for its context: the call returns at the deadline. The
	// bound only proves it does not wait for the tool, and is generous so a
	// loaded two-core machine under -race never trips it.
	if te := toolErr(t, err); te.Code != gateway.CodeTimeout || !te.Retryable || time.Since(start) > 10*time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%+v after %v (wraps context.DeadlineExceeded: %v)", te, time.Since(start), errors.Is(err, context.DeadlineExceeded))
	}
	pre, cancel2 := context.WithCancel(bg)
	cancel2()
	if _, err := a.Call(pre, call(1, nil)); toolErr(t, err).Code != gateway.CodeCanceled || !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
	gatewaytest.RunAdapterTests(t, func(t *testing.T) gatewaytest.AdapterHarness {
		a := newAdapter(t, url, &transport.Auth{SecretRef: "missing"}, transport.MapSecrets{})
		b := newAdapter(t, url, nil, nil)
		return gatewaytest.AdapterHarness{Adapter: routed{ok: b, bad: a}, Valid: call(1, map[string]any{"amount_inr": 1.0}), Invalid: call(1, map[string]any{"route": "bad"}),
			Slow: call(1, map[string]any{"mode": "slow"})}
	})
}

// routed sends calls marked route=bad to an adapter whose secret is
// missing (a refused call), others to a working one.
type routed struct{ ok, bad gateway.Adapter }

func (r routed) Call(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
	if c.Envelope.Args["route"] == "bad" {
		return r.bad.Call(ctx, c)
	}
	return r.ok.Call(ctx, c)
}

func TestNewRefusesBadEndpoints(t *testing.T) {
	for name, ep := range map[string]transport.Endpoint{
		"http scheme": {Transport: "grpc", URL: "http://tools.example.com:443"},
		"plaintext":   {Transport: "grpc", URL: "grpc://tools.example.com:443"},
		"private":     {Transport: "grpc", URL: "grpcs://10.0.0.1:443"},
		"not grpc":    {Transport: "external", URL: "grpcs://tools.example.com:443"},
		"missing":     {Transport: "grpc"},
		"bad auth":    {Transport: "grpc", URL: "grpcs://tools.example.com:443", Auth: &transport.Auth{Profile: "x", SecretRef: "s"}},
	} {
		if _, err := grpctransport.New(ep, nil); !errors.Is(err, transport.ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// toolErr is the *gateway.ToolError err is or wraps.
func toolErr(t *testing.T, err error) *gateway.ToolError {
	t.Helper()
	var te *gateway.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *gateway.ToolError", err, err)
	}
	return te
}
