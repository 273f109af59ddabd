package transport

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/sync/singleflight"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport/internal/scrub"
)

// Auth profiles.
const (
	ProfileBearer            = "bearer"
	ProfileAPIKeyHeader      = "api_key_header"
	ProfileBasic             = "basic"
	ProfileOAuth2ClientCreds = "oauth2_client_credentials"
)

// Auth is an endpoint's declarative auth: a profile and a secret
// reference, never a secret.
type Auth struct {
	// Profile is bearer (the default when a secret is named),
	// api_key_header, basic or oauth2_client_credentials.
	Profile string `json:"profile,omitempty"`
	// SecretRef is [namespace/]name[:key]. For oauth2_client_credentials the
	// keys client_id and client_secret of the named secret are used.
	SecretRef string `json:"secret_ref,omitempty"`
	// HeaderName is api_key_header's header.
	HeaderName string `json:"header_name,omitempty"`
	// TokenURL is oauth2_client_credentials' token endpoint. It is held to
	// the endpoint rules and more strictly, since the client secret travels
	// to it: https only, except plain http to a loopback or private address
	// (or localhost) under the endpoint's AllowPrivate. NewAdapter refuses
	// another with an error matching ErrConfig that never echoes the URL.
	TokenURL string `json:"token_url,omitempty"`
	// Scopes are OAuth2 scopes (also sent on the wire as auth.scopes).
	Scopes []string `json:"scopes,omitempty"`
}

// profile is the effective profile ("" for no auth).
func (a *Auth) profile() string {
	if a == nil {
		return ""
	}
	p := strings.ToLower(strings.TrimSpace(a.Profile))
	if p == "" && a.SecretRef != "" {
		p = ProfileBearer
	}
	return p
}

// check reports a configuration that cannot work (ErrConfig): an
// unknown profile, a missing secret_ref, header_name or token_url, a
// header_name that is not an HTTP header name, or a token_url that
// checkTokenURL refuses (allowPrivate is the endpoint's allowance).
func (a *Auth) check(allowPrivate bool) error {
	switch p := a.profile(); p {
	case "":
		return nil
	case ProfileBearer, ProfileBasic:
	case ProfileAPIKeyHeader:
		if strings.TrimSpace(a.HeaderName) == "" {
			return &ConfigError{Field: "auth.header_name", Problem: "is required by auth profile api_key_header"}
		}
		if !validHeaderName(a.HeaderName) {
			return &ConfigError{Field: "auth.header_name", Problem: fmt.Sprintf("%q is not an HTTP header name", clip(a.HeaderName))}
		}
		if reservedHeader(a.HeaderName) {
			return &ConfigError{Field: "auth.header_name", Problem: fmt.Sprintf("%q is a reserved header (HTTP's framing and connection headers, content headers, and the headers the transports write for a call cannot carry an API key)", clip(a.HeaderName)), Rule: ErrReservedHeader}
		}
	case ProfileOAuth2ClientCreds:
		if strings.TrimSpace(a.TokenURL) == "" {
			return fmt.Errorf("%w: auth profile oauth2_client_credentials needs token_url", ErrConfig)
		}
		if err := checkTokenURL(a.TokenURL, allowPrivate); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: auth profile %q is not bearer, api_key_header, basic or oauth2_client_credentials", ErrConfig, clip(p))
	}
	if strings.TrimSpace(a.SecretRef) == "" {
		return fmt.Errorf("%w: auth profile %s needs secret_ref", ErrConfig, a.profile())
	}
	if _, err := ParseSecretRef(a.SecretRef); err != nil {
		return err
	}
	return nil
}

// SecretRef names a secret: namespace, name and key.
type SecretRef struct {
	Namespace, Name, Key string
}

// String is the reference in [namespace/]name[:key] form.
func (r SecretRef) String() string {
	s := r.Name
	if r.Namespace != "" {
		s = r.Namespace + "/" + s
	}
	if r.Key != "" && r.Key != "value" {
		s += ":" + r.Key
	}
	return s
}

