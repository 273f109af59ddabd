package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/wire"
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

// Endpoint is where and how an adapter reaches its tools.
type Endpoint struct {
	// Transport is http, external or webhook here (grpc and mcp have
	// their own packages).
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
	// Tools declares each capability's labels and risk level, sent as
	// tool.capabilities and tool.risk_level (keyed by capability name).
	Tools map[string]ToolInfo `json:"tools,omitempty"`
}

// ToolInfo is a capability's contract labels.
type ToolInfo struct {
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
	// Tokens caches OAuth2 tokens. Default: DefaultTokenCache.
	Tokens *TokenCache
	// TracerProvider makes one span per attempt. Default: the global one.
	TracerProvider trace.TracerProvider
	// Logger logs one line per attempt (never inputs, outputs or
	// secrets). Default: discard.
	Logger *slog.Logger
	// Now is the clock for durations. Default: time.Now.
	Now func() time.Time
}

// WithDefaults returns the options with every unset field defaulted.
// Transports build it once, when they are built, not per call.
func (o *Options) WithDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.HTTPClient == nil {
		out.HTTPClient = &http.Client{}
	}
	if out.Tokens == nil {
		out.Tokens = DefaultTokenCache
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
	client  *http.Client // opts.HTTPClient with the redirect and dial rules
	tracer  trace.Tracer
	pending *pending // webhook calls waiting for a result
}

var _ gateway.Adapter = (*Adapter)(nil)

// NewAdapter checks ep and returns its adapter (ErrConfig when ep cannot
// work).
func NewAdapter(ep Endpoint, opts *Options) (*Adapter, error) {
	switch ep.Transport {
	case TransportHTTP, TransportExternal, TransportWebhook:
	case TransportGRPC, TransportMCP:
		return nil, fmt.Errorf("%w: transport %s has its own package (transport/grpctransport, transport/mcptransport)", ErrConfig, ep.Transport)
	default:
		return nil, fmt.Errorf("%w: transport %q is not http, external or webhook", ErrConfig, clip(ep.Transport))
	}
	if _, err := CheckEndpoint(ep.URL, ep.AllowPrivate); err != nil {
		return nil, err
	}
	if err := ep.Auth.Check(ep.AllowPrivate); err != nil {
		return nil, err
	}
	if err := ep.Retry.Check(); err != nil {
		return nil, err
	}
	o := opts.WithDefaults()
	if o.MaxRedirects < 0 {
		return nil, fmt.Errorf("%w: max_redirects must not be negative", ErrConfig)
	}
	a := &Adapter{ep: ep, opts: o, tracer: o.TracerProvider.Tracer(tracerName), client: clientFor(o.HTTPClient, o.MaxRedirects, ep.AllowPrivate)}
	if ep.Transport == TransportWebhook {
		a.pending = newPending()
	}
	return a, nil
}

// Capability returns the gateway capability settings the endpoint
// implies: its timeout, its retry policy's attempts and backoff, and that
// the adapter honours its context. Set ArgsSchema, Scopes and CostCents.
func (a *Adapter) Capability() gateway.Capability { return a.ep.Capability() }

// Capability is the gateway capability the endpoint implies: its timeout,
// its retry policy's attempts and backoff, and that its adapters honour
// their context. Every transport's adapter uses it.
func (ep *Endpoint) Capability() gateway.Capability {
	return gateway.Capability{Timeout: ep.Timeout, MaxAttempts: ep.Retry.Attempts(), Backoff: ep.Retry.Delay, HonorsContext: true}
}

// RequestFor builds the contract request of one gateway attempt: the tool
// call id as request_id (the same on every attempt), the run id as
// task_id, the capability id as tool.name, the arguments as input, the
// attempt, the idempotency key and the trace. Exported for the gRPC and
// MCP transports.
func RequestFor(call *gateway.Call, mode string, ep *Endpoint) *Request {
	env := call.Envelope
	req := &Request{ToolContractVersion: ContractVersion, RequestID: env.ToolCallID, TaskID: env.RunID, Namespace: ep.Namespace, Agent: ep.Agent,
		Tool: Tool{Name: env.CapabilityID, Operation: DefaultOperation}, Input: env.Args, Attempt: call.Attempt, IdempotencyKey: call.IdempotencyKey,
		Runtime: &RuntimeInfo{Mode: mode, TimeoutMS: ep.Timeout.Milliseconds(), MaxAttempts: ep.Retry.Attempts(), MaxBackoffMS: ep.Retry.MaxBackoff.Milliseconds(),
			Jitter: WireJitter(ep.Retry.Jitter == JitterFull || ep.Retry.Jitter == JitterEqual)}}
	if ep.Retry.Backoff > 0 {
		req.Runtime.Backoff = "exponential"
	}
	if info, ok := ep.Tools[call.Capability]; ok {
		req.Tool.Capabilities, req.Tool.RiskLevel = info.Capabilities, info.RiskLevel
	}
	if p := ep.Auth.profile(); p != "" {
		req.Auth = &AuthInfo{Profile: p, SecretRef: ep.Auth.SecretRef, Scopes: ep.Auth.Scopes}
	}
	if call.Trace.TraceID != "" || call.Trace.SpanID != "" {
		req.Trace = &Trace{TraceID: call.Trace.TraceID, SpanID: call.Trace.SpanID}
	}
	if req.Input == nil {
		req.Input = map[string]any{}
	}
	_ = Normalize(req)
	return req
}

