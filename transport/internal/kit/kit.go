// Package kit is the attempt machinery package transport shares with its
// gRPC and MCP subpackages, so each transport runs an attempt, applies
// auth, maps errors and checks endpoints exactly as the HTTP adapter does,
// without that machinery being public API. The functions here call
// package transport's own (unexported) implementation; see package share
// for how it gets here.
package kit

import (
	"context"
	"net/http"
	"net/url"

	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/w3ctrace"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/internal/share"
)

// Exchange is one attempt's wire exchange: it returns the tool's response
// or the failure. caller is the caller's trace context of the attempt's
// request, parsed once for the attempt: the exchange writes its headers
// with TraceHeaders.
type Exchange func(ctx context.Context, caller w3ctrace.Caller) (*transport.Response, *gateway.ToolError)

// AuthExchange is an exchange sent with the attempt's auth headers.
type AuthExchange func(ctx context.Context, auth http.Header, caller w3ctrace.Caller) (*transport.Response, *gateway.ToolError)

// Machinery is what package transport implements for its subpackages.
type Machinery interface {
	Defaults(opts *transport.Options) transport.Options
	CheckEndpoint(raw string, allowPrivate bool, schemes ...string) (*url.URL, error)
	CheckAuth(a *transport.Auth, allowPrivate bool) error
	CheckRetry(r transport.Retry) error
	Capability(ep *transport.Endpoint) gateway.Capability
	HTTPClient(ep *transport.Endpoint, opts *transport.Options) *http.Client
	RequestFor(call *gateway.Call, mode string, ep *transport.Endpoint) *transport.Request
	Outcome(ctx context.Context, call *gateway.Call, req *transport.Request, resp *transport.Response) (*gateway.Outcome, error)
	Tracer(opts *transport.Options) trace.Tracer
	Attempt(ctx context.Context, tracer trace.Tracer, opts *transport.Options, mode string, auth *transport.Auth, req *transport.Request,
		f func(context.Context, w3ctrace.Caller) (*transport.Response, *gateway.ToolError)) *transport.Response
	AuthorizedAttempt(ctx context.Context, tracer trace.Tracer, ep *transport.Endpoint, opts *transport.Options, mode string, req *transport.Request,
		f func(context.Context, http.Header, w3ctrace.Caller) (*transport.Response, *gateway.ToolError)) *transport.Response
	AuthHeaders(ctx context.Context, ep *transport.Endpoint, opts *transport.Options) (http.Header, *gateway.ToolError)
	CallError(ctx context.Context, err error, details map[string]any) *gateway.ToolError
	MarshalResponse(r *transport.Response) []byte
	UnmarshalResponse(data []byte, r *transport.Response) error
	MarshalRequest(r *transport.Request) ([]byte, error)
	CheckTools(ep *transport.Endpoint) error
}

// m is transport's implementation; transport's init stored it before this
// package's variables are initialised.
var m = share.Machinery.(Machinery)

// Defaults returns opts with every unset field defaulted (Tokens: a cache
// of the adapter's own). Call it once per adapter, when it is built; every
// other function here takes the defaulted options.
func Defaults(opts *transport.Options) transport.Options { return m.Defaults(opts) }

// CheckEndpoint refuses an endpoint URL a call must never reach (the
// transport package doc lists the rules); schemes default to http and
// https. Errors match transport.ErrConfig and never echo credentials.
func CheckEndpoint(raw string, allowPrivate bool, schemes ...string) (*url.URL, error) {
	return m.CheckEndpoint(raw, allowPrivate, schemes...)
}

// CheckAuth reports an auth configuration that cannot work
// (transport.ErrConfig).
func CheckAuth(a *transport.Auth, allowPrivate bool) error { return m.CheckAuth(a, allowPrivate) }

// CheckRetry reports an invalid retry policy (transport.ErrConfig).
func CheckRetry(r transport.Retry) error { return m.CheckRetry(r) }

// Capability is the gateway capability ep implies: timeout, attempts,
// backoff, and that the adapter honours its context.
func Capability(ep *transport.Endpoint) gateway.Capability { return m.Capability(ep) }

// HTTPClient is the client that reaches ep: opts' client with the
// redirect rule and, when it has no Transport, the checked dialer.
func HTTPClient(ep *transport.Endpoint, opts *transport.Options) *http.Client {
	return m.HTTPClient(ep, opts)
}

