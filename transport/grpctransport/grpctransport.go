// Package grpctransport carries Tool Contract v1 over gRPC: a gateway
// adapter that makes the unary call orloj.tool.v1.ToolService/Execute with
// a JSON codec, and a server helper so a host can expose its own tools
// the same way. It is its own package so hosts that do not use gRPC do not
// link google.golang.org/grpc.
//
// Importing the package registers a gRPC codec named "json" (the content
// subtype Orloj's tool servers use).
package grpctransport

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/w3ctrace"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/internal/kit"
	"github.com/contextos/contextos/transport/internal/netguard"
)

// Service and method of the tool service.
const (
	ServiceName = "orloj.tool.v1.ToolService"
	FullMethod  = "/" + ServiceName + "/Execute"
	CodecName   = "json"
)

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error) {
	if r, ok := v.(*transport.Response); ok {
		// The response's wire form; one that cannot be encoded is answered
		// with the non-retryable failure that says so, never a gRPC
		// status, which a caller would take for a retryable failure and
		// run the tool again.
		return kit.MarshalResponse(r), nil
	}
	if r, ok := v.(*transport.Request); ok {
		return kit.MarshalRequest(r) // json.Marshal's bytes, without reflection
	}
	return json.Marshal(v)
}
func (jsonCodec) Unmarshal(data []byte, v any) error {
	if r, ok := v.(*rawRequest); ok {
		// The server reads the document itself (transport.ServeJSON), so a
		// request it refuses still gets a response.
		*r = append((*r)[:0], data...)
		return nil
	}
	// A duplicated member or invalid UTF-8 is refused: encoding/json would
	// keep the last value. (A response is checked as it is read.)
	if r, ok := v.(*transport.Response); ok {
		return kit.UnmarshalResponse(data, r)
	}
	if err := wire.Strict(data); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}
func (jsonCodec) Name() string { return CodecName }

func init() { encoding.RegisterCodec(jsonCodec{}) }

// rawRequest is a request message as its bytes (the server decodes it).
type rawRequest []byte

// maxReplyBytes bounds a tool service's reply, as the HTTP transports
// bound theirs.
const maxReplyBytes = 4 << 20

// Options tune an adapter.
type Options struct {
	transport.Options
	// Plaintext allows a grpc:// endpoint without TLS (grpcs:// is TLS
	// 1.2 or newer). Off by default.
	Plaintext bool
	// TLS overrides the TLS configuration of grpcs:// endpoints.
	TLS *tls.Config
	// DialOptions are added to the connection's options.
	DialOptions []grpc.DialOption
}

// Adapter is a gateway.Adapter over gRPC. A reply is bounded at 4 MiB,
// as the HTTP transports bound theirs. It holds one connection; Close
// releases it.
type Adapter struct {
	ep     transport.Endpoint
	opts   Options
	tracer trace.Tracer // kit.Tracer(&opts.Options), got once
	conn   *grpc.ClientConn
}

var _ gateway.Adapter = (*Adapter)(nil)

