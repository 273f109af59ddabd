package grpctransport_test

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/grpctransport"
	"github.com/contextos/contextos/transport/internal/orlojpeer"
)

// upstreamInvoke is Orloj's gRPC client: a unary call of
// orlojpeer.Request with the json codec, decoded with Orloj's types.
func upstreamInvoke(t *testing.T, url string, req orlojpeer.Request) orlojpeer.Response {
	t.Helper()
	conn, err := grpc.NewClient(strings.TrimPrefix(url, "grpc://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var resp orlojpeer.Response
	if err := conn.Invoke(bg, grpctransport.FullMethod, &req, &resp, grpc.CallContentSubtype(grpctransport.CodecName)); err != nil {
		t.Fatalf("the upstream client got a gRPC error instead of a response: %v", err)
	}
	return resp
}

// An upstream gRPC client calling grpctransport.Register: replies decode
// with Orloj's types and pass the harness's envelope checks, refusals
// included; arguments sent only in input_raw reach the executor decoded.
func TestInteropUpstreamClientToRegister(t *testing.T) {
	t.Parallel()
	no := false
	invalid := orlojpeer.Expect{Status: "error", Code: "invalid_input", Reason: "tool_invalid_input", Retryable: &no}
	base := func(raw string) orlojpeer.Request {
		r := orlojpeer.BaseRequest("adp_payments.issue_refund", "req-123")
		r.InputRaw, r.Attempt = raw, 3
		return r
	}
	unknown, unknownWant := orlojpeer.UnknownVersion("adp_payments.issue_refund")
	for _, tc := range []struct {
		name   string
		req    orlojpeer.Request
		want   orlojpeer.Expect
		called bool
	}{
		{"arguments only in input_raw", base(`{"amount_inr":1200}`), orlojpeer.Expect{Status: "ok"}, true},
		{"catalog: unknown version", unknown, unknownWant, false},
		{"missing tool.name", func() orlojpeer.Request { r := base(`{}`); r.Tool.Name = ""; return r }(), invalid, false},
		{"text input_raw", base("tool=x payload"), orlojpeer.Expect{Status: "ok"}, true},
		{"broken object in input_raw", base(`{"amount_inr":`), invalid, false},
		{"number details", base(`{"details":"numbers"}`), orlojpeer.Expect{Status: "error", Code: "timeout", Reason: "tool_execution_timeout"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var seen []*transport.Request
			url := serveTools(t, transport.ExecutorFunc(func(_ context.Context, req *transport.Request) *transport.Response {
				mu.Lock()
				seen = append(seen, req)
				mu.Unlock()
				if req.Input["details"] == "numbers" {
					return &transport.Response{Status: "error", Error: &transport.Failure{Code: "timeout", Reason: "tool_execution_timeout", Retryable: true,
						Message: "execution exceeded timeout_ms", Details: map[string]any{"timeout_ms": 15000}}}
				}
				f, _ := req.Input["amount_inr"].(float64)
				return &transport.Response{Status: "ok", Output: map[string]any{"result": "amount " + strconv.FormatFloat(f, 'f', -1, 64)}}
			}))
			resp := upstreamInvoke(t, url, tc.req)
			if ps := orlojpeer.Validate(tc.req, resp, &tc.want); len(ps) > 0 {
				t.Errorf("conformance: %s", strings.Join(ps, "\n"))
			}
			if tc.called != (len(seen) == 1) {
				t.Fatalf("executor calls %d", len(seen))
			}
			switch tc.name {
			case "arguments only in input_raw":
				if seen[0].Input["amount_inr"] != 1200.0 || resp.Output.Result != "amount 1200" {
					t.Errorf("input %v, output %+v", seen[0].Input, resp.Output)
				}
			case "text input_raw":
				if seen[0].InputRaw != "tool=x payload" || len(seen[0].Input) != 0 {
					t.Errorf("the executor saw input %v and input_raw %q", seen[0].Input, seen[0].InputRaw)
				}
			case "number details":
				if resp.Error.Details["timeout_ms"] != "15000" {
					t.Errorf("details %v", resp.Error.Details)
				}
			}
		})
	}
}

// serveUpstream starts an upstream-style gRPC tool service: it decodes
// with Orloj's types and answers with fn's response as is.
func serveUpstream(t *testing.T, fn func(ctx context.Context, req orlojpeer.Request) orlojpeer.Response) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	s.RegisterService(&grpc.ServiceDesc{ServiceName: grpctransport.ServiceName, HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Execute", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var req orlojpeer.Request
			if err := dec(&req); err != nil {
				return nil, err
			}
			resp := fn(ctx, req)
			return &resp, nil
		}}}}, struct{}{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return "grpc://" + lis.Addr().String()
}

