package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/w3ctrace"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/transport/internal/scrub"
)

// Transport names.
const (
	TransportHTTP     = "http"
	TransportExternal = "external"
	TransportWebhook  = "webhook"
	TransportGRPC     = "grpc"
	TransportMCP      = "mcp"
)

// modeWebhookCallback is the webhook transport's name on the wire
// (runtime.mode, details.isolation_mode, the protocol the gateway records)
// and in tool configurations (seed 004's "webhook-callback"); NewAdapter
// takes it as a synonym of TransportWebhook.
const modeWebhookCallback = "webhook-callback"

// wireMode is a transport's runtime mode on the wire and its protocol
// name: its name, except webhook, which is webhook-callback.
func wireMode(transport string) string {
	if transport == TransportWebhook {
		return modeWebhookCallback
	}
	return transport
}

// Endpoint is where and how an adapter reaches its tools.
type Endpoint struct {
	// Transport is http, external or webhook (webhook-callback is the same)
	// here; grpc and mcp have their own packages.
	Transport string `json:"transport"`
	// URL is the tool endpoint. http posts each capability to URL as is
	// (the capability is in the X-Tool-Name header); external and webhook
	// post the envelope to it; webhook polls URL/{request_id}.
	URL string `json:"url,omitempty"`
	// Command is an MCP server's argv, started as a subprocess speaking
	// stdio (mcp only; URL is its streamable HTTP endpoint otherwise).
	Command []string `json:"command,omitempty"`
	// Auth is the endpoint's auth profile and secret reference.
	Auth *Auth `json:"auth,omitempty"`
	// Timeout bounds one attempt (gateway.Capability.Timeout).
	Timeout time.Duration `json:"-"`
	// Retry is the endpoint's retry policy (the gateway runs it).
	Retry Retry `json:"-"`
	// AllowPrivate lets the endpoint be a loopback or private address.
	AllowPrivate bool `json:"allow_private,omitempty"`
	// PollInterval is the webhook poll interval. Default 2s.
	PollInterval time.Duration `json:"-"`
	// Namespace and Agent fill the envelope's namespace and agent.
	Namespace string `json:"namespace,omitempty"`
	Agent     string `json:"agent,omitempty"`
	// Tools declares, per capability name, the tool.name sent for it and
	// its labels and risk level, sent as tool.capabilities and
	// tool.risk_level.
	Tools map[string]ToolInfo `json:"tools,omitempty"`
	// InputRaw makes the envelope transports (external, webhook, grpc)
	// send the arguments only in input_raw, as JSON text, the layout
	// Orloj's own clients use. Set it for servers that type input as
	// string → string (Orloj's decoder refuses a whole request whose input
	// holds a number); by default input carries the arguments as any JSON
	// (seed 004). Our servers (NewHandler, grpctransport.Register) read
	// both.
	InputRaw bool `json:"input_raw,omitempty"`
}