// New checks ep (transport "grpc", URL grpc://host:port or
// grpcs://host:port) and connects lazily.
func New(ep transport.Endpoint, opts *Options) (*Adapter, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if ep.Transport != transport.TransportGRPC {
		return nil, fmt.Errorf("%w: grpctransport serves transport grpc, not %q", transport.ErrConfig, ep.Transport)
	}
	u, err := kit.CheckEndpoint(ep.URL, ep.AllowPrivate, "grpc", "grpcs")
	if err != nil {
		return nil, err
	}
	if err := kit.CheckAuth(ep.Auth, ep.AllowPrivate); err != nil {
		return nil, err
	}
	if err := kit.CheckRetry(ep.Retry); err != nil {
		return nil, err
	}
	if err := kit.CheckTools(&ep); err != nil {
		return nil, err
	}
	ep.Tools = maps.Clone(ep.Tools) // the names checked are the names sent
	var creds credentials.TransportCredentials
	switch {
	case strings.EqualFold(u.Scheme, "grpcs"):
		cfg := o.TLS
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		creds = credentials.NewTLS(cfg)
	case o.Plaintext:
		creds = insecure.NewCredentials()
	default:
		return nil, fmt.Errorf("%w: grpc:// is plaintext; use grpcs:// or set Plaintext", transport.ErrConfig)
	}
	// The dialer resolves the name and checks every address on every
	// (re)connection: link-local and metadata addresses never, private ones
	// only with AllowPrivate. A host's DialOptions come after, so a host
	// that sets its own dialer owns that check.
	guard := netguard.Dial(ep.AllowPrivate)
	dial := append([]grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.CallContentSubtype(CodecName)),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return guard(ctx, "tcp", addr) })}, o.DialOptions...)
	// passthrough: the name reaches the dialer, which resolves it and
	// checks every address it resolves to.
	conn, err := grpc.NewClient("passthrough:///"+u.Host, dial...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", transport.ErrConfig, err)
	}
	o.Options = kit.Defaults(&o.Options)
	return &Adapter{ep: ep, opts: o, tracer: kit.Tracer(&o.Options), conn: conn}, nil
}

// Close closes the connection.
func (a *Adapter) Close() error { return a.conn.Close() }

// Capability is the gateway capability the endpoint implies (timeout,
// attempts, backoff).
func (a *Adapter) Capability() gateway.Capability { return kit.Capability(&a.ep) }

// Call implements gateway.Adapter. A call that ended because ctx did
// returns an error that is the *gateway.ToolError (errors.As) and wraps
// ctx's error (errors.Is(err, context.Canceled)).
func (a *Adapter) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	req := kit.RequestFor(call, transport.TransportGRPC, &a.ep)
	return kit.Outcome(ctx, call, req, a.Execute(ctx, req))
}

// Execute makes one attempt of req; every failure is a response. A 401 to
// a cached OAuth2 token is retried once with a fresh token.
func (a *Adapter) Execute(ctx context.Context, req *transport.Request) *transport.Response {
	return kit.AuthorizedAttempt(ctx, a.tracer, &a.ep, &a.opts.Options, transport.TransportGRPC, req, func(ctx context.Context, h http.Header, caller w3ctrace.Caller) (*transport.Response, *gateway.ToolError) {
		return a.invoke(ctx, req, h, &caller)
	})
}

