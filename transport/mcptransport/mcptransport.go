// Package mcptransport calls tools on a Model Context Protocol server
// through github.com/modelcontextprotocol/go-sdk, over stdio (a server
// started as a subprocess) or streamable HTTP. The server's tool list
// registers the adapter's capabilities with their input schemas, so the
// gateway validates arguments before a call leaves the process; a tool
// result becomes the gateway's outcome (isError: an execution failure);
// the call's request id, attempt, idempotency key and W3C trace context
// travel in _meta. It is its own package so hosts that do not use MCP do
// not link the SDK.
package mcptransport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/internal/scrub"
)

// Meta keys the adapter sets on every call.
const (
	MetaTraceparent    = "traceparent"
	MetaRequestID      = "contextos/request_id"
	MetaAttempt        = "contextos/attempt"
	MetaIdempotencyKey = "contextos/idempotency_key"
)

// Options tune an adapter.
type Options struct {
	transport.Options
	// Env is the subprocess's environment (nil: the parent's).
	Env []string
	// Dir is the subprocess's working directory.
	Dir string
}

// Adapter is a gateway.Adapter for one MCP server session. Close ends the
// session (and the subprocess).
type Adapter struct {
	ep      transport.Endpoint
	opts    Options
	session *mcp.ClientSession
	tools   map[string]*mcp.Tool

	closeOnce sync.Once
	closeErr  error
}

var _ gateway.Adapter = (*Adapter)(nil)

// Connect starts or reaches the server of ep (transport "mcp", Command or
// URL), initializes the session and reads the tool list.
func Connect(ctx context.Context, ep transport.Endpoint, opts *Options) (*Adapter, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Options = o.Options.WithDefaults()
	if ep.Transport != transport.TransportMCP {
		return nil, fmt.Errorf("%w: mcptransport serves transport mcp, not %q", transport.ErrConfig, ep.Transport)
	}
	if err := ep.Retry.Check(); err != nil {
		return nil, err
	}
	var t mcp.Transport
	switch {
	case len(ep.Command) > 0 && ep.URL != "":
		return nil, fmt.Errorf("%w: an mcp endpoint has a command or a url, not both", transport.ErrConfig)
	case len(ep.Command) > 0:
		cmd := exec.Command(ep.Command[0], ep.Command[1:]...)
		cmd.Env, cmd.Dir = o.Env, o.Dir
		t = &mcp.CommandTransport{Command: cmd}
	case ep.URL != "":
		if _, err := transport.CheckEndpoint(ep.URL, ep.AllowPrivate); err != nil {
			return nil, err
		}
		if err := ep.Auth.Check(ep.AllowPrivate); err != nil {
			return nil, err
		}
		if o.MaxRedirects < 0 {
			return nil, fmt.Errorf("%w: max_redirects must not be negative", transport.ErrConfig)
		}
		u, _ := url.Parse(ep.URL)
		// The transport's rules: no redirects unless the host allows them,
		// then only to the endpoint's origin; the checked dialer unless the
		// host brings its own transport. Auth headers are resolved per
		// request, so rotation applies, and set only on requests to the
		// endpoint's origin.
		hc := transport.HTTPClientFor(&ep, &o.Options)
		hc.Transport = authRoundTripper{next: hc.Transport, ep: &ep, opts: &o.Options, origin: origin(u)}
		t = &mcp.StreamableClientTransport{Endpoint: ep.URL, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}
	default:
		return nil, fmt.Errorf("%w: an mcp endpoint needs a command or a url", transport.ErrConfig)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "contextos", Version: "v1"}, nil)
	session, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("mcptransport: connect: %w", err)
	}
	a := &Adapter{ep: ep, opts: o, session: session, tools: map[string]*mcp.Tool{}}
	for tool, err := range session.Tools(ctx, nil) {
		if err != nil {
			session.Close()
			return nil, fmt.Errorf("mcptransport: list tools: %w", err)
		}
		a.tools[tool.Name] = tool
	}
	return a, nil
}