// ParseSecretRef parses [namespace/]name[:key]; the key defaults to
// "value".
func ParseSecretRef(s string) (SecretRef, error) {
	s = strings.TrimSpace(s)
	var r SecretRef
	if i := strings.IndexByte(s, '/'); i >= 0 {
		r.Namespace, s = s[:i], s[i+1:]
		if r.Namespace == "" {
			return r, fmt.Errorf("%w: secret_ref has an empty namespace", ErrConfig)
		}
	}
	r.Name, r.Key, _ = strings.Cut(s, ":")
	if r.Key == "" {
		r.Key = "value"
	}
	if r.Name == "" || strings.ContainsAny(r.Name, "/ ") {
		return r, fmt.Errorf("%w: secret_ref must be [namespace/]name[:key]", ErrConfig)
	}
	return r, nil
}

// SecretResolver resolves secret references to values. It is asked on
// every call, so a rotated secret is used from the next call on. It
// returns an error matching ErrSecretNotFound (and no value) for a
// reference it does not hold; with its context done it returns the
// context's error; its errors never carry secret values; and it is safe
// for concurrent use. transporttest.RunSecretResolverTests checks all of
// it.
type SecretResolver interface {
	Resolve(ctx context.Context, ref SecretRef) (string, error)
}

// MapSecrets is an in-memory SecretResolver keyed by "name" (key value),
// "name:key" or "namespace/name:key"; the most specific entry wins.
type MapSecrets map[string]string

// Resolve implements SecretResolver.
func (m MapSecrets) Resolve(ctx context.Context, ref SecretRef) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	cands := []string{}
	if ref.Namespace != "" {
		cands = append(cands, ref.Namespace+"/"+ref.Name+":"+ref.Key)
	}
	cands = append(cands, ref.Name+":"+ref.Key)
	if ref.Key == "value" {
		if ref.Namespace != "" {
			cands = append(cands, ref.Namespace+"/"+ref.Name)
		}
		cands = append(cands, ref.Name)
	}
	for _, c := range cands {
		if v, ok := m[c]; ok && v != "" {
			return v, nil
		}
	}
	return "", ErrSecretNotFound
}

// TokenCache caches OAuth2 client-credentials tokens per token URL, client
// id and scope set (scopes in any order and repeated are one set; two
// endpoints of one client asking for different scopes get a token each)
// until expires_in minus 30 s (an hour when the server gives no
// expiry). Concurrent misses for one key make one exchange. A token
// request never follows a redirect. The zero value is ready to use. Safe
// for concurrent use: pass one in Options.Tokens to the adapters that
// should share tokens (an adapter given none keeps its own).
type TokenCache struct {
	// HTTPClient makes token exchanges (its CheckRedirect is replaced:
	// redirects are never followed). Default: a client with a 10 s timeout
	// whose dialer refuses link-local and metadata addresses (and, for an
	// endpoint without allow_private, private ones).
	HTTPClient *http.Client
	// Now is the clock for expiry. Default: time.Now.
	Now func() time.Time

	mu     sync.Mutex
	tokens map[string]cachedToken
	group  singleflight.Group
}

type cachedToken struct {
	access string
	until  time.Time
}

// tokenSafetyMargin is how long before its expiry a token is renewed.
const tokenSafetyMargin = 30 * time.Second

func (c *TokenCache) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// tokenKey keys a token by its token URL, client id and scope set.
func tokenKey(tokenURL, clientID string, scopes []string) string {
	set := slices.Clone(scopes)
	slices.Sort(set)
	set = slices.Compact(set)
	return tokenURL + "\x00" + clientID + "\x00" + strings.Join(set, " ")
}

// token returns a cached token or exchanges the client credentials for a
// new one; the boolean reports a cache hit. tokenURL is the caller's to
// check (checkTokenURL); the exchange does not follow redirects, and the
// default client refuses link-local and metadata addresses (and private
// ones unless allowPrivate) at dial time.
func (c *TokenCache) token(ctx context.Context, allowPrivate bool, tokenURL, clientID, clientSecret string, scopes []string) (string, bool, error) {
	key := tokenKey(tokenURL, clientID, scopes)
	c.mu.Lock()
	if t, ok := c.tokens[key]; ok && c.now().Before(t.until) {
		c.mu.Unlock()
		return t.access, true, nil
	}
	c.mu.Unlock()
	v, err, _ := c.group.Do(key, func() (any, error) {
		hc := c.HTTPClient
		if hc == nil {
			hc = &http.Client{Timeout: 10 * time.Second}
		}
		hc = clientFor(hc, 0, allowPrivate)
		cfg := clientcredentials.Config{ClientID: clientID, ClientSecret: clientSecret, TokenURL: tokenURL, Scopes: scopes}
		tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, hc))
		if err != nil {
			return nil, err
		}
		if tok.AccessToken == "" {
			return nil, errors.New("the token response has no access_token")
		}
		now := c.now()
		ttl := time.Hour
		if !tok.Expiry.IsZero() {
			// Expiry is computed by x/oauth2 from expires_in on the real
			// clock; the TTL is taken from that and applied on ours.
			ttl = time.Until(tok.Expiry).Round(time.Second)
		}
		if ttl > tokenSafetyMargin {
			ttl -= tokenSafetyMargin
		}
		ttl = max(ttl, time.Second)
		c.mu.Lock()
		if c.tokens == nil {
			c.tokens = map[string]cachedToken{}
		}
		c.tokens[key] = cachedToken{access: tok.AccessToken, until: now.Add(ttl)}
		c.mu.Unlock()
		return tok.AccessToken, nil
	})
	if err != nil {
		return "", false, err
	}
	return v.(string), false, nil
}

