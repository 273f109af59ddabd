package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/contextos/contextos/server"
)

// endpoints are every authenticated route with a request that would
// otherwise reach its handler.
var endpoints = []struct{ method, path string }{
	{"POST", "/v1/runs"},
	{"GET", "/v1/runs/run_x"},
	{"GET", "/v1/runs/run_x/events"},
	{"GET", "/v1/approvals"},
	{"POST", "/v1/runs/run_x/approvals/GATE_FINANCE_APPROVAL"},
	{"GET", "/v1/records?run_id=run_x"},
	{"GET", "/v1/records/dr_x"},
	{"GET", "/v1/records/verify"},
}

// Every endpoint answers 401 without a token, with a token whose
// signature does not verify, with an expired token and with a token
// lacking the tenant claim; the problem names the claim or the rule and
// never echoes the token.
func TestEveryEndpointRefusesBadTokens(t *testing.T) {
	e := newEnv(t, nil)
	now := e.clock.Now()
	otherKey := []byte("another-secret-another-secret-another-secret")
	cases := []struct {
		name, tok, want string
	}{
		{"no token", "", "bearer token is required"},
		{"bad signature", token(t, otherKey, lead, now), "signature does not verify"},
		{"expired", signed(t, secret, map[string]any{"sub": lead.sub, "tenant_id": tenant, "roles": lead.roles, "exp": now.Add(-2 * time.Minute).Unix()}), `claim "exp"`},
		{"no exp", signed(t, secret, map[string]any{"sub": lead.sub, "tenant_id": tenant, "roles": lead.roles}), `claim "exp": is required`},
		{"no tenant", signed(t, secret, map[string]any{"sub": lead.sub, "roles": lead.roles, "exp": now.Add(time.Hour).Unix()}), `claim "tenant_id": is required`},
		{"no subject", signed(t, secret, map[string]any{"tenant_id": tenant, "exp": now.Add(time.Hour).Unix()}), `claim "sub": is required`},
		{"roles not a list", signed(t, secret, map[string]any{"sub": "x", "tenant_id": tenant, "roles": 7, "exp": now.Add(time.Hour).Unix()}), `claim "roles"`},
		{"not a JWT", "not-a-token", "compact JWS"},
		{"tampered", tamper(token(t, secret, agent, now)), "signature does not verify"},
	}
	for _, ep := range endpoints {
		for _, c := range cases {
			t.Run(ep.method+" "+ep.path+"/"+c.name, func(t *testing.T) {
				var body []byte
				if ep.method == "POST" {
					body = []byte(`{}`)
				}
				r := e.do(ep.method, ep.path, c.tok, body)
				m := r.problem(t, http.StatusUnauthorized, server.CodeUnauthenticated)
				if !strings.Contains(m["detail"].(string), c.want) {
					t.Errorf("detail %q, want it to say %q", m["detail"], c.want)
				}
				if c.tok != "" && strings.Contains(string(r.body), c.tok) {
					t.Error("the answer echoes the token")
				}
				if r.header.Get("WWW-Authenticate") == "" {
					t.Error("no WWW-Authenticate")
				}
			})
		}
	}
	// The health checks need no token.
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := e.do("GET", p, "", nil); r.status != http.StatusOK {
			t.Errorf("%s: %d %s", p, r.status, r.body)
		}
	}
}

// tamper changes the token's payload, keeping its signature.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	parts[1] = strings.TrimRight(parts[1], "A") + "B"
	return strings.Join(parts, ".")
}