// origin is scheme://host:port, lower-cased.
func origin(u *url.URL) string {
	if u == nil {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")) + ":" + port
}

// authRoundTripper sets the endpoint's auth headers on every request to
// the endpoint's origin, and on no other.
type authRoundTripper struct {
	next   http.RoundTripper
	ep     *transport.Endpoint
	opts   *transport.Options
	origin string
}

func (rt authRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if origin(r.URL) != rt.origin {
		return rt.next.RoundTrip(r)
	}
	h, _, te := transport.AuthHeaders(r.Context(), rt.ep, rt.opts)
	if te != nil {
		return nil, te
	}
	r = r.Clone(r.Context())
	for k, vs := range h {
		r.Header[k] = vs
	}
	return rt.next.RoundTrip(r)
}

// Close ends the session.
func (a *Adapter) Close() error {
	a.closeOnce.Do(func() { a.closeErr = a.session.Close() })
	return a.closeErr
}

// Tools returns the server's tool names, sorted.
func (a *Adapter) Tools() []string {
	out := make([]string, 0, len(a.tools))
	for n := range a.tools {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Capabilities returns one gateway capability per server tool, with its
// input schema as ArgsSchema and the endpoint's timeout and retry policy.
func (a *Adapter) Capabilities() (map[string]gateway.Capability, error) {
	out := map[string]gateway.Capability{}
	for name, t := range a.tools {
		schema, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("mcptransport: tool %s: input schema: %w", name, err)
		}
		c := a.ep.Capability()
		c.ArgsSchema = schema
		out[name] = c
	}
	return out, nil
}

// Call implements gateway.Adapter: the capability name is the MCP tool.
func (a *Adapter) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	req := transport.RequestFor(call, transport.TransportMCP, &a.ep)
	capability := call.Capability
	resp := transport.RunAttempt(ctx, &a.opts.Options, transport.TransportMCP, a.ep.Auth, req, func(ctx context.Context) (*transport.Response, *gateway.ToolError) {
		return a.callTool(ctx, capability, req)
	})
	return transport.Outcome(req, resp)
}

func (a *Adapter) callTool(ctx context.Context, name string, req *transport.Request) (*transport.Response, *gateway.ToolError) {
	details := map[string]any{"tool": req.Tool.Name, "isolation_mode": transport.TransportMCP}
	if _, ok := a.tools[name]; !ok {
		return nil, gateway.NewToolError(gateway.CodeUnsupportedTool, false, fmt.Sprintf("the MCP server has no tool %q", name), details)
	}
	meta := mcp.Meta{MetaRequestID: req.RequestID, MetaAttempt: req.Attempt}
	if req.IdempotencyKey != "" {
		meta[MetaIdempotencyKey] = req.IdempotencyKey
	}
	if tp := transport.Traceparent(req.Trace); tp != "" {
		meta[MetaTraceparent] = tp
	}
	res, err := a.session.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: name, Arguments: req.Input})
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, transport.TransportError(ctx, err, details)
		}
		var te *gateway.ToolError
		if errors.As(err, &te) {
			return nil, te // auth resolution on the HTTP transport
		}
		return nil, gateway.NewToolError(gateway.CodeExecutionFailed, true, "the MCP call failed", details)
	}
	if res.IsError {
		// Scrub the attempt's secrets before the clip, which could cut one
		// in half.
		msg := transport.Redact(scrub.From(ctx).String(text(res)))
		if len(msg) > 400 {
			msg = strings.ToValidUTF8(msg[:400], "")
		}
		if msg == "" {
			msg = "the MCP tool reported an error"
		}
		return nil, gateway.NewToolError(gateway.CodeExecutionFailed, false, msg, details)
	}
	return &transport.Response{Status: transport.StatusOK, Output: output(res)}, nil
}

// output is the structured content when it is an object, else
// {"result": structured content or the text content}.
func output(res *mcp.CallToolResult) map[string]any {
	if res.StructuredContent != nil {
		var v any
		if b, err := json.Marshal(res.StructuredContent); err == nil && json.Unmarshal(b, &v) == nil {
			if m, ok := v.(map[string]any); ok {
				return m
			}
			return map[string]any{"result": v}
		}
	}
	return map[string]any{"result": text(res)}
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}