// Call implements gateway.Adapter.
func (a *Adapter) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	req := RequestFor(call, a.ep.Transport, &a.ep)
	resp := a.Execute(ctx, req)
	return Outcome(req, resp)
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

// RunAttempt runs one attempt f of req the way every transport does: a
// span and a log line with the contract fields, a cancelled context
// refused before f runs, and the response completed (version, request id,
// attempt, duration, trace). For transports in other packages.
func RunAttempt(ctx context.Context, opts *Options, mode string, auth *Auth, req *Request, f func(ctx context.Context) (*Response, *gateway.ToolError)) *Response {
	o := opts.WithDefaults()
	return instrument(ctx, o.TracerProvider.Tracer(tracerName), o.Logger, o.Now, mode, auth, req, f)
}

const tracerName = "github.com/contextos/contextos/transport"

// AuthState is what applying auth used: enough to evict an OAuth2 token
// that the tool refused.
type AuthState struct{ st authState }

// Expired reports whether a failure is a refused cached OAuth2 token; if
// so it evicts the token, and the caller retries once with a fresh one
// (AuthExpired when it cannot).
func (s AuthState) Expired(te *gateway.ToolError, opts *Options) bool {
	if !expired(s.st, te) {
		return false
	}
	o := opts.WithDefaults()
	o.Tokens.Evict(s.st.tokenURL, s.st.clientID)
	return true
}

// AuthExpired is the retryable auth_expired error for req.
func AuthExpired(req *Request) *gateway.ToolError { return authExpired(req) }

// AuthHeaders resolves ep.Auth's secrets (fresh on every call) into the
// headers of one attempt (an OAuth2 token_url is reached under
// ep.AllowPrivate). Called with the context RunAttempt gives its
// function, the values are scrubbed from that attempt's response. For
// transports in other packages (gRPC sends them as metadata).
func AuthHeaders(ctx context.Context, ep *Endpoint, opts *Options) (http.Header, AuthState, *gateway.ToolError) {
	o := opts.WithDefaults()
	h := http.Header{}
	st, te := applyAuth(ctx, ep.Auth, o.Secrets, o.Tokens, ep.AllowPrivate, h)
	return h, AuthState{st}, te
}

// TransportError maps an error from making a call (context deadline:
// timeout, cancellation: canceled, else a retryable execution failure).
func TransportError(ctx context.Context, err error, details map[string]any) *gateway.ToolError {
	return transportError(ctx, err, details)
}

// Outcome turns a response into the gateway's outcome or ToolError. A
// write's side effects are the response's mutations; a tool that names
// none (an Orloj tool cannot) is recorded as one effect under the call's
// idempotency key.
func Outcome(req *Request, resp *Response) (*gateway.Outcome, error) {
	if te := resp.Err(); te != nil {
		return nil, te
	}
	out := &gateway.Outcome{Output: resp.OutputValue()}
	if req.IdempotencyKey != "" {
		out.Mutations = []string{req.Tool.Name + ":" + req.IdempotencyKey}
	}
	return out, nil
}

// Execute makes one attempt of req and never returns a Go error: every
// failure is a response with status error or denied, the request id,
// trace and attempt echoed. A ctx without a deadline gets the endpoint's
// Timeout (gateway.DefaultTimeout when unset), so a tool that never
// finishes its reply cannot hold the caller.
func (a *Adapter) Execute(ctx context.Context, req *Request) *Response {
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
	return instrument(ctx, a.tracer, a.opts.Logger, a.opts.Now, a.ep.Transport, a.ep.Auth, req, func(ctx context.Context) (*Response, *gateway.ToolError) {
		return a.attempt(ctx, req)
	})
}