// Without an authenticator every request is refused (readiness says
// why); insecure development reads unverified tokens from loopback only.
func TestNoAuthenticator(t *testing.T) {
	e := newEnv(t, &envOptions{noAuth: true})
	for _, ep := range endpoints {
		var body []byte
		if ep.method == "POST" {
			body = []byte(`{}`)
		}
		m := e.do(ep.method, ep.path, e.token(lead), body).problem(t, http.StatusUnauthorized, server.CodeUnauthenticated)
		if m["rule"] != server.RuleNoAuthConfig {
			t.Errorf("%s %s: rule %v", ep.method, ep.path, m["rule"])
		}
	}
	for _, p := range []string{"/inbox", "/inbox/runs/run_x"} {
		if r := e.do("GET", p, e.token(lead), nil); r.status != http.StatusUnauthorized {
			t.Errorf("%s: %d", p, r.status)
		}
	}
	e.do("GET", "/readyz", "", nil).problem(t, http.StatusServiceUnavailable, server.CodeUnavailable)
	if r := e.do("GET", "/healthz", "", nil); r.status != http.StatusOK {
		t.Errorf("healthz: %d", r.status)
	}

	dev := newEnv(t, &envOptions{handler: server.Options{InsecureDev: true}})
	unverified := token(t, []byte("whatever-key-whatever-key-whatever-key"), lead, dev.clock.Now())
	if r := dev.do("GET", "/v1/approvals", unverified, nil); r.status != http.StatusOK {
		t.Errorf("insecure dev from loopback: %d %s", r.status, r.body)
	}
	// The same request from another address is refused.
	req := httptest.NewRequest("GET", "/v1/approvals", nil)
	req.RemoteAddr = "192.0.2.7:4444"
	req.Header.Set("Authorization", "Bearer "+unverified)
	rec := httptest.NewRecorder()
	dev.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), server.RuleLoopbackOnly) {
		t.Errorf("insecure dev from 192.0.2.7: %d %s", rec.Code, rec.Body)
	}
	if _, err := server.New(dev.harness.Runtime, server.Stores{Checkpoints: dev.harness.Checkpoints, Records: dev.harness.Decisions},
		&server.Options{InsecureDev: true, Authenticator: authFunc{}}); !errors.Is(err, server.ErrConfig) {
		t.Errorf("InsecureDev with an authenticator: %v", err)
	}
}

// authFunc is an authenticator that authenticates nobody.
type authFunc struct{}

func (authFunc) Authenticate(context.Context, string) (*server.Principal, error) {
	return nil, server.ErrUnauthenticated
}