// evict drops the cached token of a token URL, client id and scope set
// (after a 401).
func (c *TokenCache) evict(tokenURL, clientID string, scopes []string) {
	c.mu.Lock()
	delete(c.tokens, tokenKey(tokenURL, clientID, scopes))
	c.mu.Unlock()
}

// authState is what applying auth to one attempt used: enough to evict
// the token after a 401.
type authState struct {
	profile  string
	tokenURL string
	clientID string
	scopes   []string
	cached   bool // the token came from the cache
}

// applyAuth resolves a's secrets and sets the attempt's headers.
// Every value it resolves is recorded in the attempt's scrub set (ctx), so
// a tool that echoes it back does not get it into a result, an error, a
// log line or a span.
func applyAuth(ctx context.Context, a *Auth, secrets SecretResolver, tokens *TokenCache, allowPrivate bool, h http.Header) (authState, *gateway.ToolError) {
	st := authState{profile: a.profile()}
	if st.profile == "" {
		return st, nil
	}
	ref, err := ParseSecretRef(a.SecretRef)
	if err != nil {
		return st, newError(gateway.CodeRuntimePolicyInvalid, false, err.Error(), map[string]any{"auth_profile": st.profile})
	}
	resolve := func(key string) (string, *gateway.ToolError) {
		r := ref
		if key != "" {
			r.Key = key
		}
		if secrets == nil {
			return "", newError(gateway.CodeSecretResolutionFailed, false, "no secret resolver is configured", map[string]any{"secret_ref": r.String()})
		}
		v, err := secrets.Resolve(ctx, r)
		if err != nil || strings.TrimSpace(v) == "" {
			return "", newError(gateway.CodeSecretResolutionFailed, false, "secret "+r.String()+" could not be resolved", map[string]any{"secret_ref": r.String()})
		}
		v = strings.TrimSpace(v)
		scrub.Add(ctx, v)
		if !validHeaderValue(v) {
			// A line break in a secret would end the header it goes in.
			return "", newError(gateway.CodeSecretResolutionFailed, false, "secret "+r.String()+" is not a valid header value", map[string]any{"secret_ref": r.String()})
		}
		return v, nil
	}
	switch st.profile {
	case ProfileBearer:
		v, te := resolve("")
		if te != nil {
			return st, te
		}
		h.Set("Authorization", "Bearer "+v)
	case ProfileAPIKeyHeader:
		if strings.TrimSpace(a.HeaderName) == "" {
			return st, newError(gateway.CodeRuntimePolicyInvalid, false, "auth profile api_key_header needs header_name", map[string]any{"auth_profile": st.profile})
		}
		if reservedHeader(a.HeaderName) {
			// Checked when the adapter was built; the endpoint's Auth
			// may have been changed since.
			return st, newError(gateway.CodeRuntimePolicyInvalid, false, "auth header_name is a reserved header", map[string]any{"auth_profile": st.profile, "field": "auth.header_name"})
		}
		v, te := resolve("")
		if te != nil {
			return st, te
		}
		h.Set(a.HeaderName, v)
	case ProfileBasic:
		v, te := resolve("")
		if te != nil {
			return st, te
		}
		user, pass, ok := strings.Cut(v, ":")
		if !ok {
			return st, newError(gateway.CodeRuntimePolicyInvalid, false, "a basic auth secret must be user:password", map[string]any{"auth_profile": st.profile, "secret_ref": ref.String()})
		}
		_ = user // the user name is not a secret; the password is
		scrub.Add(ctx, pass)
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(v)))
	case ProfileOAuth2ClientCreds:
		if strings.TrimSpace(a.TokenURL) == "" {
			return st, newError(gateway.CodeRuntimePolicyInvalid, false, "auth profile oauth2_client_credentials needs token_url", map[string]any{"auth_profile": st.profile})
		}
		id, te := resolve("client_id")
		if te != nil {
			return st, te
		}
		secret, te := resolve("client_secret")
		if te != nil {
			return st, te
		}
		if tokens == nil {
			// Options were not defaulted: a cache for this attempt only.
			tokens = &TokenCache{}
		}
		scopes := labels(a.Scopes)
		tok, hit, err := tokens.token(ctx, allowPrivate, a.TokenURL, id, secret, scopes)
		if err != nil {
			if ctx.Err() != nil {
				return st, transportError(ctx, ctx.Err(), nil)
			}
			return st, tokenError(err, a.TokenURL)
		}
		scrub.Add(ctx, tok)
		if !validHeaderValue(tok) {
			return st, newError(gateway.CodeSecretResolutionFailed, false, "the OAuth2 access token is not a valid header value", map[string]any{"token_url": tokenURLDetail(a.TokenURL)})
		}
		st.tokenURL, st.clientID, st.scopes, st.cached = a.TokenURL, id, scopes, hit
		h.Set("Authorization", "Bearer "+tok)
	default:
		return st, newError(gateway.CodeRuntimePolicyInvalid, false, "unknown auth profile", map[string]any{"auth_profile": clip(st.profile)})
	}
	return st, nil
}

