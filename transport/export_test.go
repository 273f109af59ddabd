package transport

import (
	"context"
	"net/netip"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport/internal/netguard"
)

// SetLookup makes the transports' dialer resolve host names with f until
// the returned restore is called (tests play rebinding resolvers with
// it; not for parallel tests).
func SetLookup(f func(ctx context.Context, host string) ([]netip.Addr, error)) (restore func()) {
	old := netguard.Lookup
	netguard.Lookup = f
	return func() { netguard.Lookup = old }
}

// MaxAcceptedWebhookJobs is maxAccepted, for the webhook tests.
const MaxAcceptedWebhookJobs = maxAccepted

// The contract machinery the external tests exercise; unexported in the
// package, the same functions here.
var (
	Normalize       = normalize
	HTTPStatusError = httpStatusError
	Redact          = redact
	CheckEndpoint   = checkEndpoint
	CheckTokenURL   = checkTokenURL
	RequestFor      = requestFor
)

// DecodeRequest decodes and normalises a request (nil with a refusal).
func DecodeRequest(data []byte) (*Request, *gateway.ToolError) {
	r, te := decodeRequest(data)
	if te != nil {
		return nil, te
	}
	return r, nil
}

// ResponseErr is the ToolError a response reports (nil for ok).
func ResponseErr(r *Response) *gateway.ToolError { return r.err() }

// OutputValue is the output an ok response carries.
func OutputValue(r *Response) map[string]any { return r.outputValue() }

// CacheToken is c's token lookup as an adapter without allow_private
// restrictions makes it.
func CacheToken(c *TokenCache, ctx context.Context, tokenURL, clientID, clientSecret string, scopes []string) (string, bool, error) {
	return c.token(ctx, true, tokenURL, clientID, clientSecret, scopes)
}

// RetryDelay is r's wait after attempt of key.
func RetryDelay(r Retry, key string, attempt int) time.Duration { return r.delay(key, attempt) }

// Clip is clip, the one bound on quoted text in messages.
var Clip = clip