// Our gRPC adapter calling an upstream-style service: the request decodes
// with Orloj's types (input_raw with Endpoint.InputRaw), string details
// are read, the caller's trace context arrives in metadata with its
// flags, tracestate and baggage, and a reply of another major version is
// a non-retryable invalid_input (never relabelled v1).
func TestInteropOurAdapterToUpstreamService(t *testing.T) {
	var mu sync.Mutex
	var md []metadata.MD
	var reqs []orlojpeer.Request
	version := "v1"
	url := serveUpstream(t, func(ctx context.Context, req orlojpeer.Request) orlojpeer.Response {
		m, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		md, reqs = append(md, m), append(reqs, req)
		v := version
		mu.Unlock()
		resp := orlojpeer.Execute(ctx, func(_ context.Context, _, input string) (string, error) {
			if strings.Contains(input, "fail") {
				return "", &orlojpeer.ToolError{Code: "execution_failed", Reason: "tool_backend_failure", Retryable: true, Message: "down", Details: map[string]string{"http_status": "503"}}
			}
			return "ok:" + input, nil
		}, req)
		resp.ToolContractVersion = v
		return resp
	})
	a, err := grpctransport.New(transport.Endpoint{Transport: "grpc", URL: url, AllowPrivate: true, InputRaw: true}, &grpctransport.Options{Plaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	c := call(2, map[string]any{"amount_inr": 1200.0})
	c.Trace = runcontext.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", TraceFlags: "00", TraceState: "tenant=acme", Baggage: "run_id=run_1"}
	out, err := a.Call(bg, c)
	if err != nil || out.Output["result"] != `ok:{"amount_inr":1200}` {
		t.Fatalf("%v %v", out, err)
	}
	r, m := reqs[0], md[0]
	if r.Runtime.Mode != "grpc" || r.Attempt != 2 || r.RequestID != "tool_0123456789abcdef" || r.Trace.SpanID != "00f067aa0ba902b7" {
		t.Errorf("the upstream service saw %+v", r)
	}
	if got := m.Get("traceparent"); len(got) != 1 || got[0] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00" {
		t.Errorf("traceparent %v: the caller's unsampled flag must be kept", got)
	}
	if m.Get("tracestate")[0] != "tenant=acme" || m.Get("baggage")[0] != "run_id=run_1" {
		t.Errorf("metadata %v", m)
	}

	_, err = a.Call(bg, call(1, map[string]any{"x": "fail"}))
	if te := toolErr(t, err); te.Code != gateway.CodeExecutionFailed || !te.Retryable || te.Details["http_status"] != "503" {
		t.Errorf("%+v", te)
	}

	mu.Lock()
	version = "v2"
	mu.Unlock()
	_, err = a.Call(bg, call(1, map[string]any{"amount_inr": 1.0}))
	if te := toolErr(t, err); te.Code != gateway.CodeInvalidInput || te.Retryable || te.Details["field"] != "tool_contract_version" {
		t.Errorf("a v2 reply: %+v", te)
	}
}

// A message that is not a request envelope is answered with a refusal
// response echoing what could be read (not a gRPC status, which an
// upstream client would take for a retryable failure).
func TestRegisterRefusesAnUndecodableRequestWithAResponse(t *testing.T) {
	url := serveTools(t, transport.ExecutorFunc(func(context.Context, *transport.Request) *transport.Response {
		t.Error("the executor was called")
		return nil
	}))
	conn, err := grpc.NewClient(strings.TrimPrefix(url, "grpc://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := json.RawMessage(`{"request_id":"r-1","tool":{"name":"t"},"attempt":"two","trace":{"trace_id":"tr","span_id":"sp"}}`)
	var resp orlojpeer.Response
	if err := conn.Invoke(bg, grpctransport.FullMethod, &req, &resp, grpc.CallContentSubtype(grpctransport.CodecName)); err != nil {
		t.Fatal(err)
	}
	if resp.Status != "error" || resp.Error.Code != "invalid_input" || resp.Error.Retryable || resp.RequestID != "r-1" || resp.Trace.SpanID != "sp" || resp.Usage.Attempt != 1 || resp.ToolContractVersion != "v1" {
		t.Fatalf("%+v %+v", resp, resp.Error)
	}
}
