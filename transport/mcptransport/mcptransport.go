// Package mcptransport calls tools on a Model Context Protocol server
// through github.com/modelcontextprotocol/go-sdk, over stdio (a server
// started as a subprocess), streamable HTTP, or any mcp.Transport the host
// brings (Options.Transport: one end of mcp.NewInMemoryTransports, for
// one). The server's tool list registers the adapter's capabilities with
// their input schemas, so the gateway validates arguments before a call
// leaves the process.
//
// A tool result becomes the gateway's outcome (isError: an execution
// failure). The output is the structured content when it is an object,
// else {"result": structured content or the text content}; non-text
// content blocks (images, audio, resource links, embedded resources) are
// kept, in the server's order, as typed blocks under "content" (see
// OutputContent): the gateway's redaction and max_payload_bytes apply to them as
// to any output.
//
// The call's request id, attempt, idempotency key and W3C trace context
// (traceparent with the caller's sampled flag and the current span as
// parent, tracestate, baggage) travel in _meta; the tool's arguments are
// the envelope's (the gateway injects idempotency_key into them only when
// the tool's schema admits it). When the caller listens for progress
// (gateway.WithProgress) and the call has more than Options.ProgressAfter
// left, the adapter asks for progress notifications and relays them
// (gateway.ReportProgress).
//
// It is its own package so hosts that do not use MCP do not link the SDK.
package mcptransport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/internal/w3ctrace"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/internal/kit"
	"github.com/contextos/contextos/transport/internal/netguard"
	"github.com/contextos/contextos/transport/internal/scrub"
)

// Meta keys the adapter sets on every call.
const (
	MetaTraceparent    = "traceparent"
	MetaTracestate     = "tracestate"
	MetaBaggage        = "baggage"
	MetaRequestID      = "contextos/request_id"
	MetaAttempt        = "contextos/attempt"
	MetaIdempotencyKey = "contextos/idempotency_key"
)

// Defaults of Options.
const (
	DefaultMaxInlineBytes = 64 << 10
	DefaultProgressAfter  = 5 * time.Second
)

// Options tune an adapter.
type Options struct {
	transport.Options
	// Env is the subprocess's environment (nil: the parent's).
	Env []string
	// Dir is the subprocess's working directory.
	Dir string
	// Transport, when set, is the connection to the server (one end of
	// mcp.NewInMemoryTransports, a host's own transport): the endpoint then
	// names neither a command nor a url. Connect owns it from then on.
	Transport mcp.Transport
	// MaxInlineBytes bounds what a non-text content block keeps: the data
	// of an image, audio or embedded blob larger than this is replaced by
	// its sha256 digest, and the text of an embedded text resource is
	// clipped to it. Default DefaultMaxInlineBytes; negative: no data is
	// kept inline.
	MaxInlineBytes int
	// ProgressAfter: a call asks for progress notifications when its
	// caller listens (gateway.WithProgress) and its context has more than
	// this left (or no deadline). Default DefaultProgressAfter; negative:
	// never.
	ProgressAfter time.Duration
}

// Adapter is a gateway.Adapter for one MCP server session. Close ends the
// session (and the subprocess).
type Adapter struct {
	ep      transport.Endpoint
	opts    Options
	tracer  trace.Tracer // kit.Tracer(&opts.Options), got once
	session *mcp.ClientSession
	tools   map[string]*mcp.Tool

	// waiting maps the progress token of each call in flight that asked
	// for progress to its channel of notifications.
	waiting sync.Map
	seq     atomic.Uint64

	closeOnce sync.Once
	closeErr  error
}

var _ gateway.Adapter = (*Adapter)(nil)

