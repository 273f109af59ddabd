package transport

import (
	"context"
	"net/http"
	"net/url"

	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/w3ctrace"
	"github.com/contextos/contextos/transport/internal/share"
)

// The gRPC and MCP transports run attempts with this package's machinery
// (transport/internal/kit), which is not public API.
func init() { share.Machinery = machinery{} }

// machinery implements kit.Machinery.
type machinery struct{}

func (machinery) Defaults(opts *Options) Options { return opts.withDefaults() }

func (machinery) CheckEndpoint(raw string, allowPrivate bool, schemes ...string) (*url.URL, error) {
	return checkEndpoint(raw, allowPrivate, schemes...)
}

func (machinery) CheckAuth(a *Auth, allowPrivate bool) error { return a.check(allowPrivate) }

func (machinery) CheckRetry(r Retry) error { return r.check() }

func (machinery) Capability(ep *Endpoint) gateway.Capability { return capabilityOf(ep) }

func (machinery) HTTPClient(ep *Endpoint, opts *Options) *http.Client {
	return clientFor(opts.HTTPClient, opts.MaxRedirects, ep.AllowPrivate)
}

func (machinery) RequestFor(call *gateway.Call, mode string, ep *Endpoint) *Request {
	return requestFor(call, mode, ep)
}

func (machinery) Outcome(ctx context.Context, call *gateway.Call, req *Request, resp *Response) (*gateway.Outcome, error) {
	return outcome(ctx, call, req, resp)
}

func (machinery) Tracer(opts *Options) trace.Tracer { return opts.TracerProvider.Tracer(tracerName) }

func (machinery) Attempt(ctx context.Context, tracer trace.Tracer, opts *Options, mode string, auth *Auth, req *Request, f func(context.Context, w3ctrace.Caller) (*Response, *gateway.ToolError)) *Response {
	return instrument(ctx, tracer, spanPrefix+req.Tool.Name, opts.Logger, opts.Now, mode, auth, req, false, f)
}

func (machinery) AuthorizedAttempt(ctx context.Context, tracer trace.Tracer, ep *Endpoint, opts *Options, mode string, req *Request, f func(context.Context, http.Header, w3ctrace.Caller) (*Response, *gateway.ToolError)) *Response {
	return instrument(ctx, tracer, spanPrefix+req.Tool.Name, opts.Logger, opts.Now, mode, ep.Auth, req, false, func(ctx context.Context, caller w3ctrace.Caller) (*Response, *gateway.ToolError) {
		return authorized(ctx, ep, opts, req, caller, f)
	})
}

// authorized runs f with ep's auth headers; a 401 to a cached OAuth2
// token evicts it and f runs once more with a fresh one.
func authorized(ctx context.Context, ep *Endpoint, opts *Options, req *Request, caller w3ctrace.Caller, f func(context.Context, http.Header, w3ctrace.Caller) (*Response, *gateway.ToolError)) (*Response, *gateway.ToolError) {
	for retried := false; ; retried = true {
		var h http.Header // nil without auth: nothing to send
		if ep.Auth.profile() != "" {
			h = http.Header{}
		}
		st, te := applyAuth(ctx, ep.Auth, opts.Secrets, opts.Tokens, ep.AllowPrivate, h)
		var resp *Response
		if te == nil {
			resp, te = f(ctx, h, caller)
		}
		if retried || !expired(st, te) {
			return resp, te
		}
		// A 401 to a cached OAuth2 token: evict it, and try once more with
		// a fresh one if there is time.
		opts.Tokens.evict(st.tokenURL, st.clientID, st.scopes)
		if ctx.Err() != nil {
			return nil, authExpired(req)
		}
	}
}

func (machinery) AuthHeaders(ctx context.Context, ep *Endpoint, opts *Options) (http.Header, *gateway.ToolError) {
	h := http.Header{}
	_, te := applyAuth(ctx, ep.Auth, opts.Secrets, opts.Tokens, ep.AllowPrivate, h)
	return h, te
}

func (machinery) CallError(ctx context.Context, err error, details map[string]any) *gateway.ToolError {
	return transportError(ctx, err, details)
}

func (machinery) MarshalResponse(r *Response) []byte { return marshalWire(r) }

func (machinery) UnmarshalResponse(data []byte, r *Response) error { return decodeInto(data, r, true) }

func (machinery) MarshalRequest(r *Request) ([]byte, error) { return marshalRequest(r) }

func (machinery) CheckTools(ep *Endpoint) error { return checkTools(ep) }
