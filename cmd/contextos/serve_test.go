package main

import (
	"strings"
	"testing"
)

// serve refuses to start without exactly one authenticator (or
// --insecure-dev on loopback), with --insecure-dev elsewhere, with half a
// webhook, and with an authenticator it cannot build; the message names
// the flag and never the secret.
func TestServeFlags(t *testing.T) {
	dir := t.TempDir()
	_, base := serveFiles(t, dir)
	base = base[:len(base)-2] // without --auth-hs256
	short := writeFile(t, dir, "short.key", []byte("too-short-secret"))
	good := writeFile(t, dir, "good.key", []byte("a-long-enough-secret-a-long-enough-secret"))
	badJWKS := writeFile(t, dir, "jwks.json", []byte(`{"keys": [{"kty": "oct", "kid": "k", "k": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}]}`))
	whsec := writeFile(t, dir, "wh.secret", []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no authenticator", nil, "give an authenticator"},
		{"two authenticators", []string{"--auth-hs256", good, "--auth-jwks", badJWKS}, "give one of"},
		{"insecure dev with an authenticator", []string{"--auth-hs256", good, "--insecure-dev"}, "without an authenticator"},
		{"insecure dev on every address", []string{"--insecure-dev", "--addr", "0.0.0.0:0"}, "loopback"},
		{"short secret", []string{"--auth-hs256", short}, "at least 32 are required"},
		{"symmetric JWKS", []string{"--auth-jwks", badJWKS}, "public keys only"},
		{"missing secret file", []string{"--auth-hs256", dir + "/nope"}, "--auth-hs256"},
		{"OIDC without audience", []string{"--auth-oidc", "http://127.0.0.1:1"}, "audience"},
		{"webhook without secret", []string{"--auth-hs256", good, "--webhook", "https://hooks.example/x"}, "go together"},
		{"webhook secret not whsec", []string{"--auth-hs256", good, "--webhook", "https://hooks.example/x", "--webhook-secret", good}, "whsec_"},
		{"webhook not http", []string{"--auth-hs256", good, "--webhook", "ftp://hooks.example/x", "--webhook-secret", whsec}, "http or https"},
		{"no plan", []string{"--auth-hs256", good, "--plan", ""}, "--plan (or --planner)"},
		{"bad store", []string{"--auth-hs256", good, "--store", "mysql://x"}, "--store"},
		{"arguments", []string{"--auth-hs256", good, "extra"}, "takes no arguments"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append(append([]string{"serve"}, base...), c.args...)
			code, _, errs := runCLI(t, "", args...)
			if code != exitUsage || !strings.Contains(errs, c.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errs, c.want)
			}
			if strings.Contains(errs, "a-long-enough-secret") || strings.Contains(errs, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") {
				t.Error("stderr holds a secret")
			}
		})
	}
	if code, out, errs := runCLI(t, "", "serve", "-h"); code != exitOK || !strings.Contains(out+errs, "-auth-hs256") {
		t.Errorf("serve -h: %d %s%s", code, out, errs)
	}
}