// ToolInfo is what a capability's requests say of their tool.
type ToolInfo struct {
	// Name is the tool.name sent for the capability (and the X-Tool-Name
	// header of the http transport): the name the tool's server knows it
	// by, so an upstream tool named web_search can serve capability
	// adp_search.web_search. Default: the capability id
	// (adapter_id.capability). It is a wire name only: results, records,
	// mutations and idempotency keys name the capability id. Two
	// capabilities of an endpoint cannot share one, and the mcp transport,
	// which calls a server's tools by their own names, takes none.
	Name         string   `json:"name,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	RiskLevel    string   `json:"risk_level,omitempty"`
}

// Options are what an adapter shares with others: clients, secrets,
// tokens, telemetry and clock.
type Options struct {
	// HTTPClient makes tool calls. Default: a client without a timeout of
	// its own (the gateway's attempt deadline bounds each call). Its
	// CheckRedirect is replaced by the MaxRedirects rule. When its
	// Transport is nil, calls use a shared transport whose dialer refuses
	// link-local and metadata addresses, and loopback and private ones
	// without the endpoint's AllowPrivate, whatever a host name resolves
	// to, and which uses no proxy; a host that sets its own Transport (a
	// proxy, say) owns that check.
	HTTPClient *http.Client
	// MaxRedirects is how many redirects one request may follow. Zero,
	// the default: none, and a 3xx reply is a non-retryable
	// execution_failed naming the status (never the Location). Otherwise
	// every hop must stay on the origin (scheme, host and port) of the
	// request and pass the endpoint rules again; a redirect to another
	// origin, or beyond MaxRedirects hops, is refused the same way, so
	// credentials and bodies are never sent to another host. OAuth2 token
	// requests never follow redirects.
	MaxRedirects int
	// Secrets resolves auth secret references on every call.
	Secrets SecretResolver
	// Tokens caches OAuth2 client-credentials tokens. Default: nil, and
	// each adapter keeps a cache of its own. Adapters that reach the same
	// token endpoint with the same client share tokens only when the host
	// passes them one cache (&TokenCache{}); nothing is shared through
	// package state.
	Tokens *TokenCache
	// TracerProvider makes one span per attempt. Default: the global one.
	TracerProvider trace.TracerProvider
	// Logger logs one line per attempt (never inputs, outputs or
	// secrets). Default: discard.
	Logger *slog.Logger
	// Now is the clock for durations. Default: time.Now.
	Now func() time.Time
}

// withDefaults returns the options with every unset field defaulted
// (Tokens: a new cache, so call it once per adapter, when the adapter is
// built, never per call).
func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.HTTPClient == nil {
		out.HTTPClient = &http.Client{}
	}
	if out.Tokens == nil {
		out.Tokens = &TokenCache{}
	}
	if out.TracerProvider == nil {
		out.TracerProvider = otel.GetTracerProvider()
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out
}

// maxBody bounds a tool reply.
const maxBody = 4 << 20

// Adapter is a gateway.Adapter that calls tools over HTTP with Tool
// Contract v1: http (the input as the body), external (the envelope) or
// webhook (the envelope, then a wait for the result). One attempt per
// gateway call. Safe for concurrent use.
type Adapter struct {
	ep      Endpoint
	opts    Options
	client  *http.Client      // opts.HTTPClient with the redirect and dial rules
	direct  http.RoundTripper // client's transport when client.Do would only hand requests to it (nil otherwise)
	url     *url.URL          // ep.URL parsed as each request parses it (nil: it does not parse)
	tracer  trace.Tracer
	spans   atomic.Pointer[map[string]string] // span names by tool name (spanName)
	pending *pending                          // webhook calls waiting for a result
}

var _ gateway.Adapter = (*Adapter)(nil)

// NewAdapter checks ep and returns its adapter (ErrConfig when ep cannot
// work).
func NewAdapter(ep Endpoint, opts *Options) (*Adapter, error) {
	if ep.Transport == modeWebhookCallback {
		ep.Transport = TransportWebhook
	}
	switch ep.Transport {
	case TransportHTTP, TransportExternal, TransportWebhook:
	case TransportGRPC, TransportMCP:
		return nil, fmt.Errorf("%w: transport %s has its own package (transport/grpctransport, transport/mcptransport)", ErrConfig, ep.Transport)
	default:
		return nil, fmt.Errorf("%w: transport %q is not http, external or webhook", ErrConfig, clip(ep.Transport))
	}
	if _, err := checkEndpoint(ep.URL, ep.AllowPrivate); err != nil {
		return nil, err
	}
	if err := ep.Auth.check(ep.AllowPrivate); err != nil {
		return nil, err
	}
	if err := ep.Retry.check(); err != nil {
		return nil, err
	}
	if err := checkTools(&ep); err != nil {
		return nil, err
	}
	ep.Tools = maps.Clone(ep.Tools) // the names checked are the names sent
	o := opts.withDefaults()
	if o.MaxRedirects < 0 {
		return nil, fmt.Errorf("%w: max_redirects must not be negative", ErrConfig)
	}
	a := &Adapter{ep: ep, opts: o, tracer: o.TracerProvider.Tracer(tracerName), client: clientFor(o.HTTPClient, o.MaxRedirects, ep.AllowPrivate)}
	if o.MaxRedirects == 0 && a.client.Jar == nil && a.client.Timeout == 0 && o.HTTPClient.Transport == nil {
		// The client follows no redirect, keeps no cookie and sets no
		// deadline of its own, and its transport is the package's: Do
		// would only hand each request to the transport.
		a.direct = a.client.Transport
	}
	if u, err := url.Parse(ep.URL); err == nil {
		u.Host = removeEmptyPort(u.Host) // as http.NewRequest does
		a.url = u
	}
	if ep.Transport == TransportWebhook {
		a.pending = newPending()
	}
	return a, nil
}

// Capability returns the gateway capability settings the endpoint
// implies: its timeout, its retry policy's attempts and backoff, and that
// the adapter honours its context. Set ArgsSchema, Scopes and CostCents.
func (a *Adapter) Capability() gateway.Capability { return capabilityOf(&a.ep) }

// capabilityOf is the gateway capability ep implies: its timeout, its
// retry policy's attempts and backoff, and that its adapters honour their
// context. Every transport's adapter uses it.
func capabilityOf(ep *Endpoint) gateway.Capability {
	return gateway.Capability{Timeout: ep.Timeout, MaxAttempts: ep.Retry.attempts(), Backoff: ep.Retry.delay, HonorsContext: true}
}

// requestFor builds the contract request of one gateway attempt: the tool
// call id as request_id (the same on every attempt), the run id as
// task_id, the capability id as tool.name (or the endpoint's wire name for
// the capability, ToolInfo.Name), the arguments as input, the
// attempt, the idempotency key and the trace (ids on the wire, the whole
// W3C context in TraceContext). With ep.InputRaw the envelope transports
// (external, webhook, grpc) send the arguments as JSON text in input_raw
// instead. The gRPC and MCP transports use it too (transport/internal/kit).
func requestFor(call *gateway.Call, mode string, ep *Endpoint) *Request {
	req, _ := normalizedRequestFor(call, mode, ep)
	return req
}

// normalizedRequestFor is requestFor, and normalize's refusal of the
// request (nil when it normalised).
func normalizedRequestFor(call *gateway.Call, mode string, ep *Endpoint) (*Request, *gateway.ToolError) {
	env := call.Envelope
	parts := new(requestParts)
	req := &parts.req
	*req = Request{ToolContractVersion: ContractVersion, RequestID: env.ToolCallID, TaskID: env.RunID, Namespace: ep.Namespace, Agent: ep.Agent,
		Tool: Tool{Name: env.CapabilityID, Operation: defaultOperation}, Input: env.Args, Attempt: call.Attempt, IdempotencyKey: call.IdempotencyKey,
		Runtime: &parts.runtime}
	parts.runtime = RuntimeInfo{Mode: wireMode(mode), TimeoutMS: ep.Timeout.Milliseconds(), MaxAttempts: ep.Retry.attempts(), MaxBackoffMS: ep.Retry.MaxBackoff.Milliseconds(),
		Jitter: WireJitter(ep.Retry.Jitter == JitterFull || ep.Retry.Jitter == JitterEqual)}
	if ep.Retry.Backoff > 0 {
		req.Runtime.Backoff = "exponential"
	}
	if info, ok := ep.Tools[call.Capability]; ok {
		req.Tool.Capabilities, req.Tool.RiskLevel = info.Capabilities, info.RiskLevel
		if info.Name != "" {
			req.Tool.Name = info.Name
		}
	}
	if p := ep.Auth.profile(); p != "" {
		req.Auth = &AuthInfo{Profile: p, SecretRef: ep.Auth.SecretRef, Scopes: ep.Auth.Scopes}
	}
	if call.Trace.TraceID != "" || call.Trace.SpanID != "" {
		parts.trace = Trace{TraceID: call.Trace.TraceID, SpanID: call.Trace.SpanID}
		req.Trace = &parts.trace
	}
	req.TraceContext = call.Trace
	if req.Input == nil {
		req.Input = map[string]any{}
	}
	if ep.InputRaw && (mode == TransportExternal || mode == TransportWebhook || mode == TransportGRPC) {
		raw, err := appendValue(nil, req.Input, 0) // json.Marshal's bytes
		if err == nil {                            // else the exchange reports it
			req.Input, req.InputRaw = nil, string(raw)
		}
	}
	return req, normalize(req)
}

// requestParts is one allocation holding a request and the runtime and
// trace members requestFor points it at.
type requestParts struct {
	req     Request
	runtime RuntimeInfo
	trace   Trace
}

// Call implements gateway.Adapter.
func (a *Adapter) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	req, refused := normalizedRequestFor(call, a.ep.Transport, &a.ep)
	resp := a.execute(ctx, req, refused == nil)
	return outcome(ctx, call, req, resp)
}

// Executor executes contract requests; it never fails with a Go error
// (every failure is a response). Adapter implements it; the gRPC server
// helper serves one.
type Executor interface {
	Execute(ctx context.Context, req *Request) *Response
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, req *Request) *Response

// Execute implements Executor.
func (f ExecutorFunc) Execute(ctx context.Context, req *Request) *Response { return f(ctx, req) }

const tracerName = "github.com/contextos/contextos/transport"

// outcome turns the response of an attempt of call (req, made under ctx)
// into the gateway's outcome or error. A write's side effects are the
// response's mutations; a tool that names none (an Orloj tool cannot) is
// recorded as one effect of the capability (its id, whatever tool.name
// the wire carried) under the call's idempotency key. The error is the
// response's *gateway.ToolError; when the attempt timed out or was
// canceled because ctx ended, it also wraps ctx's cause, so
// errors.Is(err, context.Canceled) (or context.DeadlineExceeded) holds
// through the adapter while errors.As still finds the ToolError.
func outcome(ctx context.Context, call *gateway.Call, req *Request, resp *Response) (*gateway.Outcome, error) {
	if te := resp.err(); te != nil {
		return nil, withCause(ctx, te)
	}
	parts := &outcomeParts{out: gateway.Outcome{Output: resp.outputValue()}}
	if req.IdempotencyKey != "" {
		parts.mutation[0] = call.Envelope.CapabilityID + ":" + req.IdempotencyKey
		parts.out.Mutations = parts.mutation[:]
	}
	return &parts.out, nil
}

// outcomeParts is one allocation holding an outcome and its mutation.
type outcomeParts struct {
	out      gateway.Outcome
	mutation [1]string
}

// Execute makes one attempt of req and never returns a Go error: every
// failure is a response with status error or denied, the request id,
// trace and attempt echoed. A ctx without a deadline gets the endpoint's
// Timeout (gateway.DefaultTimeout when unset), so a tool that never
// finishes its reply cannot hold the caller.
func (a *Adapter) Execute(ctx context.Context, req *Request) *Response {
	return a.execute(ctx, req, false)
}

// execute is Execute; normalized says req was normalised without a
// refusal (normalize changes nothing in it and refuses nothing: the
// attempt need not run it again).
func (a *Adapter) execute(ctx context.Context, req *Request, normalized bool) *Response {
	if _, ok := ctx.Deadline(); !ok {
		// Called outside the gateway: a tool that never finishes its
		// reply (or a webhook that never answers) must not hold the
		// caller forever.
		d := a.ep.Timeout
		if d <= 0 {
			d = gateway.DefaultTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	return instrument(ctx, a.tracer, a.spanName(req.Tool.Name), a.opts.Logger, a.opts.Now, wireMode(a.ep.Transport), a.ep.Auth, req, normalized, func(ctx context.Context, caller w3ctrace.Caller) (*Response, *gateway.ToolError) {
		return a.attempt(ctx, req, &caller)
	})
}

// spanPrefix begins the name of every attempt's span; the tool's name
// follows it.
const spanPrefix = "tool_contract "

// maxSpanNames and maxSpanTool bound the span names an adapter remembers:
// those of its first maxSpanNames tools whose names are at most
// maxSpanTool bytes long.
const maxSpanNames, maxSpanTool = 64, 256

// spanName is spanPrefix + tool, the name of the span of an attempt of
// tool (req.Tool.Name as the attempt begins). The adapter remembers the
// names it built (see maxSpanNames), so an attempt does not build its
// span's name again.
func (a *Adapter) spanName(tool string) string {
	var known map[string]string
	p := a.spans.Load()
	if p != nil {
		known = *p
	}
	if name, ok := known[tool]; ok {
		return name
	}
	name := spanPrefix + tool
	if len(tool) <= maxSpanTool && len(known) < maxSpanNames {
		next := make(map[string]string, len(known)+1)
		maps.Copy(next, known)
		next[tool] = name
		a.spans.CompareAndSwap(p, &next) // losing a race forgets a name, never a wrong one
	}
	return name
}

// attempt makes the HTTP exchange. A 401 to a cached OAuth2 token means
// the token expired early (auth_expired): it is evicted and the exchange
// made once more with a fresh token, whose refusal is final
// (auth_invalid).
func (a *Adapter) attempt(ctx context.Context, req *Request, caller *w3ctrace.Caller) (*Response, *gateway.ToolError) {
	resp, st, te := a.exchange(ctx, req, caller)
	if !expired(st, te) {
		return resp, te
	}
	a.opts.Tokens.evict(st.tokenURL, st.clientID, st.scopes)
	if ctx.Err() != nil {
		return nil, authExpired(req)
	}
	resp, _, te = a.exchange(ctx, req, caller)
	return resp, te
}

// expired reports a 401 to a cached OAuth2 token.
func expired(st authState, te *gateway.ToolError) bool {
	return te != nil && te.Code == gateway.CodeAuthInvalid && st.profile == ProfileOAuth2ClientCreds && st.cached
}

func authExpired(req *Request) *gateway.ToolError {
	return newError(gateway.CodeAuthExpired, true, "the cached OAuth2 token was refused and there was no time left to retry with a fresh one", map[string]any{"tool": req.Tool.Name})
}

// exchange is one HTTP round trip (for webhook, the submit and the wait);
// caller is the caller's trace context of req, parsed.
func (a *Adapter) exchange(ctx context.Context, req *Request, caller *w3ctrace.Caller) (*Response, authState, *gateway.ToolError) {
	// The details of this exchange's errors, built only for an error.
	details := func() map[string]any { return a.callDetails(req) }
	var body []byte
	var err error
	if a.ep.Transport == TransportHTTP {
		body, err = rawInput(req)
	} else {
		body, err = marshalRequest(req) // json.Marshal's bytes
	}
	if err != nil {
		return nil, authState{}, newError(gateway.CodeInvalidInput, false, "the input has no JSON form", details())
	}
	var wait chan *Response
	if a.pending != nil {
		details := details()
		wait = a.pending.add(req.RequestID)
		defer a.pending.remove(req.RequestID, wait)
		if a.pending.wasAccepted(req.RequestID) {
			// An earlier attempt submitted this request and the tool
			// accepted it: this attempt waits for that job, it never
			// submits the request again.
			st, te := applyAuth(ctx, a.ep.Auth, a.opts.Secrets, a.opts.Tokens, a.ep.AllowPrivate, http.Header{})
			if te != nil {
				return nil, st, te
			}
			r, te := a.awaitWebhook(ctx, req, wait, details)
			return r, st, te
		}
		if a.pending.full() {
			// Every remembered job is still outstanding: forgetting one
			// could submit it twice, so no new job is submitted until one
			// finishes.
			return nil, authState{}, newError(gateway.CodeExecutionFailed, true, "too many webhook jobs are outstanding on this endpoint; none is submitted until one finishes", details)
		}
	}
	hreq, err := a.newPost(ctx, body)
	if err != nil {
		return nil, authState{}, newError(gateway.CodeRuntimePolicyInvalid, false, "the endpoint URL is invalid", details())
	}
	setPostHeaders(ctx, hreq.Header, req, caller, a.ep.Transport != TransportHTTP)
	st, te := applyAuth(ctx, a.ep.Auth, a.opts.Secrets, a.opts.Tokens, a.ep.AllowPrivate, hreq.Header)
	if te != nil {
		return nil, st, te
	}
	status, rbody, te := a.do(ctx, hreq, details)
	if te != nil {
		return nil, st, te
	}
	switch a.ep.Transport {
	case TransportHTTP:
		r, te := httpReply(req, rbody)
		return r, st, te
	case TransportExternal:
		r, te := contractReply(rbody, details)
		return r, st, te
	}
	if status == http.StatusOK && !pendingBody(rbody) {
		r, te := contractReply(rbody, details)
		return r, st, te
	}
	// Accepted (202, another 2xx, or a 200 whose body says the job is
	// still running): from here on the request is never submitted again.
	a.pending.accept(req.RequestID)
	r, te := a.awaitWebhook(ctx, req, wait, details())
	return r, st, te
}

// newPost is http.NewRequestWithContext(ctx, POST, a.ep.URL,
// bytes.NewReader(body)) without parsing the URL again: the request
// NewRequestWithContext makes, field for field (its body the same
// in-memory reader, which net/http looks through, and GetBody giving the
// whole body each time), holding a copy of the URL parsed when the
// adapter was built, in one allocation with the body's reader
// (TestNewPostIsNewRequest).
func (a *Adapter) newPost(ctx context.Context, body []byte) (*http.Request, error) {
	if a.url == nil {
		return http.NewRequestWithContext(ctx, http.MethodPost, a.ep.URL, bytes.NewReader(body))
	}
	p := &postParts{url: *a.url} // the request's own URL: nothing else holds it
	p.body.Reset(body)
	r := http.Request{Method: http.MethodPost, URL: &p.url, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: make(http.Header),
		Body: io.NopCloser(&p.body), ContentLength: int64(len(body)), Host: p.url.Host,
		GetBody: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }}
	if len(body) == 0 {
		r.Body, r.GetBody = http.NoBody, noBody
	}
	return r.WithContext(ctx), nil // the request with its context, as NewRequestWithContext's
}

// postParts is one allocation holding a POST's URL and body reader.
type postParts struct {
	url  url.URL
	body bytes.Reader
}

// noBody is the GetBody of a request without a body.
func noBody() (io.ReadCloser, error) { return http.NoBody, nil }

// removeEmptyPort strips an empty port ("host:") as http.NewRequest does.
func removeEmptyPort(host string) string {
	if strings.LastIndex(host, ":") > strings.LastIndex(host, "]") {
		return strings.TrimSuffix(host, ":")
	}
	return host
}

// callDetails is the details an exchange's error carries: the tool, and
// for the envelope transports the isolation mode.
func (a *Adapter) callDetails(req *Request) map[string]any {
	details := map[string]any{"tool": req.Tool.Name}
	if a.ep.Transport != TransportHTTP {
		details["isolation_mode"] = wireMode(a.ep.Transport)
	}
	return details
}

// awaitWebhook waits for an accepted job, and forgets it once the tool
// gave its terminal response (ok, error or denied). After anything else —
// a timeout, a cancellation, a poll the tool refused (a 401 retried with a
// fresh OAuth2 token included) — the job stays accepted, so a later
// attempt polls it instead of submitting it again.
func (a *Adapter) awaitWebhook(ctx context.Context, req *Request, wait chan *Response, details map[string]any) (*Response, *gateway.ToolError) {
	r, te := a.waitWebhook(ctx, req, wait, details)
	if te == nil {
		a.pending.forget(req.RequestID)
	}
	return r, te
}

// do sends hreq and reads the reply, at most 4 MiB. HTTP errors are
// mapped; a redirect that is not followed or is refused, and an address
// the dialer refused, are non-retryable errors; an error body loses the
// secrets the attempt resolved before it is clipped into the message.
func (a *Adapter) do(ctx context.Context, hreq *http.Request, details func() map[string]any) (int, []byte, *gateway.ToolError) {
	hres, err := a.send(hreq)
	if err != nil {
		if te := refusal(err, details()); te != nil {
			return 0, nil, te
		}
		return 0, nil, transportError(ctx, err, details())
	}
	defer hres.Body.Close()
	rbody, err := readBody(hres.Body, hres.ContentLength)
	if err != nil {
		return 0, nil, transportError(ctx, err, details())
	}
	if len(rbody) > maxBody {
		return 0, nil, newError(gateway.CodeExecutionFailed, false, "the tool reply is larger than 4 MiB", details())
	}
	switch {
	case hres.StatusCode >= 400:
		return 0, nil, httpStatusError(hres.StatusCode, scrubBody(ctx, rbody), details())
	case hres.StatusCode >= 300:
		return 0, nil, redirectStatus(hres.StatusCode, details())
	}
	return hres.StatusCode, rbody, nil
}

// readBody is io.ReadAll(io.LimitReader(body, maxBody+1)), the same bytes
// and error, into a first buffer the size of the reply's announced
// length (when it has one within the bound) rather than io.ReadAll's
// 512 bytes.
func readBody(body io.Reader, length int64) ([]byte, error) {
	lr := io.LimitedReader{R: body, N: maxBody + 1}
	size := int64(512)
	if length >= 0 && length <= maxBody {
		size = length + 1 // room for the read that sees the end
	}
	b := make([]byte, 0, size)
	for {
		n, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow as io.ReadAll does
		}
	}
}

// send sends hreq with a.client.Do: through the client, or straight to
// its transport when that is all Do would do (a.direct; see NewAdapter),
// which spares the copy of every header Do makes for redirects. A
// redirect is then handled as Do handles it when CheckRedirect follows
// none: the response is returned, unless its Location does not parse
// (TestSendIsClientDo).
func (a *Adapter) send(hreq *http.Request) (*http.Response, error) {
	if a.direct == nil {
		return a.client.Do(hreq)
	}
	hres, err := a.direct.RoundTrip(hreq)
	if err != nil {
		return nil, err
	}
	switch hres.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		if loc := hres.Header.Get("Location"); loc != "" {
			if _, err := hreq.URL.Parse(loc); err != nil {
				hres.Body.Close()
				return nil, fmt.Errorf("failed to parse Location header: %w", err)
			}
		}
	}
	return hres, nil
}

// setCallHeaders carries the call's identity and trace context on every
// attempt.
func setCallHeaders(ctx context.Context, h http.Header, req *Request) {
	h.Set("X-Request-Id", req.RequestID)
	h.Set("X-Tool-Name", req.Tool.Name)
	h.Set("X-Tool-Attempt", strconv.Itoa(req.Attempt))
	if req.IdempotencyKey != "" {
		h.Set("Idempotency-Key", req.IdempotencyKey)
	}
	traceHeaders(ctx, req, h.Set)
}

// setPostHeaders sets the headers of a request's POST: the content type,
// Accept, the call headers (setCallHeaders) and, for the envelope
// transports, X-Tool-Contract-Version. The same headers as h.Set of each,
// set directly under their canonical names, their values in one slice
// (room for a traceparent; a tracestate or baggage grows it). caller is
// the caller's trace context of req (callerTrace), parsed.
//
// They are set in the byte order of their names (a baggage header, rare,
// excepted): net/http writes a request's headers sorted by name, and a
// map of up to eight headers gives them back in the order they were set,
// rotated at a random point, which its insertion sort puts in order with
// fewer comparisons and moves than a random order (about 350 instructions
// a call for these eight).
func setPostHeaders(ctx context.Context, h http.Header, req *Request, caller *w3ctrace.Caller, envelope bool) {
	n := 6 // Content-Type, Accept, X-Request-Id, X-Tool-Name, X-Tool-Attempt, traceparent
	if req.IdempotencyKey != "" {
		n++
	}
	if envelope {
		n++
	}
	vals := make([]string, 0, n)
	set := func(key, value string) {
		vals = append(vals, value)
		h[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	set("Accept", "application/json")
	set("Content-Type", "application/json")
	if req.IdempotencyKey != "" {
		set("Idempotency-Key", req.IdempotencyKey)
	}
	caller.InjectOutbound(ctx, func(key, value string) {
		switch key {
		case w3ctrace.HeaderTraceparent:
			set("Traceparent", value)
		case w3ctrace.HeaderTracestate:
			set("Tracestate", value)
		case w3ctrace.HeaderBaggage:
			set("Baggage", value)
		default:
			h.Set(key, value)
		}
	})
	set("X-Request-Id", req.RequestID)
	set("X-Tool-Attempt", strconv.Itoa(req.Attempt))
	if envelope {
		set(headerContractVersion, ContractVersion)
	}
	set("X-Tool-Name", req.Tool.Name)
}

// traceHeaders writes, through set, the W3C trace context one attempt of
// req made under ctx carries to its tool: traceparent, tracestate and
// baggage as the runtime's outbound trace context gives them — the current span of
// ctx (the attempt's) as the parent with its sampled flag, or, with no
// active span, the caller's trace context with the caller's flags;
// tracestate and baggage forwarded. The caller's trace context is
// req.TraceContext, or, for a request built without one, the ids of
// req.Trace (flags unknown: not sampled). Keys are lower-case
// ("traceparent", "tracestate", "baggage"), as gRPC metadata and MCP _meta
// want them; http.Header.Set canonicalises them. Nothing is written for
// ids that are not W3C ids, so a caller's text never reaches a header.
func traceHeaders(ctx context.Context, req *Request, set func(key, value string)) {
	caller := w3ctrace.Parse(callerTrace(req))
	caller.InjectOutbound(ctx, set)
}

// callerTrace is the caller's trace context of req: req.TraceContext, or,
// for a request built without one, the ids of req.Trace (flags unknown).
func callerTrace(req *Request) runcontext.Trace {
	t := req.TraceContext
	if t.TraceID == "" && req.Trace != nil {
		t = runcontext.Trace{TraceID: req.Trace.TraceID, SpanID: req.Trace.SpanID}
	}
	return t
}

// httpReply reads an http tool's reply: a contract response (a JSON
// object with a status), any other JSON object as the output, or other
// text as {"result": text}. A contract response of another major version
// is refused (invalid_input), never taken for output.
func httpReply(req *Request, body []byte) (*Response, *gateway.ToolError) {
	r, err := DecodeResponse(body)
	if err == nil {
		return r, nil
	}
	if errors.Is(err, ErrContractVersion) {
		return nil, versionRefusal(body, map[string]any{"tool": req.Tool.Name})
	}
	var obj map[string]any
	if err := decodeObject(body, &obj); err == nil {
		if err := foldedTwice(body); err != nil && hasStatus(obj) {
			// A contract response that names a member twice (DecodeResponse
			// refused it) is refused, not passed on as output: its status
			// may be error or denied.
			return nil, newError(gateway.CodeExecutionFailed, false, "invalid tool reply: "+strictProblem(err), map[string]any{"field": "(reply)"})
		}
		return &Response{Status: StatusOK, Output: obj}, nil
	} else if errors.Is(err, wire.ErrStrict) {
		// A JSON object with a duplicated member or invalid UTF-8 is
		// refused, not passed on as text: which of two values a tool meant
		// cannot be known.
		return nil, newError(gateway.CodeExecutionFailed, false, "invalid tool reply: "+strictProblem(err), map[string]any{"field": "(reply)"})
	}
	return &Response{Status: StatusOK, Output: map[string]any{"result": strings.TrimSpace(string(body))}}, nil
}

// hasStatus reports whether obj has a status member under any spelling
// encoding/json reads as one (see foldedTwice).
func hasStatus(obj map[string]any) bool {
	for name := range obj {
		if strings.EqualFold(name, "status") {
			return true
		}
	}
	return false
}

// contractReply requires a contract response. One of another major
// version is a non-retryable invalid_input: asking again gets the same.
func contractReply(body []byte, details func() map[string]any) (*Response, *gateway.ToolError) {
	r, err := DecodeResponse(body)
	if errors.Is(err, ErrContractVersion) {
		return nil, versionRefusal(body, details())
	}
	if err != nil {
		return nil, newError(gateway.CodeExecutionFailed, true, "invalid contract response: "+strings.TrimPrefix(err.Error(), ErrContract.Error()+": "), details())
	}
	return r, nil
}

// versionRefusal is the error for a reply of another major
// tool_contract_version (body holds one, DecodeResponse said so).
func versionRefusal(body []byte, details map[string]any) *gateway.ToolError {
	var probe struct {
		V string `json:"tool_contract_version"`
	}
	_ = json.Unmarshal(body, &probe)
	return responseVersion(probe.V, details)
}

// responseVersion refuses a response's unknown major version: the tool
// speaks another contract, so nothing it said can be read as v1.
func responseVersion(v string, details map[string]any) *gateway.ToolError {
	te := checkVersion(v)
	if te == nil {
		return nil
	}
	te.Message = fmt.Sprintf("the tool answered with unsupported tool_contract_version %q", clip(v))
	for k, v := range details {
		if _, ok := te.Details[k]; !ok {
			te.Details[k] = v
		}
	}
	return te
}

// instrument runs one attempt with its span and log line: a cancelled
// context or a request that does not normalise is refused before f runs;
// a reply whose request_id is not the call's is refused; every secret
// value the attempt resolved is scrubbed from the response (output,
// error, trace) before anything reads it; and the response is completed
// (version, request id, trace, attempt, duration). spanName names the
// span: spanPrefix and req.Tool.Name as given. f gets the caller's trace
// context of req (callerTrace), parsed once for the attempt: its remote
// parent here, the headers f writes (traceHeaders) there.
func instrument(ctx context.Context, tracer trace.Tracer, spanName string, log *slog.Logger, now func() time.Time, mode string, auth *Auth, req *Request, normalized bool, f func(context.Context, w3ctrace.Caller) (*Response, *gateway.ToolError)) *Response {
	start := now()
	caller := w3ctrace.Parse(callerTrace(req))
	// With no span of the host's in ctx, the attempt span joins the
	// caller's trace rather than starting one of its own.
	ctx = caller.ContextWithParent(ctx)
	ctx, span := tracer.Start(ctx, spanName, clientSpan...)
	defer span.End()
	var secrets *scrub.Set
	if auth.profile() != "" {
		// applyAuth records every value it resolves for this attempt here.
		ctx, secrets = scrub.With(ctx)
	}
	var resp *Response
	var te *gateway.ToolError
	if err := ctx.Err(); err != nil {
		te = transportError(ctx, err, map[string]any{"tool": req.Tool.Name})
	} else if !normalized {
		te = normalize(req)
	}
	if te == nil { // the context was live and the request normalised
		resp, te = f(ctx, caller)
		if te == nil && resp == nil {
			te = newError(gateway.CodeExecutionFailed, false, "the tool returned no response", map[string]any{"tool": req.Tool.Name})
		}
		if te == nil && checkVersion(resp.ToolContractVersion) != nil {
			te = responseVersion(resp.ToolContractVersion, map[string]any{"tool": req.Tool.Name})
		}
		if te == nil && resp.RequestID != "" && resp.RequestID != req.RequestID && strings.TrimSpace(resp.RequestID) != req.RequestID {
			te = wrongRequestID(req)
		}
	}
	if te != nil {
		resp = responseFor(te)
	}
	if !secrets.Empty() {
		scrubResponse(secrets, resp)
	}
	resp.complete(req)
	dur := now().Sub(start)
	if resp.Usage.DurationMS <= 0 || resp.Error != nil {
		resp.Usage.DurationMS = dur.Milliseconds()
	}
	var e *gateway.ToolError
	if resp.Error != nil {
		// The canonical code and reason (resp.err also notes an unknown
		// code or reason of the tool's in the details, as it always has).
		e = resp.err()
	}
	// Attributes are built only for a span that records them and a log
	// that writes the line.
	if span.IsRecording() {
		span.SetAttributes(attemptAttrs(req, resp, mode, auth, dur, e)...)
		if e != nil {
			span.SetStatus(codes.Error, e.Code)
		}
	}
	if log.Enabled(ctx, slog.LevelInfo) {
		log.LogAttrs(ctx, slog.LevelInfo, "tool attempt", attemptLogAttrs(req, resp, mode, auth, dur, e)...)
	}
	return resp
}

// clientSpan is the option every attempt's span starts with.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// attemptAttrs are the attributes of an attempt's span: the contract
// version, request id, tool, transport, attempt, status and duration, the
// trace id, the auth profile and secret name (never its value), and, for
// a failure e, the canonical code and reason (never the tool's own text).
func attemptAttrs(req *Request, resp *Response, mode string, auth *Auth, dur time.Duration, e *gateway.ToolError) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("tool.contract_version", ContractVersion), attribute.String("tool.request_id", req.RequestID),
		attribute.String("tool.name", req.Tool.Name), attribute.String("tool.transport", mode), attribute.Int("tool.attempt", resp.Usage.Attempt),
		attribute.String("tool.status", resp.Status), attribute.Int64("tool.duration_ms", dur.Milliseconds()),
	}
	if req.Trace != nil {
		attrs = append(attrs, attribute.String("tool.trace_id", req.Trace.TraceID))
	}
	if p := auth.profile(); p != "" {
		attrs = append(attrs, attribute.String("tool.auth_profile", p), attribute.String("tool.auth_secret_ref", auth.SecretRef))
	}
	if e != nil {
		attrs = append(attrs, attribute.String("tool.code", e.Code), attribute.String("tool.reason", e.Reason), attribute.Bool("tool.retryable", e.Retryable))
	}
	return attrs
}

// attemptLogAttrs are the attributes of an attempt's log line: those of
// its span (attemptAttrs) under the log's names.
func attemptLogAttrs(req *Request, resp *Response, mode string, auth *Auth, dur time.Duration, e *gateway.ToolError) []slog.Attr {
	attrs := []slog.Attr{slog.String("tool_contract", ContractVersion), slog.String("tool_request_id", req.RequestID), slog.String("tool", req.Tool.Name),
		slog.String("transport", mode), slog.Int("tool_attempt", resp.Usage.Attempt), slog.String("status", resp.Status), slog.Int64("duration_ms", dur.Milliseconds())}
	if req.Trace != nil {
		attrs = append(attrs, slog.String("trace_id", req.Trace.TraceID))
	}
	if p := auth.profile(); p != "" {
		// The profile and the secret's name only, never its value.
		attrs = append(attrs, slog.String("tool_auth_profile", p), slog.String("tool_auth_secret_ref", auth.SecretRef))
	}
	if e != nil {
		// The canonical code and reason, never the tool's own text.
		attrs = append(attrs, slog.String("tool_code", e.Code), slog.String("tool_reason", e.Reason), slog.Bool("retryable", e.Retryable))
	}
	return attrs
}

// wrongRequestID refuses a reply to another call: the contract's
// response echoes the request's request_id. A reply without one is
// accepted and given the call's (seed 004 lists request_id among the
// request's required fields, not the response's, and Orloj's conformance
// checks the echo only when it is set).
func wrongRequestID(req *Request) *gateway.ToolError {
	return newError(gateway.CodeExecutionFailed, false, "invalid contract response: its request_id is not the call's",
		map[string]any{"tool": req.Tool.Name, "field": "request_id", "request_id": req.RequestID})
}

// scrubResponse replaces the attempt's secrets everywhere a response can
// carry text: the output (strings, numbers, map keys), the error's code,
// reason, message and details, and the trace ids.
func scrubResponse(s *scrub.Set, r *Response) {
	r.Output = s.Map(r.Output)
	if e := r.Error; e != nil {
		e.Code, e.Reason, e.Message = s.String(e.Code), s.String(e.Reason), s.String(e.Message)
		e.Details = s.Map(e.Details)
	}
	if r.Trace != nil {
		r.Trace.TraceID, r.Trace.SpanID = s.String(r.Trace.TraceID), s.String(r.Trace.SpanID)
	}
}

// scrubBody is an error body without the secrets this attempt resolved,
// ready to be clipped (a secret cut in half by the clip would no longer
// match). A JSON body is decoded, scrubbed value by value and re-encoded,
// so JSON escapes (\u0073k-…) do not hide a secret.
func scrubBody(ctx context.Context, body []byte) []byte {
	s := scrub.From(ctx)
	if s.Empty() {
		return body
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // a numeric secret keeps every digit
	if dec.Decode(&v) == nil && !dec.More() {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if enc.Encode(s.Value(v)) == nil {
			return bytes.TrimSpace(b.Bytes())
		}
	}
	return []byte(s.String(string(body)))
}
