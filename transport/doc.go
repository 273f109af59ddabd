// Package transport owns Tool Contract v1 (seed 004) on the wire: the
// execution request and response, their normalisation and refusal rules,
// the error taxonomy and its mapping to HTTP, gRPC and the gateway's
// result statuses, retry and backoff policy with reproducible jitter, auth
// profiles resolved per call from secret references (with a shared OAuth2
// client-credentials token cache), and the gateway adapters that carry
// governed calls to tools in other processes over http, external
// (full envelope over HTTP) and webhook-callback. The gRPC adapter lives in
// transport/grpctransport and the MCP adapter in transport/mcptransport, so
// hosts that do not use them do not link their dependencies.
//
// The gateway owns governance and retries: an adapter here makes one
// attempt per gateway call, carrying the gateway's attempt number, the
// tool call id as request_id, the idempotency key and the trace context on
// the wire. The one retry an adapter makes on its own is the OAuth2 one:
// a 401 with a cached token evicts it and the attempt is made once more
// with a fresh token (auth_expired when that is not possible).
//
// Calls stay where they were sent and give nothing back. Endpoints and
// OAuth2 token URLs are checked when an adapter is built (CheckEndpoint,
// CheckTokenURL), and the dialer checks the address a name resolves to on
// every connection, so cloud metadata and link-local addresses are never
// reached, and private ones only with AllowPrivate. Redirects are not
// followed unless Options.MaxRedirects allows them, and then only within
// the request's origin, each hop checked again; token requests never
// follow one. A reply whose request_id is not the call's is refused. Every
// secret value an attempt resolved (API key, bearer token, basic password,
// OAuth2 client secret and access token) is replaced by [REDACTED], raw or
// encoded, in the attempt's output, error, log line and span, whatever the
// tool echoes back.
package transport
