package mcptransport_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/mcptransport"
)

// progressServer's lookup, asked for progress, reports twice (the first
// message carrying a card number) and then waits until release is closed
// before it answers; asked without a token it answers at once. asked
// counts the calls that carried a token.
func progressServer(asked *atomic.Int32, release <-chan struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "progress", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{Name: "lookup", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}}, "additionalProperties": false}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				asked.Add(1)
				for i, msg := range []string{"charging card " + card, "done"} {
					req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i + 1), Total: 2, Message: msg})
				}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return &mcp.CallToolResult{StructuredContent: map[string]any{"status": "delivered"}}, nil
		})
	return s
}

// A call whose caller listens for progress (gateway.WithProgress) and
// that has more than Options.ProgressAfter left asks the server for
// progress notifications, and each reaches the listener, on the calling
// goroutine, in order, with the call's ids and a redacted message; a call
// without a listener, or with less time, or with progress turned off,
// asks for none.
func TestProgressNotifications(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // the endpoint's (0: the gateway's default, 30s)
		listen  bool
		opts    *mcptransport.Options
		want    int // progress reports relayed (0: none asked for)
	}{
		{name: "listener, the default 30s timeout", listen: true, want: 2},
		{name: "listener, a timeout above ProgressAfter", timeout: 20 * time.Second, listen: true, opts: &mcptransport.Options{ProgressAfter: 10 * time.Second}, want: 2},
		{name: "listener, a timeout of a few seconds", timeout: 3 * time.Second, listen: true},
		{name: "no listener", listen: false},
		{name: "progress turned off", listen: true, opts: &mcptransport.Options{ProgressAfter: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked atomic.Int32
			release := make(chan struct{})
			a := memAdapter(t, progressServer(&asked, release), transport.Endpoint{Timeout: tc.timeout}, tc.opts)
			run := governed(t, a, nil)
			var got []gateway.Progress
			ctx := bg
			if tc.listen {
				ctx = gateway.WithProgress(bg, func(p gateway.Progress) {
					got = append(got, p)
					if len(got) == 2 {
						close(release)
					}
				})
			}
			res, err := run.Call(ctx, lookupCall())
			if err != nil || res.Status != gateway.StatusOK || res.Output["status"] != "delivered" {
				t.Fatalf("%s %+v %v", res.Status, res.Error, err)
			}
			if n := int(asked.Load()); tc.want == 0 && n != 0 || tc.want > 0 && n != 1 {
				t.Fatalf("the server was asked for progress %d times", n)
			}
			if len(got) != tc.want {
				t.Fatalf("%d reports, want %d: %+v", len(got), tc.want, got)
			}
			for i, p := range got {
				want := gateway.Progress{ToolCallID: res.ToolCallID, CapabilityID: "adp_orders.lookup", Attempt: 1, Progress: float64(i + 1), Total: 2,
					Message: []string{"charging card [REDACTED]", "done"}[i]}
				if p != want {
					t.Errorf("report %d = %+v, want %+v", i, p, want)
				}
			}
		})
	}
}

// A server that echoes the bearer token it was sent in its progress
// messages, as is or encoded, gets none of it to the progress listener:
// the relay scrubs the secrets the attempt resolved before the gateway
// redacts the message (the token is opaque: no catalogue rule knows it).
func TestProgressScrubsResolvedToken(t *testing.T) {
	relayed := make(chan struct{})
	var once sync.Once
	s := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := strings.TrimPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
		if pt := req.Params.GetProgressToken(); pt != nil {
			for i, msg := range []string{"using " + tok, "as base64 " + base64.StdEncoding.EncodeToString([]byte(tok)), "hex " + hex.EncodeToString([]byte(tok))} {
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: pt, Progress: float64(i + 1), Message: msg})
			}
			select { // until the first report reached the listener
			case <-relayed:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &mcp.CallToolResult{StructuredContent: map[string]any{"seen": tok}}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close) // after the adapter's Close, which ends the session
	opts := &mcptransport.Options{Options: transport.Options{Secrets: transport.MapSecrets{"mcp": mcpToken}}}
	a := connect(t, ts.URL, &transport.Auth{SecretRef: "mcp"}, opts)
	var got []gateway.Progress
	ctx := gateway.WithProgress(bg, func(p gateway.Progress) {
		got = append(got, p)
		once.Do(func() { close(relayed) })
	})
	out, err := a.Call(ctx, call("echo", map[string]any{}))
	if err != nil {
		t.Fatal(err)
	}
	if out.Output["seen"] != "[REDACTED]" {
		t.Fatalf("output not scrubbed: %v", out.Output)
	}
	if len(got) == 0 || got[0].Message != "using [REDACTED]" {
		t.Fatalf("progress = %+v, want the first message with the token masked", got)
	}
	for _, p := range got {
		for _, f := range []string{mcpToken, base64.StdEncoding.EncodeToString([]byte(mcpToken))[:16], hex.EncodeToString([]byte(mcpToken))[:16]} {
			if strings.Contains(p.Message, f) {
				t.Errorf("progress message %q carries the resolved bearer token", p.Message)
			}
		}
	}
}
