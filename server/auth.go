package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Principal is an authenticated caller: the token's subject, its tenant
// and its roles. An approval is decided by the principal's subject
// holding the gate's role; nothing a request body says changes who that
// is.
type Principal struct {
	Subject  string   `json:"sub"`
	TenantID string   `json:"tenant_id"`
	Roles    []string `json:"roles"`
}

// HasRole reports whether p holds role.
func (p *Principal) HasRole(role string) bool { return role != "" && slices.Contains(p.Roles, role) }

// Authenticator turns a bearer token into the principal it names, or
// fails with an error wrapping ErrUnauthenticated. Implementations must
// be safe for concurrent use and honour ctx.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*Principal, error)
}

// ErrUnauthenticated reports a request without a valid bearer token.
var ErrUnauthenticated = errors.New("server: not authenticated")

// TokenError is why a token was refused: a token without a claim the
// handler reads, with a claim of the wrong type, expired, or with a
// signature that does not verify. Its message names the claim or the
// rule, never the token. It matches ErrUnauthenticated.
type TokenError struct {
	// Claim is the claim at fault ("sub", "exp", the tenant or roles
	// claim), or "" for the token as a whole (signature, format).
	Claim  string
	Reason string
}

func (e *TokenError) Error() string {
	if e.Claim == "" {
		return "server: bearer token refused: " + e.Reason
	}
	return fmt.Sprintf("server: bearer token refused: claim %q: %s", e.Claim, e.Reason)
}

// Unwrap returns ErrUnauthenticated.
func (e *TokenError) Unwrap() error { return ErrUnauthenticated }

// Default claim names.
const (
	DefaultTenantClaim = "tenant_id"
	DefaultRolesClaim  = "roles"
)