// Connect starts or reaches the server of ep (transport "mcp", Command,
// URL or Options.Transport), initializes the session and reads the tool
// list.
func Connect(ctx context.Context, ep transport.Endpoint, opts *Options) (*Adapter, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Options = kit.Defaults(&o.Options)
	if o.MaxInlineBytes == 0 {
		o.MaxInlineBytes = DefaultMaxInlineBytes
	}
	if o.ProgressAfter == 0 {
		o.ProgressAfter = DefaultProgressAfter
	}
	if ep.Transport != transport.TransportMCP {
		return nil, fmt.Errorf("%w: mcptransport serves transport mcp, not %q", transport.ErrConfig, ep.Transport)
	}
	if err := kit.CheckRetry(ep.Retry); err != nil {
		return nil, err
	}
	for _, c := range slices.Sorted(maps.Keys(ep.Tools)) {
		if ep.Tools[c].Name != "" {
			// MCP calls a server's tools by their own names, which are
			// the capabilities (Capabilities): there is no wire name to
			// choose, and a name that would be ignored is refused.
			return nil, &transport.ConfigError{Field: "tools." + c + ".name", Problem: "is not used by the mcp transport, which calls the server's tools by their own names"}
		}
	}
	var t mcp.Transport
	switch {
	case o.Transport != nil && (len(ep.Command) > 0 || ep.URL != ""):
		return nil, fmt.Errorf("%w: an mcp endpoint with Options.Transport names no command or url", transport.ErrConfig)
	case o.Transport != nil:
		t = o.Transport
	case len(ep.Command) > 0 && ep.URL != "":
		return nil, fmt.Errorf("%w: an mcp endpoint has a command or a url, not both", transport.ErrConfig)
	case len(ep.Command) > 0:
		cmd := exec.Command(ep.Command[0], ep.Command[1:]...)
		cmd.Env, cmd.Dir = o.Env, o.Dir
		t = &mcp.CommandTransport{Command: cmd}
	case ep.URL != "":
		if _, err := kit.CheckEndpoint(ep.URL, ep.AllowPrivate); err != nil {
			return nil, err
		}
		if err := kit.CheckAuth(ep.Auth, ep.AllowPrivate); err != nil {
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
		hc := kit.HTTPClient(&ep, &o.Options)
		hc.Transport = authRoundTripper{next: hc.Transport, ep: &ep, opts: &o.Options, origin: netguard.Origin(u)}
		t = &mcp.StreamableClientTransport{Endpoint: ep.URL, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}
	default:
		return nil, fmt.Errorf("%w: an mcp endpoint needs a command, a url or Options.Transport", transport.ErrConfig)
	}
	a := &Adapter{ep: ep, opts: o, tracer: kit.Tracer(&o.Options), tools: map[string]*mcp.Tool{}}
	client := mcp.NewClient(&mcp.Implementation{Name: "contextos", Version: "v1"}, &mcp.ClientOptions{ProgressNotificationHandler: a.progressed})
	session, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("mcptransport: connect: %w", err)
	}
	a.session = session
	for tool, err := range session.Tools(ctx, nil) {
		if err != nil {
			session.Close()
			return nil, fmt.Errorf("mcptransport: list tools: %w", err)
		}
		a.tools[tool.Name] = tool
	}
	return a, nil
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
	if netguard.Origin(r.URL) != rt.origin {
		return rt.next.RoundTrip(r)
	}
	h, te := kit.AuthHeaders(r.Context(), rt.ep, rt.opts)
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
// input schema as ArgsSchema, the digest of the schema's canonical JSON as
// its ArgSchemaRef (never the server's "$id", which the server controls
// and could fill with what it was sent), and the endpoint's timeout and
// retry policy.
func (a *Adapter) Capabilities() (map[string]gateway.Capability, error) {
	out := map[string]gateway.Capability{}
	for name, t := range a.tools {
		schema, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("mcptransport: tool %s: input schema: %w", name, err)
		}
		dec := json.NewDecoder(bytes.NewReader(schema))
		dec.UseNumber()
		var doc any
		if err := dec.Decode(&doc); err != nil {
			return nil, fmt.Errorf("mcptransport: tool %s: input schema: %w", name, err)
		}
		ref, err := canon.Digest(doc)
		if err != nil {
			return nil, fmt.Errorf("mcptransport: tool %s: input schema: %w", name, err)
		}
		c := kit.Capability(&a.ep)
		c.ArgsSchema, c.ArgSchemaRef = schema, ref
		out[name] = c
	}
	return out, nil
}

// Call implements gateway.Adapter: the capability name is the MCP tool.
// A call that ended because ctx did returns an error that is the
// *gateway.ToolError (errors.As) and wraps ctx's error
// (errors.Is(err, context.Canceled)).
func (a *Adapter) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	req := kit.RequestFor(call, transport.TransportMCP, &a.ep)
	resp := kit.Attempt(ctx, a.tracer, &a.opts.Options, transport.TransportMCP, a.ep.Auth, req, func(ctx context.Context, caller w3ctrace.Caller) (*transport.Response, *gateway.ToolError) {
		return a.callTool(ctx, call, req, &caller)
	})
	return kit.Outcome(ctx, call, req, resp)
}