// RequestFor builds the contract request of one gateway attempt.
func RequestFor(call *gateway.Call, mode string, ep *transport.Endpoint) *transport.Request {
	return m.RequestFor(call, mode, ep)
}

// Outcome turns the response of an attempt of call (req, made under ctx)
// into the gateway's outcome or its error: a *gateway.ToolError
// (errors.As), which also wraps ctx's cause when the attempt timed out or
// was canceled because ctx ended, so errors.Is(err, context.Canceled)
// holds.
func Outcome(ctx context.Context, call *gateway.Call, req *transport.Request, resp *transport.Response) (*gateway.Outcome, error) {
	return m.Outcome(ctx, call, req, resp)
}

// Tracer is the tracer of opts' TracerProvider every transport's attempt
// spans start from. Get it once per adapter, when it is built, and pass it
// to Attempt and AuthorizedAttempt.
func Tracer(opts *transport.Options) trace.Tracer { return m.Tracer(opts) }

// Attempt runs one attempt f of req the way every transport does: a span
// (started from tracer, Tracer's) and a log line, a cancelled context
// refused before f runs, the attempt's secrets scrubbed from the
// response, and the response completed (version, request id, attempt,
// duration, trace).
func Attempt(ctx context.Context, tracer trace.Tracer, opts *transport.Options, mode string, auth *transport.Auth, req *transport.Request, f Exchange) *transport.Response {
	return m.Attempt(ctx, tracer, opts, mode, auth, req, f)
}

// AuthorizedAttempt is Attempt for an exchange sent with ep's auth
// headers, resolved afresh for the attempt (and scrubbed from its
// response). A 401 to a cached OAuth2 token evicts it and f runs once more
// with a fresh one (auth_expired when no time is left).
func AuthorizedAttempt(ctx context.Context, tracer trace.Tracer, ep *transport.Endpoint, opts *transport.Options, mode string, req *transport.Request, f AuthExchange) *transport.Response {
	return m.AuthorizedAttempt(ctx, tracer, ep, opts, mode, req, f)
}

// AuthHeaders resolves ep's auth into the headers of one request (for a
// transport that sets them per HTTP request, as the MCP one does).
func AuthHeaders(ctx context.Context, ep *transport.Endpoint, opts *transport.Options) (http.Header, *gateway.ToolError) {
	return m.AuthHeaders(ctx, ep, opts)
}

// CallError maps an error from making a call: the context's deadline is
// timeout (retryable), its cancellation canceled (not), anything else a
// retryable execution failure. The message never carries err's text (it
// can hold a URL with credentials).
func CallError(ctx context.Context, err error, details map[string]any) *gateway.ToolError {
	return m.CallError(ctx, err, details)
}

// TraceHeaders writes the W3C trace context an attempt made under ctx
// carries (traceparent, tracestate, baggage; lower-case keys) through set,
// as the HTTP adapter writes it: caller is the attempt's, given to its
// Exchange.
func TraceHeaders(ctx context.Context, caller *w3ctrace.Caller, set func(key, value string)) {
	caller.InjectOutbound(ctx, set)
}

// MarshalResponse is r's wire form (transport.Response), or, when r
// cannot be encoded, the wire form of the non-retryable execution_failed
// that reports it (as transport.NewHandler answers). It never fails.
func MarshalResponse(r *transport.Response) []byte { return m.MarshalResponse(r) }

// UnmarshalResponse reads a response document in either form
// (transport.Response) into r. A document that is not strict JSON
// (wire.Strict) is refused with wire.Strict's error, as is; other errors
// match transport.ErrContract.
func UnmarshalResponse(data []byte, r *transport.Response) error { return m.UnmarshalResponse(data, r) }

// MarshalRequest is r's JSON form: exactly json.Marshal's bytes, written
// without reflection. It fails as json.Marshal does.
func MarshalRequest(r *transport.Request) ([]byte, error) { return m.MarshalRequest(r) }

// CheckTools reports a tools entry of ep that cannot work
// (transport.ErrConfig, a *transport.ConfigError naming the field): a
// wire tool name that is empty, too long, not text, or another
// capability's.
func CheckTools(ep *transport.Endpoint) error { return m.CheckTools(ep) }