// JWTOptions tunes the JWT authenticators. The zero value reads sub,
// tenant_id and roles, checks no issuer or audience (NewOIDCAuthenticator
// requires an audience), allows one minute of clock skew, and reads the
// wall clock.
type JWTOptions struct {
	// TenantClaim and RolesClaim rename the tenant and roles claims
	// (top-level claim names, taken as they are: "https://example.com/roles"
	// is one name). Default: tenant_id and roles.
	TenantClaim, RolesClaim string
	// Issuer, when set, is the iss a token must carry.
	Issuer string
	// Audience, when set, is an audience a token's aud must contain.
	Audience string
	// Leeway is the clock skew allowed on exp, nbf and iat. Default: one
	// minute; negative: none.
	Leeway time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

func (o *JWTOptions) withDefaults() JWTOptions {
	var c JWTOptions
	if o != nil {
		c = *o
	}
	if c.TenantClaim == "" {
		c.TenantClaim = DefaultTenantClaim
	}
	if c.RolesClaim == "" {
		c.RolesClaim = DefaultRolesClaim
	}
	switch {
	case c.Leeway == 0:
		c.Leeway = time.Minute
	case c.Leeway < 0:
		c.Leeway = 0
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Limits of what a token may hold.
const (
	maxTokenBytes = 16 << 10
	maxClaimBytes = 256
	maxRoles      = 64
)

// asymmetricAlgs are the algorithms a JWKS or an OIDC issuer's keys may
// sign with: never "none" and never HMAC, whose key a public key set
// would hand to anyone.
var asymmetricAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512, jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

// jwtAuth verifies compact JWS tokens with a key (a JSON Web Key Set or an
// HMAC secret) and maps their claims.
type jwtAuth struct {
	opts JWTOptions
	algs []jose.SignatureAlgorithm
	key  any
}

// NewJWKSAuthenticator verifies tokens signed by a key of the JSON Web
// Key Set jwks (a JWKS file's content: public RSA, EC or Ed25519 keys,
// each with a kid the token's header names). Private and symmetric keys
// are refused, so a key set can be published.
func NewJWKSAuthenticator(jwks []byte, opts *JWTOptions) (Authenticator, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil {
		return nil, fmt.Errorf("%w: JWKS: not a JSON Web Key Set: %v", ErrConfig, err)
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("%w: JWKS: no keys", ErrConfig)
	}
	for i, k := range set.Keys {
		switch {
		case k.KeyID == "":
			return nil, fmt.Errorf("%w: JWKS: keys[%d] has no kid", ErrConfig, i)
		case !k.IsPublic():
			return nil, fmt.Errorf("%w: JWKS: keys[%d] (%s) is a private or symmetric key; a JWKS file holds public keys only", ErrConfig, i, clip(k.KeyID))
		case !k.Valid():
			return nil, fmt.Errorf("%w: JWKS: keys[%d] (%s) is not a valid key", ErrConfig, i, clip(k.KeyID))
		}
	}
	return &jwtAuth{opts: opts.withDefaults(), algs: asymmetricAlgs, key: set}, nil
}

// MinHS256SecretBytes is the shortest HS256 secret accepted (RFC 7518
// §3.2: a key of at least the hash's size).
const MinHS256SecretBytes = 32

// NewHS256Authenticator verifies tokens signed with HMAC-SHA256 under the
// shared secret (at least MinHS256SecretBytes bytes).
func NewHS256Authenticator(secret []byte, opts *JWTOptions) (Authenticator, error) {
	if len(secret) < MinHS256SecretBytes {
		return nil, fmt.Errorf("%w: HS256 secret: %d bytes; at least %d are required", ErrConfig, len(secret), MinHS256SecretBytes)
	}
	return &jwtAuth{opts: opts.withDefaults(), algs: []jose.SignatureAlgorithm{jose.HS256}, key: slices.Clone(secret)}, nil
}

func (a *jwtAuth) Authenticate(ctx context.Context, token string) (*Principal, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkTokenShape(token); err != nil {
		return nil, err
	}
	tok, err := jwt.ParseSigned(token, a.algs)
	if err != nil {
		return nil, &TokenError{Reason: "not a signed JWT with an accepted algorithm"}
	}
	var std jwt.Claims
	var all map[string]any
	if err := tok.Claims(a.key, &std, &all); err != nil {
		return nil, &TokenError{Reason: "the signature does not verify"}
	}
	if err := checkStandard(&std, a.opts); err != nil {
		return nil, err
	}
	return mapClaims(all, a.opts)
}

// checkTokenShape refuses what is not worth parsing.
func checkTokenShape(token string) error {
	switch {
	case token == "":
		return &TokenError{Reason: "no bearer token"}
	case len(token) > maxTokenBytes:
		return &TokenError{Reason: fmt.Sprintf("longer than %d bytes", maxTokenBytes)}
	case strings.Count(token, ".") != 2:
		return &TokenError{Reason: "not a compact JWS (three dot-separated parts)"}
	}
	return nil
}

// checkStandard checks exp (required), nbf, iat, iss and aud.
func checkStandard(std *jwt.Claims, o JWTOptions) error {
	if std.Expiry == nil {
		return &TokenError{Claim: "exp", Reason: "is required"}
	}
	err := std.ValidateWithLeeway(jwt.Expected{Issuer: o.Issuer, Time: o.Now()}, o.Leeway)
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return &TokenError{Claim: "exp", Reason: "the token has expired"}
	case errors.Is(err, jwt.ErrNotValidYet):
		return &TokenError{Claim: "nbf", Reason: "the token is not valid yet"}
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return &TokenError{Claim: "iat", Reason: "the token is issued in the future"}
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return &TokenError{Claim: "iss", Reason: "not the configured issuer"}
	case err != nil:
		return &TokenError{Reason: "its registered claims do not validate"}
	}
	if o.Audience != "" && !std.Audience.Contains(o.Audience) {
		return &TokenError{Claim: "aud", Reason: "does not contain the configured audience"}
	}
	return nil
}

// mapClaims reads sub, the tenant claim and the roles claim.
func mapClaims(all map[string]any, o JWTOptions) (*Principal, error) {
	str := func(name string) (string, error) {
		v, ok := all[name]
		if !ok {
			return "", &TokenError{Claim: name, Reason: "is required"}
		}
		s, ok := v.(string)
		switch {
		case !ok:
			return "", &TokenError{Claim: name, Reason: "is not a string"}
		case strings.TrimSpace(s) == "":
			return "", &TokenError{Claim: name, Reason: "is empty"}
		case len(s) > maxClaimBytes || !utf8.ValidString(s):
			return "", &TokenError{Claim: name, Reason: fmt.Sprintf("is not valid UTF-8 of at most %d bytes", maxClaimBytes)}
		}
		return s, nil
	}
	p := &Principal{Roles: []string{}}
	var err error
	if p.Subject, err = str("sub"); err != nil {
		return nil, err
	}
	if p.TenantID, err = str(o.TenantClaim); err != nil {
		return nil, err
	}
	switch v := all[o.RolesClaim].(type) {
	case nil:
	case string:
		// One role, or a space-separated list (as scope is).
		p.Roles = strings.Fields(v)
	case []any:
		for _, r := range v {
			s, ok := r.(string)
			if !ok || s == "" || len(s) > maxClaimBytes || !utf8.ValidString(s) {
				return nil, &TokenError{Claim: o.RolesClaim, Reason: "must be a list of non-empty strings"}
			}
			p.Roles = append(p.Roles, s)
		}
	default:
		return nil, &TokenError{Claim: o.RolesClaim, Reason: "must be a list of strings"}
	}
	if len(p.Roles) > maxRoles {
		return nil, &TokenError{Claim: o.RolesClaim, Reason: fmt.Sprintf("more than %d roles", maxRoles)}
	}
	slices.Sort(p.Roles)
	p.Roles = slices.Compact(p.Roles)
	return p, nil
}

// oidcAuth verifies tokens an OpenID Connect issuer signed.
type oidcAuth struct {
	opts     JWTOptions
	verifier *oidc.IDTokenVerifier
}

// NewOIDCAuthenticator verifies tokens the OpenID Connect issuer signed,
// with the keys its discovery document names (fetched now, and again when
// a token names a key not seen yet). The issuer, audience (required:
// opts.Audience, the client id the SSO proxy signs in with) and expiry
// are checked. ctx bounds the discovery request only.
func NewOIDCAuthenticator(ctx context.Context, issuer string, opts *JWTOptions) (Authenticator, error) {
	o := opts.withDefaults()
	if o.Audience == "" {
		return nil, fmt.Errorf("%w: an OIDC issuer needs an audience (the client id its tokens are issued to)", ErrConfig)
	}
	if o.Issuer != "" && o.Issuer != issuer {
		return nil, fmt.Errorf("%w: JWTOptions.Issuer differs from the OIDC issuer", ErrConfig)
	}
	p, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: OIDC issuer: %v", ErrConfig, err)
	}
	now := o.Now
	leeway := o.Leeway
	v := p.VerifierContext(context.WithoutCancel(ctx), &oidc.Config{ClientID: o.Audience, SupportedSigningAlgs: algNames(asymmetricAlgs),
		// go-oidc allows no skew: the clock it reads is moved back by the
		// leeway, so a token is accepted up to Leeway past its expiry.
		Now: func() time.Time { return now().Add(-leeway) }})
	return &oidcAuth{opts: o, verifier: v}, nil
}

func algNames(algs []jose.SignatureAlgorithm) []string {
	out := make([]string, len(algs))
	for i, a := range algs {
		out[i] = string(a)
	}
	return out
}

func (a *oidcAuth) Authenticate(ctx context.Context, token string) (*Principal, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkTokenShape(token); err != nil {
		return nil, err
	}
	tok, err := a.verifier.Verify(ctx, token)
	if err != nil {
		var expired *oidc.TokenExpiredError
		if errors.As(err, &expired) {
			return nil, &TokenError{Claim: "exp", Reason: "the token has expired"}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &TokenError{Reason: "not verified by the OIDC issuer (signature, issuer or audience)"}
	}
	var all map[string]any
	if err := tok.Claims(&all); err != nil {
		return nil, &TokenError{Reason: "its claims are not a JSON object"}
	}
	return mapClaims(all, a.opts)
}

// devAuth is the authenticator of an insecure development handler: it
// reads a token's claims without verifying its signature.
type devAuth struct{ opts JWTOptions }

func (a *devAuth) Authenticate(ctx context.Context, token string) (*Principal, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkTokenShape(token); err != nil {
		return nil, err
	}
	tok, err := jwt.ParseSigned(token, append(slices.Clone(asymmetricAlgs), jose.HS256, jose.HS384, jose.HS512))
	if err != nil {
		return nil, &TokenError{Reason: "not a JWT"}
	}
	var std jwt.Claims
	var all map[string]any
	if err := tok.UnsafeClaimsWithoutVerification(&std, &all); err != nil {
		return nil, &TokenError{Reason: "its claims are not a JSON object"}
	}
	if std.Expiry != nil {
		if err := checkStandard(&std, a.opts); err != nil {
			return nil, err
		}
	}
	return mapClaims(all, a.opts)
}

// bearer returns the token of an "Authorization: Bearer" header, "" when
// there is none.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// isLoopback reports whether addr (host:port, as RemoteAddr) is a
// loopback address.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
