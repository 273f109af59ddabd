package mcptransport_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/mcptransport"
)

const serverEnv = "CONTEXTOS_MCP_TEST_SERVER"

// TestMain doubles as the MCP test server: started with serverEnv set, the
// test binary serves the test tools on stdio and exits.
func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "1" {
		if err := newServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

var bg = context.Background()

func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "orders-tools", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{Name: "lookup", InputSchema: map[string]any{"type": "object", "required": []any{"order_id"},
		"properties": map[string]any{"order_id": map[string]any{"type": "string"}}, "additionalProperties": false}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]any{"status": "delivered", "args": string(req.Params.Arguments), "meta": map[string]any(req.Params.Meta)}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "fail", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "backend down, token=s3cr3t"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil
	})
	return s
}

// stdioAdapter starts the test binary as an MCP server subprocess.
func stdioAdapter(t testing.TB) *mcptransport.Adapter {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a, err := mcptransport.Connect(bg, transport.Endpoint{Transport: "mcp", Command: []string{exe, "-test.run=^$"}, Timeout: 2 * time.Second},
		&mcptransport.Options{Env: append(os.Environ(), serverEnv+"=1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func call(capability string, args map[string]any) *gateway.Call {
	return &gateway.Call{Envelope: &gateway.ToolCallEnvelope{ToolCallID: "tool_0123456789abcdef", RunID: "run_1", CapabilityID: "adp_orders." + capability, Args: args},
		Capability: capability, Attempt: 2, IdempotencyKey: "ik_1", Trace: runcontext.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", TraceFlags: "01"}}
}

func TestStdioSubprocess(t *testing.T) {
	a := stdioAdapter(t)
	if got := strings.Join(a.Tools(), ","); got != "fail,lookup,slow" {
		t.Fatalf("tools %s", got)
	}
	caps, err := a.Capabilities()
	if err != nil {
		t.Fatal(err)
	}
	// The server's schemas compile as gateway argument schemas.
	if _, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: a, Capabilities: caps}}, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(caps["lookup"].ArgsSchema), `"required":["order_id"]`) {
		t.Fatalf("lookup schema %s", caps["lookup"].ArgsSchema)
	}
	out, err := a.Call(bg, call("lookup", map[string]any{"order_id": "ord_881"}))
	if err != nil {
		t.Fatal(err)
	}
	meta := out.Output["meta"].(map[string]any)
	if out.Output["status"] != "delivered" || out.Output["args"] != `{"order_id":"ord_881"}` || meta["contextos/request_id"] != "tool_0123456789abcdef" ||
		meta["contextos/attempt"] != 2.0 || meta["contextos/idempotency_key"] != "ik_1" || meta["traceparent"] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("%v", out.Output)
	}
	_, err = a.Call(bg, call("fail", map[string]any{}))
	var te *gateway.ToolError
	if !errors.As(err, &te) || te.Code != gateway.CodeExecutionFailed || te.Retryable || strings.Contains(te.Message, "s3cr3t") || !strings.Contains(te.Message, "backend down") {
		t.Fatalf("%+v", te)
	}
	_, err = a.Call(bg, call("delete_everything", map[string]any{}))
	if !errors.As(err, &te) || te.Code != gateway.CodeUnsupportedTool {
		t.Fatalf("%v", err)
	}
	// The deadline, not the tool (which takes a minute), ends the call:
	// a bound generous enough for a loaded machine (the in-memory deadline
	// test measures it exactly, in a synctest bubble).
	ctx, cancel := context.WithTimeout(bg, 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = a.Call(ctx, call("slow", map[string]any{}))
	if !errors.As(err, &te) || te.Code != gateway.CodeTimeout || !te.Retryable || time.Since(start) > 30*time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
}

func TestAdapterConformance(t *testing.T) {
	gatewaytest.RunAdapterTests(t, func(t *testing.T) gatewaytest.AdapterHarness {
		a := stdioAdapter(t)
		return gatewaytest.AdapterHarness{Adapter: a, Valid: call("lookup", map[string]any{"order_id": "o"}), Invalid: call("nope", map[string]any{}), Slow: call("slow", map[string]any{})}
	})
}

func TestStreamableHTTPWithAuth(t *testing.T) {
	srv := newServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var sawAuth []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAuth = append(sawAuth, r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != "Bearer mcp-token" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	a, err := mcptransport.Connect(bg, transport.Endpoint{Transport: "mcp", URL: ts.URL, AllowPrivate: true, Auth: &transport.Auth{SecretRef: "mcp"}},
		&mcptransport.Options{Options: transport.Options{Secrets: transport.MapSecrets{"mcp": "mcp-token"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	out, err := a.Call(bg, call("lookup", map[string]any{"order_id": "ord_9"}))
	if err != nil || out.Output["status"] != "delivered" {
		t.Fatalf("%v %v", out, err)
	}
	if len(sawAuth) == 0 {
		t.Fatal("no requests")
	}
	if _, err := mcptransport.Connect(bg, transport.Endpoint{Transport: "mcp", URL: ts.URL, AllowPrivate: true}, nil); err == nil {
		t.Fatal("connected without the bearer token")
	}
}

func TestConnectRefusesBadEndpoints(t *testing.T) {
	for name, ep := range map[string]transport.Endpoint{
		"neither":     {Transport: "mcp"},
		"both":        {Transport: "mcp", URL: "https://x.example.com", Command: []string{"x"}},
		"not mcp":     {Transport: "http", URL: "https://x.example.com"},
		"loopback":    {Transport: "mcp", URL: "http://127.0.0.1:9"},
		"bad retries": {Transport: "mcp", Command: []string{"x"}, Retry: transport.Retry{Jitter: "nope"}},
	} {
		if _, err := mcptransport.Connect(bg, ep, nil); !errors.Is(err, transport.ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// MCP calls a server's tools by their own names: a wire name would be
	// ignored, so it is refused, naming the field.
	_, err := mcptransport.Connect(bg, transport.Endpoint{Transport: "mcp", Command: []string{"x"}, Tools: map[string]transport.ToolInfo{"search": {Name: "web_search"}}}, nil)
	var ce *transport.ConfigError
	if !errors.As(err, &ce) || ce.Field != "tools.search.name" {
		t.Errorf("a wire tool name: %v", err)
	}
}
