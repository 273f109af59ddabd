// Package transport owns Tool Contract v1 (seed 004) on the wire: the
// execution request and response, their normalisation and refusal rules,
// the error taxonomy and its mapping to HTTP, gRPC and the gateway's
// result statuses, retry and backoff policy with reproducible jitter, auth
// profiles resolved per call from secret references (with an OAuth2
// client-credentials token cache per adapter, or one the host shares
// through Options.Tokens), and the gateway adapters that carry
// governed calls to tools in other processes over http, external
// (full envelope over HTTP) and webhook-callback. The gRPC adapter lives in
// transport/grpctransport and the MCP adapter in transport/mcptransport, so
// hosts that do not use them do not link their dependencies.
//
// On the wire it speaks with Orloj's own clients and servers as well as
// seed 004's: error details are always written, every value as a string
// (peers that type details as string → string decode them; either form is
// read); an output.result that is not a string travels as its JSON text,
// marked by result_encoding "json" (peers that type output as
// {"result": string} decode every reply; our clients decode the text back
// only where the marker says so, so a string result stays the string it
// is — see Response); a reply with another major tool_contract_version is
// refused as a non-retryable invalid_input on every transport; the
// webhook runtime mode is "webhook-callback". The server side (NewHandler,
// ServeJSON and grpctransport.Register) echoes the version, request id,
// attempt and trace in every response, refusals included, answers an
// executor that panics, or an output that cannot be encoded, with a
// non-retryable execution_failed (never a dropped connection or a gRPC
// status, which a peer retries, and never the panic's value), and decodes
// arguments sent only in input_raw as a JSON object into Input (other
// input_raw text, such as the upstream catalog's "tool=<tool> payload",
// reaches the executor as InputRaw with an empty Input). Endpoint.InputRaw
// makes our clients send arguments that way, for servers whose input is a
// string map, and ToolInfo.Name sets the tool.name sent for a capability,
// for a server that knows the tool by its own name. A webhook
// job the tool accepted is never submitted again: pending replies and
// failed polls keep the wait going, and a later attempt polls it. Each
// attempt carries the caller's W3C trace context:
// traceparent parented on the attempt's span with its sampled flag,
// tracestate and baggage.
//
// The gateway owns governance and retries: an adapter here makes one
// attempt per gateway call, carrying the gateway's attempt number, the
// tool call id as request_id, the idempotency key and the trace context on
// the wire. The one retry an adapter makes on its own is the OAuth2 one:
// a 401 with a cached token evicts it and the attempt is made once more
// with a fresh token (auth_expired when that is not possible).
//
// Calls stay where they were sent and give nothing back. Endpoints, OAuth2
// token URLs, an api_key_header profile's header (never one HTTP or the
// transports own: ErrReservedHeader) and wire tool names are checked when
// an adapter is built (an error matching ErrConfig, a *ConfigError naming
// the field where there is one), and the dialer checks the address a name resolves to on
// every connection, so cloud metadata and link-local addresses are never
// reached, and private ones only with AllowPrivate. Redirects are not
// followed unless Options.MaxRedirects allows them, and then only within
// the request's origin, each hop checked again; token requests never
// follow one. A reply whose request_id is not the call's is refused. Every
// secret value an attempt resolved (API key, bearer token, basic password,
// OAuth2 client secret and access token) is replaced by [REDACTED], raw or
// encoded, in the attempt's output, error, log line and span, whatever the
// tool echoes back.
//
// # Nouns
//
//   - Request and Response are the Tool Contract v1 envelopes on the wire
//     (seed 004's ToolExecutionRequest and ToolExecutionResponse); Tool,
//     RuntimeInfo, AuthInfo and Trace are their members.
//   - A Response's Status is the contract's: ok, error or denied
//     (StatusOK, StatusError, StatusDenied) — not a gateway result status.
//   - Failure is a Response's error member; the adapters turn it into a
//     *gateway.ToolError, the error every adapter returns.
//   - AttemptUsage is a Response's "usage" member: one attempt's duration
//     and number, not a run's budget usage (runcontext) nor token usage.
//   - An attempt is one exchange with the tool; the gateway makes the
//     retries (Retry says how many and how long to wait between them).
//   - An Endpoint is where and how an adapter reaches its tools; Options
//     are what adapters share (clients, secrets, tokens, telemetry, clock).
//   - An Executor answers Requests: the server side a tool author writes,
//     served by NewHandler and ServeJSON.
//
// An adapter's Call returns the gateway's *gateway.Outcome or an error
// that errors.As finds a *gateway.ToolError in; when the call ended
// because its context did, the error also wraps the context's error (and
// cause), so errors.Is(err, context.Canceled) holds.
//
// The machinery every transport shares (the attempt runner, auth headers,
// error mapping, endpoint checks) lives in transport/internal/kit, for
// this package's subpackages only.
package transport