// attempt makes the HTTP exchange. A 401 to a cached OAuth2 token means
// the token expired early (auth_expired): it is evicted and the exchange
// made once more with a fresh token, whose refusal is final
// (auth_invalid).
func (a *Adapter) attempt(ctx context.Context, req *Request) (*Response, *gateway.ToolError) {
	resp, st, te := a.exchange(ctx, req)
	if !expired(st, te) {
		return resp, te
	}
	a.opts.Tokens.Evict(st.tokenURL, st.clientID)
	if ctx.Err() != nil {
		return nil, authExpired(req)
	}
	resp, _, te = a.exchange(ctx, req)
	return resp, te
}

// expired reports a 401 to a cached OAuth2 token.
func expired(st authState, te *gateway.ToolError) bool {
	return te != nil && te.Code == gateway.CodeAuthInvalid && st.profile == ProfileOAuth2ClientCreds && st.cached
}

func authExpired(req *Request) *gateway.ToolError {
	return newError(gateway.CodeAuthExpired, true, "the cached OAuth2 token was refused and there was no time left to retry with a fresh one", map[string]any{"tool": req.Tool.Name})
}

// exchange is one HTTP round trip (for webhook, the submit and the wait).
func (a *Adapter) exchange(ctx context.Context, req *Request) (*Response, authState, *gateway.ToolError) {
	details := map[string]any{"tool": req.Tool.Name}
	if a.ep.Transport != TransportHTTP {
		details["isolation_mode"] = a.ep.Transport
	}
	var body []byte
	var err error
	if a.ep.Transport == TransportHTTP {
		body, err = rawInput(req)
	} else {
		body, err = json.Marshal(req)
	}
	if err != nil {
		return nil, authState{}, newError(gateway.CodeInvalidInput, false, "the input has no JSON form", details)
	}
	var wait chan *Response
	if a.pending != nil {
		wait = a.pending.add(req.RequestID)
		defer a.pending.remove(req.RequestID, wait)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, a.ep.URL, bytes.NewReader(body))
	if err != nil {
		return nil, authState{}, newError(gateway.CodeRuntimePolicyInvalid, false, "the endpoint URL is invalid", details)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	setCallHeaders(hreq.Header, req)
	if a.ep.Transport != TransportHTTP {
		hreq.Header.Set(HeaderContractVersion, ContractVersion)
	}
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
	if status == http.StatusOK {
		r, te := contractReply(rbody, details)
		return r, st, te
	}
	r, te := a.waitWebhook(ctx, req, wait, details)
	return r, st, te
}

// do sends hreq and reads the reply, at most 4 MiB. HTTP errors are
// mapped; a redirect that is not followed or is refused, and an address
// the dialer refused, are non-retryable errors; an error body loses the
// secrets the attempt resolved before it is clipped into the message.
func (a *Adapter) do(ctx context.Context, hreq *http.Request, details map[string]any) (int, []byte, *gateway.ToolError) {
	hres, err := a.client.Do(hreq)
	if err != nil {
		if te := refusal(err, details); te != nil {
			return 0, nil, te
		}
		return 0, nil, transportError(ctx, err, details)
	}
	defer hres.Body.Close()
	rbody, err := io.ReadAll(io.LimitReader(hres.Body, maxBody+1))
	if err != nil {
		return 0, nil, transportError(ctx, err, details)
	}
	if len(rbody) > maxBody {
		return 0, nil, newError(gateway.CodeExecutionFailed, false, "the tool reply is larger than 4 MiB", details)
	}
	switch {
	case hres.StatusCode >= 400:
		return 0, nil, HTTPStatusError(hres.StatusCode, scrubBody(ctx, rbody), details)
	case hres.StatusCode >= 300:
		return 0, nil, redirectStatus(hres.StatusCode, details)
	}
	return hres.StatusCode, rbody, nil
}

// setCallHeaders carries the call's identity on every attempt.
func setCallHeaders(h http.Header, req *Request) {
	h.Set("X-Request-Id", req.RequestID)
	h.Set("X-Tool-Name", req.Tool.Name)
	h.Set("X-Tool-Attempt", fmt.Sprint(req.Attempt))
	if req.IdempotencyKey != "" {
		h.Set("Idempotency-Key", req.IdempotencyKey)
	}
	if tp := Traceparent(req.Trace); tp != "" {
		h.Set("Traceparent", tp)
	}
}

// Traceparent is the W3C traceparent of t ("" unless its trace id is 32
// and its span id 16 lowercase hex digits, not all zero: a caller's trace
// never puts other text in a header or metadata).
func Traceparent(t *Trace) string {
	if t == nil || !hexID(t.TraceID, 32) || !hexID(t.SpanID, 16) {
		return ""
	}
	return "00-" + t.TraceID + "-" + t.SpanID + "-01"
}

func hexID(s string, n int) bool {
	if len(s) != n || strings.Trim(s, "0") == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// httpReply reads an http tool's reply: a contract response (a JSON
// object with a status), any other JSON object as the output, or other
// text as {"result": text}.
func httpReply(req *Request, body []byte) (*Response, *gateway.ToolError) {
	if r, err := DecodeResponse(body); err == nil {
		return r, nil
	}
	var obj map[string]any
	if err := decodeObject(body, &obj); err == nil {
		return &Response{Status: StatusOK, Output: obj}, nil
	} else if errors.Is(err, wire.ErrStrict) {
		// A JSON object with a duplicated member or invalid UTF-8 is
		// refused, not passed on as text: which of two values a tool meant
		// cannot be known.
		return nil, newError(gateway.CodeExecutionFailed, false, "invalid tool reply: "+strictProblem(err), map[string]any{"field": "(reply)"})
	}
	return &Response{Status: StatusOK, Output: map[string]any{"result": strings.TrimSpace(string(body))}}, nil
}

// contractReply requires a contract response.
func contractReply(body []byte, details map[string]any) (*Response, *gateway.ToolError) {
	r, err := DecodeResponse(body)
	if err != nil {
		return nil, newError(gateway.CodeExecutionFailed, true, "invalid contract response: "+strings.TrimPrefix(err.Error(), ErrContract.Error()+": "), details)
	}
	return r, nil
}

// instrument runs one attempt with its span and log line: a cancelled
// context or a request that does not normalise is refused before f runs;
// a reply whose request_id is not the call's is refused; every secret
// value the attempt resolved is scrubbed from the response (output,
// error, trace) before anything reads it; and the response is completed
// (version, request id, trace, attempt, duration).
func instrument(ctx context.Context, tracer trace.Tracer, log *slog.Logger, now func() time.Time, mode string, auth *Auth, req *Request, f func(context.Context) (*Response, *gateway.ToolError)) *Response {
	start := now()
	ctx, span := tracer.Start(ctx, "tool_contract "+req.Tool.Name, trace.WithSpanKind(trace.SpanKindClient))
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
	} else if te = Normalize(req); te == nil {
		resp, te = f(ctx)
		if te == nil && resp == nil {
			te = newError(gateway.CodeExecutionFailed, false, "the tool returned no response", map[string]any{"tool": req.Tool.Name})
		}
		if te == nil && resp.RequestID != "" && strings.TrimSpace(resp.RequestID) != req.RequestID {
			te = wrongRequestID(req)
		}
	}
	if te != nil {
		resp = ResponseFor(te)
	}
	if !secrets.Empty() {
		scrubResponse(secrets, resp)
	}
	resp.Complete(req)
	dur := now().Sub(start)
	if resp.Usage.DurationMS <= 0 || resp.Error != nil {
		resp.Usage.DurationMS = dur.Milliseconds()
	}
	attrs := []attribute.KeyValue{
		attribute.String("tool.contract_version", ContractVersion), attribute.String("tool.request_id", req.RequestID),
		attribute.String("tool.name", req.Tool.Name), attribute.String("tool.transport", mode), attribute.Int("tool.attempt", resp.Usage.Attempt),
		attribute.String("tool.status", resp.Status), attribute.Int64("tool.duration_ms", dur.Milliseconds()),
	}
	logAttrs := []slog.Attr{slog.String("tool_contract", ContractVersion), slog.String("tool_request_id", req.RequestID), slog.String("tool", req.Tool.Name),
		slog.String("transport", mode), slog.Int("tool_attempt", resp.Usage.Attempt), slog.String("status", resp.Status), slog.Int64("duration_ms", dur.Milliseconds())}
	if req.Trace != nil {
		attrs = append(attrs, attribute.String("tool.trace_id", req.Trace.TraceID))
		logAttrs = append(logAttrs, slog.String("trace_id", req.Trace.TraceID))
	}
	if p := auth.profile(); p != "" {
		// The profile and the secret's name only, never its value.
		attrs = append(attrs, attribute.String("tool.auth_profile", p), attribute.String("tool.auth_secret_ref", auth.SecretRef))
		logAttrs = append(logAttrs, slog.String("tool_auth_profile", p), slog.String("tool_auth_secret_ref", auth.SecretRef))
	}
	if resp.Error != nil {
		// The canonical code and reason, never the tool's own text.
		e := resp.Err()
		attrs = append(attrs, attribute.String("tool.code", e.Code), attribute.String("tool.reason", e.Reason), attribute.Bool("tool.retryable", e.Retryable))
		logAttrs = append(logAttrs, slog.String("tool_code", e.Code), slog.String("tool_reason", e.Reason), slog.Bool("retryable", e.Retryable))
		span.SetStatus(codes.Error, e.Code)
	}
	span.SetAttributes(attrs...)
	log.LogAttrs(ctx, slog.LevelInfo, "tool attempt", logAttrs...)
	return resp
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
