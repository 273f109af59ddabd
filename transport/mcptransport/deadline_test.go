package mcptransport_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
)

// slowServer's slow tool answers after an hour, or when its call is
// cancelled.
func slowServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Hour):
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "lookup", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Hour):
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil
	})
	return s
}

// The caller's deadline ends an MCP call exactly when it passes, as a
// retryable timeout; through the gateway, each attempt is cut at the
// endpoint's timeout and the call fails after the endpoint's attempts.
// Measured on the synctest bubble's clock, so a loaded machine cannot
// make it flake.
func TestDeadlineInMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := memAdapter(t, slowServer(), transport.Endpoint{}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := a.Call(ctx, call("slow", map[string]any{}))
		var te *gateway.ToolError
		if !errors.As(err, &te) || te.Code != gateway.CodeTimeout || !te.Retryable || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v (wraps context.DeadlineExceeded: %v)", err, errors.Is(err, context.DeadlineExceeded))
		}
		if d := time.Since(start); d != 30*time.Millisecond {
			t.Errorf("the call returned after %v, want the deadline's 30ms", d)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		a := memAdapter(t, slowServer(), transport.Endpoint{Timeout: 2 * time.Second, Retry: transport.Retry{MaxAttempts: 2}}, nil)
		run := governed(t, a, nil)
		start := time.Now()
		res, err := run.Call(context.Background(), lookupCall())
		if err != nil || res.Status != gateway.StatusFailed || res.Error.Code != gateway.CodeTimeout || res.Metadata.Attempts != 2 {
			t.Fatalf("%s %+v attempts %d, %v", res.Status, res.Error, res.Metadata.Attempts, err)
		}
		if d := time.Since(start); d < 4*time.Second || d > 4*time.Second+time.Minute {
			t.Errorf("two 2s attempts took %v", d)
		}
	})
}
