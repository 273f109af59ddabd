package transport_test

import (
	"context"
	"encoding/base64"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/grpctransport"
	"github.com/contextos/contextos/transport/mcptransport"
)

func TestAuthProfiles(t *testing.T) {
	t.Parallel()
	secrets := transport.MapSecrets{"payments-token": "tok1", "search-key": "k-123", "svc": "user:pa:ss", "prod/db:password": "nsval", "nocolon": "justuser"}
	cases := []struct {
		name, header, want string
		auth               *transport.Auth
		code               string
	}{
		{"no auth", "Authorization", "", nil, ""},
		{"bearer", "Authorization", "Bearer tok1", &transport.Auth{Profile: "bearer", SecretRef: "payments-token"}, ""},
		{"bearer by default", "Authorization", "Bearer tok1", &transport.Auth{SecretRef: "payments-token"}, ""},
		{"api key header", "X-Api-Key", "k-123", &transport.Auth{Profile: "api_key_header", SecretRef: "search-key", HeaderName: "X-Api-Key"}, ""},
		{"basic", "Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("user:pa:ss")), &transport.Auth{Profile: "basic", SecretRef: "svc"}, ""},
		{"namespaced key", "Authorization", "Bearer nsval", &transport.Auth{SecretRef: "prod/db:password"}, ""},
		{"basic without colon", "", "", &transport.Auth{Profile: "basic", SecretRef: "nocolon"}, gateway.CodeRuntimePolicyInvalid},
		{"missing secret", "", "", &transport.Auth{SecretRef: "nope"}, gateway.CodeSecretResolutionFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ts := newToolServer(t, echoEnvelope)
			_, err := newAdapter(t, transport.Endpoint{Transport: "external", URL: ts.URL, Auth: c.auth}, &transport.Options{Secrets: secrets}).Call(bg, call(1))
			if c.code != "" {
				te := toolErr(t, err)
				if te.Code != c.code || te.Retryable || len(ts.requests()) != 0 {
					t.Fatalf("%+v (requests %d)", te, len(ts.requests()))
				}
				if c.code == gateway.CodeSecretResolutionFailed && te.Details["secret_ref"] != "nope" {
					t.Fatalf("details %v", te.Details)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ts.requests()[0].Header.Get(c.header); c.header != "" && got != c.want {
				t.Fatalf("%s = %q, want %q", c.header, got, c.want)
			}
		})
	}
	t.Run("no resolver", func(t *testing.T) {
		ts := newToolServer(t, echoEnvelope)
		_, err := newAdapter(t, transport.Endpoint{Transport: "external", URL: ts.URL, Auth: &transport.Auth{SecretRef: "x"}}, nil).Call(bg, call(1))
		if te := toolErr(t, err); te.Code != gateway.CodeSecretResolutionFailed || te.Retryable {
			t.Fatalf("%+v", te)
		}
	})
}

// rotating resolves a secret whose value changes between calls.
type rotating struct{ v atomic.Value }

func (r *rotating) Resolve(context.Context, transport.SecretRef) (string, error) {
	return r.v.Load().(string), nil
}

func TestSecretRotationTakesEffectOnTheNextCall(t *testing.T) {
	ts := newToolServer(t, echoEnvelope)
	rot := &rotating{}
	rot.v.Store("old")
	a := newAdapter(t, transport.Endpoint{Transport: "external", URL: ts.URL, Auth: &transport.Auth{SecretRef: "t"}}, &transport.Options{Secrets: rot})
	a.Call(bg, call(1))
	rot.v.Store("new")
	a.Call(bg, call(1))
	reqs := ts.requests()
	if reqs[0].Header.Get("Authorization") != "Bearer old" || reqs[1].Header.Get("Authorization") != "Bearer new" {
		t.Fatalf("%q then %q", reqs[0].Header.Get("Authorization"), reqs[1].Header.Get("Authorization"))
	}
}

func TestParseSecretRef(t *testing.T) {
	for in, want := range map[string]transport.SecretRef{
		"tok": {Name: "tok", Key: "value"}, "tok:client_id": {Name: "tok", Key: "client_id"}, "prod/tok:k": {Namespace: "prod", Name: "tok", Key: "k"},
	} {
		if got, err := transport.ParseSecretRef(in); err != nil || got != want {
			t.Errorf("%q → %+v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "/x", "a/b/c", ":k"} {
		if _, err := transport.ParseSecretRef(bad); !errors.Is(err, transport.ErrConfig) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// tokenServer is an OAuth2 token endpoint that counts exchanges and issues
// tok-1, tok-2, ….
type tokenServer struct {
	*httptest.Server
	n         atomic.Int32
	expiresIn int
}

func newTokenServer(t *testing.T, expiresIn int) *tokenServer {
	s := &tokenServer{expiresIn: expiresIn}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		if r.PostForm.Get("grant_type") != "client_credentials" || id != "app" || secret != "app-secret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		n := s.n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"access_token":"tok-` + string(rune('0'+n)) + `","token_type":"bearer","expires_in":` + strconv.Itoa(s.expiresIn) + `}`))
	}))
	t.Cleanup(s.Close)
	return s
}

func oauthSecrets() transport.MapSecrets {
	return transport.MapSecrets{"oauth-app:client_id": "app", "oauth-app:client_secret": "app-secret"}
}

func TestOAuth2CachesTokensUntilExpiryMinusMargin(t *testing.T) {
	tok := newTokenServer(t, 120)
	ts := newToolServer(t, echoEnvelope)
	var mu sync.Mutex
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	cache := &transport.TokenCache{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	a := newAdapter(t, transport.Endpoint{Transport: "external", URL: ts.URL, Auth: &transport.Auth{Profile: "oauth2_client_credentials", SecretRef: "oauth-app", TokenURL: tok.URL, Scopes: []string{"payments.refund"}}},
		&transport.Options{Secrets: oauthSecrets(), Tokens: cache})
	for i := 0; i < 3; i++ {
		if _, err := a.Call(bg, call(1)); err != nil {
			t.Fatal(err)
		}
	}
	if tok.n.Load() != 1 {
		t.Fatalf("%d exchanges for three calls, want 1", tok.n.Load())
	}
	mu.Lock()
	now = now.Add(89 * time.Second) // 120 s − 30 s margin = 90 s
	mu.Unlock()
	a.Call(bg, call(1))
	if tok.n.Load() != 1 {
		t.Fatal("the token was renewed before expires_in − 30 s")
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	a.Call(bg, call(1))
	if tok.n.Load() != 2 {
		t.Fatalf("%d exchanges after expiry, want 2", tok.n.Load())
	}
	reqs := ts.requests()
	if reqs[0].Header.Get("Authorization") != "Bearer tok-1" || reqs[len(reqs)-1].Header.Get("Authorization") != "Bearer tok-2" {
		t.Fatalf("tokens %q … %q", reqs[0].Header.Get("Authorization"), reqs[len(reqs)-1].Header.Get("Authorization"))
	}
}

func TestOAuth2401EvictsAndRetriesOnce(t *testing.T) {
	tok := newTokenServer(t, 3600)
	// The tool accepts only tok-2: the first (cached) token was revoked.
	ts := newToolServer(t, func(n int, r *http.Request, body []byte) (int, string) {
		if r.Header.Get("Authorization") != "Bearer tok-2" {
			return 401, `{"error":"token revoked"}`
		}
		return echoEnvelope(n, r, body)
	})
	cache := &transport.TokenCache{}
	if _, _, err := transport.CacheToken(cache, bg, tok.URL, "app", "app-secret", nil); err != nil { // tok-1, cached
		t.Fatal(err)
	}
	a := newAdapter(t, transport.Endpoint{Transport: "external", URL: ts.URL, Auth: &transport.Auth{Profile: "oauth2_client_credentials", SecretRef: "oauth-app", TokenURL: tok.URL}},
		&transport.Options{Secrets: oauthSecrets(), Tokens: cache})
	if _, err := a.Call(bg, call(1)); err != nil {
		t.Fatal(err)
	}
	reqs := ts.requests()
	if tok.n.Load() != 2 || len(reqs) != 2 || reqs[0].Header.Get("Idempotency-Key") != reqs[1].Header.Get("Idempotency-Key") {
		t.Fatalf("exchanges %d, tool requests %d", tok.n.Load(), len(reqs))
	}
	// A tool that refuses every token: a fresh token's refusal is final at
	// once; a cached one's gets one retry, then auth_invalid.
	tok2 := newTokenServer(t, 3600)
	never := newToolServer(t, func(int, *http.Request, []byte) (int, string) { return 401, `` })
	b := newAdapter(t, transport.Endpoint{Transport: "external", URL: never.URL, Auth: &transport.Auth{Profile: "oauth2_client_credentials", SecretRef: "oauth-app", TokenURL: tok2.URL}},
		&transport.Options{Secrets: oauthSecrets(), Tokens: &transport.TokenCache{}})
	_, err := b.Call(bg, call(1)) // fresh tok-1: refused, no retry
	if te := toolErr(t, err); te.Code != gateway.CodeAuthInvalid || len(never.requests()) != 1 {
		t.Fatalf("%+v after %d requests", te, len(never.requests()))
	}
	_, err = b.Call(bg, call(1)) // cached tok-1: refused, evicted, tok-2 refused
	te := toolErr(t, err)
	if te.Code != gateway.CodeAuthInvalid || te.Retryable || len(never.requests()) != 3 || tok2.n.Load() != 2 {
		t.Fatalf("%+v after %d requests", te, len(never.requests()))
	}
}

func TestOAuth2ExchangeFailure(t *testing.T) {
	tok := newTokenServer(t, 3600)
	ts := newToolServer(t, echoEnvelope)
	a := newAdapter(t, transport.Endpoint{Transport: "external", URL: ts.URL, Auth: &transport.Auth{Profile: "oauth2_client_credentials", SecretRef: "oauth-app", TokenURL: tok.URL}},
		&transport.Options{Secrets: transport.MapSecrets{"oauth-app:client_id": "app", "oauth-app:client_secret": "wrong"}, Tokens: &transport.TokenCache{}})
	_, err := a.Call(bg, call(1))
	te := toolErr(t, err)
	if te.Code != gateway.CodeSecretResolutionFailed || !te.Retryable || te.Details["token_url"] != tok.URL || strings.Contains(te.Message, "wrong") {
		t.Fatalf("%+v", te)
	}
	if len(ts.requests()) != 0 {
		t.Fatal("the tool was called without a token")
	}
}

func TestOAuth2ConcurrentMissesExchangeOnce(t *testing.T) {
	release := make(chan struct{})
	var n atomic.Int32
	tok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		<-release
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"access_token":"tok","token_type":"bearer","expires_in":3600}`))
	}))
	defer tok.Close()
	cache := &transport.TokenCache{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := transport.CacheToken(cache, bg, tok.URL, "app", "s", nil); err != nil {
				t.Error(err)
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if n.Load() != 1 {
		t.Fatalf("%d exchanges for concurrent misses, want 1", n.Load())
	}
}

// Two endpoints of one OAuth2 client that differ only in their scopes get
// a token each; the same scope set (in any order, repeated) shares one.
func TestOAuth2TokensAreCachedPerScopeSet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		a, b      []string
		exchanges int32
	}{
		{"different scopes", []string{"payments.refund"}, []string{"payments.read"}, 2},
		{"one scope and none", []string{"payments.refund"}, nil, 2},
		{"a subset", []string{"payments.refund", "payments.read"}, []string{"payments.read"}, 2},
		{"same scopes", []string{"payments.refund"}, []string{"payments.refund"}, 1},
		{"same set, other order, repeated", []string{"payments.refund", "payments.read"}, []string{"payments.read", "payments.refund", "payments.read"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tok := newTokenServer(t, 3600)
			ts := newToolServer(t, echoEnvelope)
			cache := &transport.TokenCache{}
			opts := &transport.Options{Secrets: oauthSecrets(), Tokens: cache}
			ep := func(s []string) transport.Endpoint {
				return transport.Endpoint{Transport: "external", URL: ts.URL, Auth: &transport.Auth{Profile: "oauth2_client_credentials", SecretRef: "oauth-app", TokenURL: tok.URL, Scopes: s}}
			}
			a, b := newAdapter(t, ep(tc.a), opts), newAdapter(t, ep(tc.b), opts)
			for range 2 {
				for _, ad := range []*transport.Adapter{a, b} {
					if _, err := ad.Call(bg, call(1)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := tok.n.Load(); got != tc.exchanges {
				t.Fatalf("%d token requests, want %d", got, tc.exchanges)
			}
			reqs := ts.requests()
			if tc.exchanges == 2 && reqs[0].Header.Get("Authorization") == reqs[1].Header.Get("Authorization") {
				t.Fatal("two scope sets were sent one token")
			}
		})
	}
}

// A webhook poll refused with 401 under a cached OAuth2 token evicts it
// and polls again with a fresh one: the job is not submitted again.
func TestOAuth2WebhookPoll401DoesNotResubmit(t *testing.T) {
	tok := newTokenServer(t, 3600)
	ts := newToolServer(t, func(n int, r *http.Request, _ []byte) (int, string) {
		switch {
		case r.Method == http.MethodPost:
			return 202, ``
		case r.Header.Get("Authorization") != "Bearer tok-2":
			return 401, ``
		}
		return 200, `{"status":"ok","output":{"done":true}}`
	})
	cache := &transport.TokenCache{}
	if _, _, err := transport.CacheToken(cache, bg, tok.URL, "app", "app-secret", nil); err != nil { // tok-1, cached, revoked by the tool
		t.Fatal(err)
	}
	a := newAdapter(t, transport.Endpoint{Transport: "webhook", URL: ts.URL, PollInterval: time.Millisecond,
		Auth: &transport.Auth{Profile: "oauth2_client_credentials", SecretRef: "oauth-app", TokenURL: tok.URL}},
		&transport.Options{Secrets: oauthSecrets(), Tokens: cache})
	out, err := a.Call(bg, call(1))
	if err != nil || out.Output["done"] != true {
		t.Fatalf("%v %v", out, err)
	}
	posts := 0
	for _, r := range ts.requests() {
		if r.Method == http.MethodPost {
			posts++
		}
	}
	if posts != 1 || tok.n.Load() != 2 {
		t.Fatalf("%d POSTs, %d token exchanges; want 1 and 2", posts, tok.n.Load())
	}
}

// Adapters share OAuth2 tokens only through a cache the host passes them:
// with Options.Tokens unset each adapter keeps its own (no package state
// joins them), with one cache passed to both they make one exchange.
func TestOAuth2TokenCacheIsPerAdapterUnlessShared(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		tokens    func() *transport.TokenCache // per adapter
		exchanges int32
	}{
		{"unset: one cache per adapter", func() *transport.TokenCache { return nil }, 2},
		{"shared by the host", func() func() *transport.TokenCache {
			shared := &transport.TokenCache{}
			return func() *transport.TokenCache { return shared }
		}(), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tok := newTokenServer(t, 3600)
			ts := newToolServer(t, echoEnvelope)
			ep := transport.Endpoint{Transport: "external", URL: ts.URL, Auth: &transport.Auth{Profile: "oauth2_client_credentials", SecretRef: "oauth-app", TokenURL: tok.URL}}
			for range 2 {
				a := newAdapter(t, ep, &transport.Options{Secrets: oauthSecrets(), Tokens: c.tokens()})
				for range 2 {
					if _, err := a.Call(bg, call(1)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := tok.n.Load(); got != c.exchanges {
				t.Errorf("%d token exchanges for two adapters of two calls each, want %d", got, c.exchanges)
			}
		})
	}
}

// An api_key_header profile cannot name a header HTTP or the transports
// own, in any case: every transport refuses it when built, with a
// *ConfigError naming auth.header_name (ErrConfig, ErrReservedHeader);
// ordinary key headers are accepted. An endpoint whose Auth is changed to
// one after it was built is refused at the call, before anything is sent.
func TestAPIKeyHeaderCannotNameAReservedHeader(t *testing.T) {
	t.Parallel()
	reserved := []string{"Host", "host", "HOST", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "TE", "te", "Trailer",
		"Keep-Alive", "Proxy-Authorization", "proxy-connection", "Proxy-Anything", "Content-Type", "content-encoding", "Expect",
		"Accept", "Accept-Encoding", "Range", "Via", "Max-Forwards", "HTTP2-Settings", "Idempotency-Key", "X-Tool-Name", "x-tool-attempt",
		"X-Tool-Contract-Version", "X-Request-Id", "Traceparent", "tracestate", "Baggage", "Grpc-Timeout", "grpc-encoding",
		"Mcp-Session-Id", "Last-Event-ID"}
	build := map[string]func(ep transport.Endpoint) error{
		"external": func(ep transport.Endpoint) error { _, err := transport.NewAdapter(ep, nil); return err },
		"http": func(ep transport.Endpoint) error {
			ep.Transport = "http"
			_, err := transport.NewAdapter(ep, nil)
			return err
		},
		"webhook": func(ep transport.Endpoint) error {
			ep.Transport = "webhook"
			_, err := transport.NewAdapter(ep, nil)
			return err
		},
		"grpc": func(ep transport.Endpoint) error {
			ep.Transport, ep.URL = "grpc", "grpcs://tools.example.com:443"
			a, err := grpctransport.New(ep, nil)
			if err == nil {
				a.Close()
			}
			return err
		},
		"mcp": func(ep transport.Endpoint) error {
			ep.Transport = "mcp"
			ctx, cancel := context.WithCancel(bg)
			cancel() // a configuration that passes would not connect
			a, err := mcptransport.Connect(ctx, ep, nil)
			if err == nil {
				a.Close()
			}
			if err != nil && !errors.Is(err, transport.ErrConfig) {
				return nil // got past the configuration checks
			}
			return err
		},
	}
	for _, tr := range slices.Sorted(maps.Keys(build)) {
		for _, h := range reserved {
			t.Run(tr+"/"+h, func(t *testing.T) {
				t.Parallel()
				err := build[tr](transport.Endpoint{Transport: "external", URL: "https://tools.example.com/x",
					Auth: &transport.Auth{Profile: "api_key_header", SecretRef: "search-key", HeaderName: h}})
				var ce *transport.ConfigError
				if !errors.Is(err, transport.ErrConfig) || !errors.Is(err, transport.ErrReservedHeader) || !errors.As(err, &ce) || ce.Field != "auth.header_name" {
					t.Fatalf("got %v, want a ConfigError on auth.header_name matching ErrReservedHeader", err)
				}
			})
		}
		for _, h := range []string{"X-Api-Key", "Authorization", "api-key", "X-Tool-Key", "Hosts", "Contents", "Proxy"} {
			t.Run(tr+"/accepts "+h, func(t *testing.T) {
				t.Parallel()
				err := build[tr](transport.Endpoint{Transport: "external", URL: "https://tools.example.com/x",
					Auth: &transport.Auth{Profile: "api_key_header", SecretRef: "search-key", HeaderName: h}})
				if err != nil {
					t.Fatalf("%s refused: %v", h, err)
				}
			})
		}
	}

	t.Run("changed after the adapter was built", func(t *testing.T) {
		t.Parallel()
		ts := newToolServer(t, echoEnvelope)
		auth := &transport.Auth{Profile: "api_key_header", SecretRef: "search-key", HeaderName: "X-Api-Key"}
		a := newAdapter(t, transport.Endpoint{Transport: "external", URL: ts.URL, Auth: auth}, &transport.Options{Secrets: transport.MapSecrets{"search-key": "k-123"}})
		auth.HeaderName = "Transfer-Encoding"
		_, err := a.Call(bg, call(1))
		if te := toolErr(t, err); te.Code != gateway.CodeRuntimePolicyInvalid || te.Retryable || te.Details["field"] != "auth.header_name" || len(ts.requests()) != 0 {
			t.Fatalf("%+v (requests %d)", te, len(ts.requests()))
		}
	})
}
