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
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/internal/netguard"
)

// Service and method of the tool service.
const (
	ServiceName = "orloj.tool.v1.ToolService"
	FullMethod  = "/" + ServiceName + "/Execute"
	CodecName   = "json"
)

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error {
	// A duplicated member or invalid UTF-8 is refused: encoding/json would
	// keep the last value.
	if err := wire.Strict(data); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}
func (jsonCodec) Name() string { return CodecName }

func init() { encoding.RegisterCodec(jsonCodec{}) }

// MaxReplyBytes bounds a tool service's reply, as the HTTP transports
// bound theirs.
const MaxReplyBytes = 4 << 20

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

// Adapter is a gateway.Adapter over gRPC. It holds one connection; Close
// releases it.
type Adapter struct {
	ep   transport.Endpoint
	opts Options
	conn *grpc.ClientConn
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
	u, err := transport.CheckEndpoint(ep.URL, ep.AllowPrivate, "grpc", "grpcs")
	if err != nil {
		return nil, err
	}
	if err := ep.Auth.Check(ep.AllowPrivate); err != nil {
		return nil, err
	}
	if err := ep.Retry.Check(); err != nil {
		return nil, err
	}
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
		return nil, fmt.Errorf("%w: %v", transport.ErrConfig, err)
	}
	o.Options = o.Options.WithDefaults()
	return &Adapter{ep: ep, opts: o, conn: conn}, nil
}

// Close closes the connection.
func (a *Adapter) Close() error { return a.conn.Close() }

// Capability is the gateway capability the endpoint implies (timeout,
// attempts, backoff).
func (a *Adapter) Capability() gateway.Capability { return a.ep.Capability() }

// Call implements gateway.Adapter.
func (a *Adapter) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	req := transport.RequestFor(call, transport.TransportGRPC, &a.ep)
	return transport.Outcome(req, a.Execute(ctx, req))
}

// Execute makes one attempt of req; every failure is a response.
func (a *Adapter) Execute(ctx context.Context, req *transport.Request) *transport.Response {
	return transport.RunAttempt(ctx, &a.opts.Options, transport.TransportGRPC, a.ep.Auth, req, func(ctx context.Context) (*transport.Response, *gateway.ToolError) {
		resp, st, te := a.invoke(ctx, req)
		if st.Expired(te, &a.opts.Options) {
			if ctx.Err() != nil {
				return nil, transport.AuthExpired(req)
			}
			resp, _, te = a.invoke(ctx, req)
		}
		return resp, te
	})
}

func (a *Adapter) invoke(ctx context.Context, req *transport.Request) (*transport.Response, transport.AuthState, *gateway.ToolError) {
	details := map[string]any{"tool": req.Tool.Name, "isolation_mode": transport.TransportGRPC}
	h, st, te := transport.AuthHeaders(ctx, &a.ep, &a.opts.Options)
	if te != nil {
		return nil, st, te
	}
	md := metadata.Pairs("x-tool-contract-version", transport.ContractVersion, "x-request-id", req.RequestID, "x-tool-attempt", fmt.Sprint(req.Attempt))
	if req.IdempotencyKey != "" {
		md.Set("idempotency-key", req.IdempotencyKey)
	}
	if tp := transport.Traceparent(req.Trace); tp != "" {
		md.Set("traceparent", tp)
	}
	for k, vs := range h {
		md.Set(strings.ToLower(k), vs...)
	}
	var resp transport.Response
	err := a.conn.Invoke(metadata.NewOutgoingContext(ctx, md), FullMethod, req, &resp, grpc.MaxCallRecvMsgSize(MaxReplyBytes))
	if err != nil {
		return nil, st, StatusError(ctx, err, details)
	}
	if resp.Status == "" {
		return nil, st, gateway.NewToolError(gateway.CodeExecutionFailed, true, "invalid contract response: status is missing", details)
	}
	resp.Status = strings.ToLower(resp.Status)
	return &resp, st, nil
}

// StatusError maps a gRPC call error: the context's deadline or
// cancellation as for HTTP, Unauthenticated auth_invalid, PermissionDenied
// auth_forbidden (neither retryable), every other status a retryable
// execution failure.
func StatusError(ctx context.Context, err error, details map[string]any) *gateway.ToolError {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return transport.TransportError(ctx, err, details)
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

// Register serves ex as orloj.tool.v1.ToolService on s. Requests are
// normalised first (a refusal is answered without calling ex) and every
// response is completed with the version, request id, attempt and trace.
func Register(s grpc.ServiceRegistrar, ex transport.Executor) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: ServiceName,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Execute", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var req transport.Request
			if err := dec(&req); err != nil {
				return nil, status.Error(codes.InvalidArgument, "the request is not a Tool Contract v1 envelope")
			}
			return serve(ctx, ex, &req), nil
		}}},
		Metadata: "orloj/tool/v1/tool.proto",
	}, struct{}{})
}

func serve(ctx context.Context, ex transport.Executor, req *transport.Request) *transport.Response {
	var resp *transport.Response
	if te := transport.Normalize(req); te != nil {
		resp = transport.ResponseFor(te)
	} else if resp = ex.Execute(ctx, req); resp == nil {
		resp = transport.ResponseFor(gateway.NewToolError(gateway.CodeExecutionFailed, false, "the tool returned no response", nil))
	}
	resp.Complete(req)
	return resp
}