func (a *Adapter) callTool(ctx context.Context, call *gateway.Call, req *transport.Request, caller *w3ctrace.Caller) (*transport.Response, *gateway.ToolError) {
	name := call.Capability
	details := map[string]any{"tool": req.Tool.Name, "isolation_mode": transport.TransportMCP}
	if _, ok := a.tools[name]; !ok {
		return nil, gateway.NewToolError(gateway.CodeUnsupportedTool, false, fmt.Sprintf("the MCP server has no tool %q", name), details)
	}
	meta := mcp.Meta{MetaRequestID: req.RequestID, MetaAttempt: req.Attempt}
	if req.IdempotencyKey != "" {
		meta[MetaIdempotencyKey] = req.IdempotencyKey
	}
	// The caller's trace context, parented on the current span with its
	// sampled flag; tracestate and baggage forwarded (seed 000).
	kit.TraceHeaders(ctx, caller, func(k, v string) { meta[k] = v })
	params := &mcp.CallToolParams{Meta: meta, Name: name, Arguments: req.Input}
	var res *mcp.CallToolResult
	var err error
	if a.wantsProgress(ctx) {
		res, err = a.callWithProgress(ctx, call, params)
	} else {
		res, err = a.session.CallTool(ctx, params)
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, kit.CallError(ctx, err, details)
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
		msg := redact(scrub.From(ctx).String(text(res)))
		if len(msg) > 400 {
			msg = strings.ToValidUTF8(msg[:400], "")
		}
		if msg == "" {
			msg = "the MCP tool reported an error"
		}
		return nil, gateway.NewToolError(gateway.CodeExecutionFailed, false, msg, details)
	}
	return &transport.Response{Status: transport.StatusOK, Output: output(res, a.opts.MaxInlineBytes, scrub.From(ctx).String)}, nil
}

// wantsProgress: the caller listens, and the call may take long enough.
func (a *Adapter) wantsProgress(ctx context.Context) bool {
	if a.opts.ProgressAfter < 0 || !gateway.ProgressWanted(ctx) {
		return false
	}
	dl, ok := ctx.Deadline()
	return !ok || dl.Sub(a.opts.Now()) > a.opts.ProgressAfter
}

// note is one progress notification.
type note struct {
	progress, total float64
	message         string
}

// progressed receives the server's progress notifications (on the
// session's goroutine) and hands each to the call it is for; a call that
// is behind loses notifications rather than holding up the session.
func (a *Adapter) progressed(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	if r == nil || r.Params == nil {
		return
	}
	tok, ok := r.Params.ProgressToken.(string)
	if !ok {
		return
	}
	if ch, ok := a.waiting.Load(tok); ok {
		select {
		case ch.(chan note) <- note{r.Params.Progress, r.Params.Total, r.Params.Message}:
		default:
		}
	}
}

// callWithProgress makes the call with a progress token and relays its
// notifications, on this goroutine (the one running the adapter's Call),
// until the result is in.
func (a *Adapter) callWithProgress(ctx context.Context, call *gateway.Call, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	tok := call.Envelope.ToolCallID + "/" + strconv.Itoa(call.Attempt) + "/" + strconv.FormatUint(a.seq.Add(1), 10)
	params.SetProgressToken(tok)
	ch := make(chan note, 32)
	a.waiting.Store(tok, ch)
	defer a.waiting.Delete(tok)
	var res *mcp.CallToolResult
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = a.session.CallTool(ctx, params)
	}()
	// A message is the server's words: the secrets the attempt resolved
	// (its auth, which a server can echo) are scrubbed before the gateway
	// redacts and clips it.
	clean := scrub.From(ctx).String
	relay := func(n note) {
		gateway.ReportProgress(ctx, call, gateway.Progress{Progress: n.progress, Total: n.total, Message: clean(n.message)})
	}
	for {
		select {
		case n := <-ch:
			relay(n)
		case <-done:
			for {
				select {
				case n := <-ch:
					relay(n)
				default:
					return res, err
				}
			}
		}
	}
}

// OutputContent is the output member that holds a result's non-text
// content blocks, in the result's order. Each is an object (snake_case,
// empty members left out):
//
//	index      its position in the result's content list
//	type       "image", "audio", "resource_link" or "resource" (embedded)
//	mime_type  the media type the server gave
//	size       the data's size in bytes (decoded), the text's, or the size
//	           a resource link declares
//	uri        a resource's or resource link's uri
//	name, title, description   a resource link's
//	data       the data, base64 (standard encoding), when it is at most
//	           Options.MaxInlineBytes
//	sha256     "sha256:<hex>" of the data, when the data is not kept
//	text       an embedded text resource's text, clipped to
//	           Options.MaxInlineBytes (then truncated: true)
//	redacted   true when data that would have been kept inline held a
//	           secret the call's auth resolved or sensitive data (a card
//	           number, a key, ...): then neither data nor sha256 is given
//
// A digest is given only in place of data too large to keep, never beside
// it nor for redacted data, so a small value cannot be recovered by
// hashing guesses. Numbers are float64, as
// decoded JSON has them.
const OutputContent = "content"