// tokenError maps a failed token exchange: a redirect (never followed)
// or a refused address is final; anything else is a retryable
// secret_resolution_failed. The message never carries the token
// endpoint's reply.
func tokenError(err error, tokenURL string) *gateway.ToolError {
	d := map[string]any{"token_url": tokenURLDetail(tokenURL)}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 300 && re.Response.StatusCode < 400 {
		d["http_status"] = re.Response.StatusCode
		return newError(gateway.CodeSecretResolutionFailed, false, fmt.Sprintf("the OAuth2 token endpoint answered HTTP %d (a redirect); token requests never follow redirects", re.Response.StatusCode), d)
	}
	if te := refusal(err, d); te != nil {
		te.Code, te.Reason = gateway.CodeSecretResolutionFailed, gateway.ReasonFor(gateway.CodeSecretResolutionFailed)
		return te
	}
	return newError(gateway.CodeSecretResolutionFailed, true, "the OAuth2 token exchange failed", d)
}

// tokenURLDetail is the token URL for details: its origin and path,
// never credentials or a query.
func tokenURLDetail(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid)"
	}
	return clip(safeOrigin(u) + u.EscapedPath())
}

// reservedHeaders are the header names an api_key_header profile may not
// use (lower case): HTTP's framing, connection and proxy headers, which an
// API key would corrupt or smuggle a second request through; the headers
// the transports read the reply by (Accept, Range); the headers they write
// for every call (a key there would replace the call's identity, or be
// replaced by it); and gRPC's and MCP's own.
var reservedHeaders = []string{
	"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive",
	"http2-settings", "expect", "via", "max-forwards", "accept", "range",
	"x-tool-contract-version", "x-tool-name", "x-tool-attempt", "x-request-id", "idempotency-key",
	"traceparent", "tracestate", "baggage", "last-event-id",
}

// reservedPrefixes are the reserved header name prefixes: Proxy-*,
// Content-*, Accept-*, Grpc-* and Mcp-*.
var reservedPrefixes = []string{"proxy-", "content-", "accept-", "grpc-", "mcp-"}

// reservedHeader reports a header name an api_key_header profile may not
// use, in any case (reservedHeaders, reservedPrefixes).
func reservedHeader(name string) bool {
	name = strings.TrimSpace(name)
	for _, h := range reservedHeaders {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	for _, p := range reservedPrefixes {
		if len(name) >= len(p) && strings.EqualFold(name[:len(p)], p) {
			return true
		}
	}
	return false
}

// validHeaderName reports an RFC 9110 token: what an HTTP header name may
// be.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// validHeaderValue reports a value without control characters (a line
// break would end the header).
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