// The JWKS authenticator verifies RSA and EC tokens by kid, refuses a
// token signed with HS256 using the public key's bytes (algorithm
// confusion), an unknown kid, and a JWKS holding a private or symmetric
// key; iss and aud are checked when configured; claims are renamable.
func TestJWKSAuthenticator(t *testing.T) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &rk.PublicKey, KeyID: "rsa1", Algorithm: "RS256", Use: "sig"},
		{Key: &ek.PublicKey, KeyID: "ec1", Algorithm: "ES256", Use: "sig"},
	}}
	jwks, _ := json.Marshal(set)
	now := time.Unix(1_800_000_000, 0)
	a, err := server.NewJWKSAuthenticator(jwks, &server.JWTOptions{Issuer: "https://idp.example", Audience: "contextos", TenantClaim: "org", RolesClaim: "https://example.com/roles", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"sub": "alice", "org": "t1", "https://example.com/roles": []string{"finance_lead", "finance_lead", "auditor"}, "iss": "https://idp.example", "aud": []string{"contextos"}, "exp": now.Add(time.Hour).Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	sign := func(alg jose.SignatureAlgorithm, key any, kid string, c map[string]any) string {
		opts := (&jose.SignerOptions{}).WithHeader("kid", kid)
		sig, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
		if err != nil {
			t.Fatal(err)
		}
		s, err := jwt.Signed(sig).Claims(c).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	for name, tok := range map[string]string{"rsa": sign(jose.RS256, rk, "rsa1", claims(nil)), "ec": sign(jose.ES256, ek, "ec1", claims(nil))} {
		p, err := a.Authenticate(ctx, tok)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Subject != "alice" || p.TenantID != "t1" || strings.Join(p.Roles, ",") != "auditor,finance_lead" {
			t.Errorf("%s: principal %+v", name, p)
		}
	}
	pub, _ := json.Marshal(set.Keys[0])
	refused := map[string]string{
		"hs256 with the public key": sign(jose.HS256, pub, "rsa1", claims(nil)),
		"unknown kid":               sign(jose.RS256, rk, "rsa9", claims(nil)),
		"wrong key for kid":         sign(jose.ES256, ek, "rsa1", claims(nil)),
		"other issuer":              sign(jose.RS256, rk, "rsa1", claims(func(c map[string]any) { c["iss"] = "https://evil.example" })),
		"other audience":            sign(jose.RS256, rk, "rsa1", claims(func(c map[string]any) { c["aud"] = []string{"other"} })),
		"not yet valid":             sign(jose.RS256, rk, "rsa1", claims(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() })),
		"default tenant claim only": sign(jose.RS256, rk, "rsa1", claims(func(c map[string]any) { delete(c, "org"); c["tenant_id"] = "t1" })),
	}
	for name, tok := range refused {
		if _, err := a.Authenticate(ctx, tok); !errors.Is(err, server.ErrUnauthenticated) {
			t.Errorf("%s: %v, want ErrUnauthenticated", name, err)
		}
	}
	priv, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: rk, KeyID: "p"}}})
	oct, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "o"}}})
	for name, bad := range map[string][]byte{"private": priv, "symmetric": oct, "empty": []byte(`{"keys":[]}`), "not json": []byte(`nope`)} {
		if _, err := server.NewJWKSAuthenticator(bad, nil); !errors.Is(err, server.ErrConfig) {
			t.Errorf("JWKS %s: %v, want ErrConfig", name, err)
		}
	}
	if _, err := server.NewHS256Authenticator([]byte("short"), nil); !errors.Is(err, server.ErrConfig) {
		t.Errorf("short HS256 secret: %v", err)
	}
}

// The OIDC authenticator discovers the issuer's keys and verifies its
// tokens' signature, issuer, audience and expiry.
func TestOIDCAuthenticator(t *testing.T) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	var issuer string
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			json.NewEncoder(w).Encode(map[string]any{"issuer": issuer, "jwks_uri": issuer + "/keys", "authorization_endpoint": issuer + "/auth",
				"token_endpoint": issuer + "/token", "id_token_signing_alg_values_supported": []string{"RS256"}})
		case "/keys":
			json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &rk.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer idp.Close()
	issuer = idp.URL
	now := time.Now()
	ctx := context.Background()
	if _, err := server.NewOIDCAuthenticator(ctx, issuer, nil); !errors.Is(err, server.ErrConfig) {
		t.Errorf("OIDC without an audience: %v", err)
	}
	a, err := server.NewOIDCAuthenticator(ctx, issuer, &server.JWTOptions{Audience: "contextos-inbox"})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(c map[string]any) string {
		sig, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: rk}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
		s, _ := jwt.Signed(sig).Claims(c).Serialize()
		return s
	}
	good := map[string]any{"iss": issuer, "aud": "contextos-inbox", "sub": "bob", "tenant_id": "t2", "roles": "finance_lead auditor", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	p, err := a.Authenticate(ctx, sign(good))
	if err != nil || p.Subject != "bob" || p.TenantID != "t2" || strings.Join(p.Roles, ",") != "auditor,finance_lead" {
		t.Fatalf("good token: %+v %v", p, err)
	}
	for name, mod := range map[string]func(map[string]any){
		"other audience": func(c map[string]any) { c["aud"] = "other" },
		"other issuer":   func(c map[string]any) { c["iss"] = "https://evil.example" },
		"expired":        func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() },
	} {
		c := map[string]any{}
		for k, v := range good {
			c[k] = v
		}
		mod(c)
		if _, err := a.Authenticate(ctx, sign(c)); !errors.Is(err, server.ErrUnauthenticated) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