// block is one kept content block (see OutputContent).
type block = map[string]any

// output is the structured content when it is an object, else
// {"result": structured content or the text content}; the non-text
// blocks, when there are any, under "content" (when the structured
// content has a member of that name, it is kept whole under "result").
// clean removes the secrets the attempt resolved (its auth): the
// transport scrubs the output's strings afterwards, but not inside
// base64 data or across a clip.
func output(res *mcp.CallToolResult, maxInline int, clean func(string) string) map[string]any {
	var out map[string]any
	if res.StructuredContent != nil {
		var v any
		if b, err := json.Marshal(res.StructuredContent); err == nil && json.Unmarshal(b, &v) == nil {
			if m, ok := v.(map[string]any); ok {
				out = m
			} else {
				out = map[string]any{"result": v}
			}
		}
	}
	if out == nil {
		out = map[string]any{"result": text(res)}
	}
	blocks := contentBlocks(res.Content, maxInline, clean)
	if len(blocks) == 0 {
		return out
	}
	if _, taken := out[OutputContent]; taken {
		out = map[string]any{"result": out}
	}
	out[OutputContent] = blocks
	return out
}

// contentBlocks keeps the non-text blocks, in order.
func contentBlocks(content []mcp.Content, maxInline int, clean func(string) string) []any {
	var out []any
	for i, c := range content {
		b := block{"index": float64(i)}
		switch x := c.(type) {
		case *mcp.TextContent:
			continue
		case *mcp.ImageContent:
			b["type"] = "image"
			binary(b, x.MIMEType, x.Data, maxInline, clean)
		case *mcp.AudioContent:
			b["type"] = "audio"
			binary(b, x.MIMEType, x.Data, maxInline, clean)
		case *mcp.ResourceLink:
			b["type"] = "resource_link"
			set(b, "uri", x.URI)
			set(b, "name", x.Name)
			set(b, "title", x.Title)
			set(b, "description", x.Description)
			set(b, "mime_type", x.MIMEType)
			if x.Size != nil && *x.Size >= 0 {
				b["size"] = float64(*x.Size)
			}
		case *mcp.EmbeddedResource:
			b["type"] = "resource"
			if r := x.Resource; r != nil {
				set(b, "uri", r.URI)
				switch {
				case r.Blob != nil:
					binary(b, r.MIMEType, r.Blob, maxInline, clean)
				default:
					set(b, "mime_type", r.MIMEType)
					textBlock(b, r.Text, maxInline, clean)
				}
			}
		default:
			// A kind this SDK version knows and the MCP tool result does not
			// define (tool use, tool result): its type only.
			b["type"] = "unsupported"
		}
		out = append(out, b)
	}
	return out
}

func set(b block, k, v string) {
	if v != "" {
		b[k] = v
	}
}

// binary keeps data inline up to maxInline bytes, else its digest. Data
// that holds a secret the attempt resolved, or anything of the sensitive
// catalogue read as text (a card number in UTF-8 text, behind binary, in
// UTF-16; see sensitive.DetectBytes), is not kept at all: neither inline
// nor as a digest, which would let a short value be recovered by hashing
// guesses (redacted: true, with its type and size).
func binary(b block, mime string, data []byte, maxInline int, clean func(string) string) {
	set(b, "mime_type", mime)
	b["size"] = float64(len(data))
	if len(data) <= maxInline {
		if _, found := sensitive.DetectBytes(data, sensitive.All); found || clean(string(data)) != string(data) {
			b["redacted"] = true
			return
		}
		b["data"] = base64.StdEncoding.EncodeToString(data)
		return
	}
	sum := sha256.Sum256(data)
	b["sha256"] = "sha256:" + hex.EncodeToString(sum[:])
}

// textBlock keeps text up to maxInline bytes. The clip comes after the
// attempt's secrets are scrubbed and every built-in redaction rule ran, so
// it cannot cut a secret or card number in half and past the redaction
// that follows.
func textBlock(b block, s string, maxInline int, clean func(string) string) {
	b["size"] = float64(len(s))
	if len(s) <= maxInline {
		b["text"] = s
		return
	}
	s = redact(clean(s))
	if len(s) > maxInline {
		s = strings.ToValidUTF8(s[:max(maxInline, 0)], "")
		b["truncated"] = true
	}
	b["text"] = s
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

// redact replaces the secrets and personal data of the sensitive-data
// catalogue in s with [REDACTED], as the other transports redact a tool's
// error text.
func redact(s string) string {
	out, _ := sensitive.Redact(s, sensitive.All)
	return out
}