func (a *Adapter) invoke(ctx context.Context, req *transport.Request, h http.Header, caller *w3ctrace.Caller) (*transport.Response, *gateway.ToolError) {
	// The call's metadata, set as metadata.MD.Set sets it (the keys are
	// lower-case), its values in one slice.
	md := make(metadata.MD, 8+len(h))
	vals := make([]string, 0, 7)
	set := func(key, value string) {
		vals = append(vals, value)
		md[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	set("x-tool-contract-version", transport.ContractVersion)
	set("x-request-id", req.RequestID)
	set("x-tool-attempt", strconv.Itoa(req.Attempt))
	if req.IdempotencyKey != "" {
		set("idempotency-key", req.IdempotencyKey)
	}
	kit.TraceHeaders(ctx, caller, set) // traceparent, tracestate, baggage
	for k, vs := range h {
		md.Set(strings.ToLower(k), vs...)
	}
	var resp transport.Response
	err := a.conn.Invoke(metadata.NewOutgoingContext(ctx, md), FullMethod, req, &resp, maxReply)
	if err != nil {
		return nil, statusError(ctx, err, callDetails(req))
	}
	if resp.Status == "" {
		return nil, gateway.NewToolError(gateway.CodeExecutionFailed, true, "invalid contract response: status is missing", callDetails(req))
	}
	resp.Status = strings.ToLower(resp.Status)
	return &resp, nil
}

// maxReply is the call option bounding a reply.
var maxReply = grpc.MaxCallRecvMsgSize(maxReplyBytes)

// callDetails is the details of a call's error: the tool and the
// isolation mode.
func callDetails(req *transport.Request) map[string]any {
	return map[string]any{"tool": req.Tool.Name, "isolation_mode": transport.TransportGRPC}
}

// statusError maps a gRPC call error: the context's deadline or
// cancellation as for HTTP, Unauthenticated auth_invalid, PermissionDenied
// auth_forbidden (neither retryable), every other status a retryable
// execution failure.
func statusError(ctx context.Context, err error, details map[string]any) *gateway.ToolError {
	if status.Code(err) == codes.DeadlineExceeded {
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			// The service ran out of the deadline the caller sent with
			// the call, and the caller's deadline has passed too: its
			// context ends at once (its timer is due), and the error
			// then wraps context.DeadlineExceeded as a local timeout
			// does. Without the wait a loaded machine could answer
			// before the caller's timer fired.
			<-ctx.Done()
		}
	}
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return kit.CallError(ctx, err, details)
	}
	s, _ := status.FromError(err)
	d := map[string]any{"grpc_code": s.Code().String()}
	for k, v := range details {
		d[k] = v
	}
	if s.Code() == codes.Unavailable && strings.Contains(s.Message(), netguard.ErrorPrefix) {
		// gRPC reports a dial its dialer refused as Unavailable, with the
		// dialer's text: the address rule refused it, and a retry would
		// too.
		return gateway.NewToolError(gateway.CodeExecutionFailed, false, "the tool service resolves to an address calls may not reach", d)
	}
	msg := "the tool service answered " + s.Code().String()
	switch s.Code() {
	case codes.Unauthenticated:
		return gateway.NewToolError(gateway.CodeAuthInvalid, false, msg, d)
	case codes.PermissionDenied:
		return gateway.NewToolError(gateway.CodeAuthForbidden, false, msg, d)
	case codes.DeadlineExceeded:
		return gateway.NewToolError(gateway.CodeTimeout, true, msg, d)
	case codes.Canceled:
		return gateway.NewToolError(gateway.CodeCanceled, false, msg, d)
	}
	return gateway.NewToolError(gateway.CodeExecutionFailed, true, msg, d)
}

// Register serves ex as orloj.tool.v1.ToolService on s, answering every
// request as transport.ServeJSON does: a refusal is answered without calling
// ex, arguments sent only in input_raw reach ex in Input, every
// response, refusals included, echoes the version, request id, attempt and
// trace, and an executor that panics is answered with a non-retryable
// execution_failed that says nothing of the panic (the server goes on
// serving). Responses travel in their wire form (transport.Response: a
// result that is not a string as its JSON text), so a caller typed as
// Orloj's decodes every reply; one whose output cannot be encoded is
// answered with a non-retryable execution_failed. A message that is not a
// request envelope is answered with a non-retryable invalid_input
// response (echoing what could be read of it). None of these is a gRPC
// status, which an Orloj caller takes for a retryable failure and would
// run the tool again. The server's unary interceptors run around every
// call (the request they see is opaque: the server decodes the message
// itself; the response is the *transport.Response).
func Register(s grpc.ServiceRegistrar, ex transport.Executor) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: ServiceName,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Execute", Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			var raw rawRequest
			if err := dec(&raw); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return transport.ServeJSON(ctx, ex, raw), nil
			}
			serve := func(ctx context.Context, req any) (any, error) {
				return transport.ServeJSON(ctx, ex, *req.(*rawRequest)), nil
			}
			// The server's unary interceptors (a host's authentication,
			// logging, metrics) run around the tool as around any method.
			return interceptor(ctx, &raw, &grpc.UnaryServerInfo{Server: srv, FullMethod: FullMethod}, serve)
		}}},
		Metadata: "orloj/tool/v1/tool.proto",
	}, struct{}{})
}
