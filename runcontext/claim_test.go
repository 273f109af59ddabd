package runcontext

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

var (
	testNow  = time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)
	testSeed = [32]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}
	testKey  = ed25519.NewKeyFromSeed(testSeed[:])
)

const testKid = "kid_ctxos_support_2026_05"

// validClaim returns a claim for rc signed with testKey.
func validClaim(rc *RunContext) *IdentityClaim {
	c := &IdentityClaim{
		Iss: "https://id.contextos.example", Sub: rc.Agent.AgentURN, RunID: rc.RunID, SessionID: rc.SessionID,
		TenantID: rc.TenantID, PrincipalChain: rc.PrincipalChain(), Scopes: []string{"tools:read", "tools:write"},
		Nbf: testNow.Add(-time.Minute).Unix(), Exp: testNow.Add(5 * time.Minute).Unix(),
	}
	if err := SignClaim(c, testKid, testKey); err != nil {
		panic(err)
	}
	return c
}

func testKeys() *StaticKeys {
	return NewStaticKeys(map[string]ed25519.PublicKey{testKid: testKey.Public().(ed25519.PublicKey)})
}

func TestClaimSignVerify(t *testing.T) {
	rc := fixtureRunContext(t)
	rc.Agent.IdentityClaim = validClaim(rc)
	if err := rc.Validate(); err != nil {
		t.Fatalf("signed claim makes the run context invalid: %v", err)
	}
	if err := VerifyRunClaim(context.Background(), rc, testKeys(), testNow, 0); err != nil {
		t.Fatalf("VerifyRunClaim = %v", err)
	}
	c := rc.Agent.IdentityClaim
	if c.Version != ClaimVersion || c.Kid != testKid {
		t.Errorf("SignClaim did not set version/kid: %+v", c)
	}
	h, _ := ClaimHash(c)
	if h != c.ClaimHash {
		t.Errorf("ClaimHash = %s, claim carries %s", h, c.ClaimHash)
	}
	// Signing is deterministic (Ed25519) and the hash independent of field order in JSON.
	c2 := validClaim(rc)
	if c2.Sig != c.Sig || c2.ClaimHash != c.ClaimHash {
		t.Error("signing the same claim twice gave different results")
	}
}

func TestClaimVerifyFailures(t *testing.T) {
	t.Parallel()
	other := ed25519.NewKeyFromSeed(make([]byte, 32))
	tests := []struct {
		name   string
		mutate func(c *IdentityClaim, want *ClaimExpectations)
		field  string
		reason string
	}{
		{"version", func(c *IdentityClaim, _ *ClaimExpectations) { c.Version = "ctxid/2" }, "version", reasonVersion},
		{"tampered scope", func(c *IdentityClaim, _ *ClaimExpectations) { c.Scopes = append(c.Scopes, "payments.admin") }, "claim_hash", reasonHash},
		{"tampered hash", func(c *IdentityClaim, _ *ClaimExpectations) {
			c.Scopes = append(c.Scopes, "payments.admin")
			c.ClaimHash, _ = ClaimHash(c)
		}, "sig", reasonSignature},
		{"missing sig", func(c *IdentityClaim, _ *ClaimExpectations) { c.Sig = "" }, "sig", reasonSignature},
		{"garbage sig", func(c *IdentityClaim, _ *ClaimExpectations) { c.Sig = "!!!" }, "sig", reasonSignature},
		{"wrong key", func(c *IdentityClaim, _ *ClaimExpectations) { _ = SignClaim(c, testKid, other) }, "sig", reasonSignature},
		{"unknown kid", func(c *IdentityClaim, _ *ClaimExpectations) { _ = SignClaim(c, "kid_other", testKey) }, "kid", reasonUnknownKey},
		{"not yet valid", func(_ *IdentityClaim, w *ClaimExpectations) { w.Now = testNow.Add(-2 * time.Minute) }, "nbf", reasonNotYetValid},
		{"expired", func(_ *IdentityClaim, w *ClaimExpectations) { w.Now = testNow.Add(5 * time.Minute) }, "exp", reasonExpired},
		{"sub", func(_ *IdentityClaim, w *ClaimExpectations) { w.AgentURN = "agent:contextos/other@1.0.0" }, "sub", reasonMismatch},
		{"run", func(_ *IdentityClaim, w *ClaimExpectations) { w.RunID = "run_other" }, "run_id", reasonMismatch},
		{"tenant", func(_ *IdentityClaim, w *ClaimExpectations) { w.TenantID = "tenant_other" }, "tenant_id", reasonMismatch},
		{"session", func(_ *IdentityClaim, w *ClaimExpectations) { w.SessionID = "sess_other" }, "session_id", reasonMismatch},
		{"audience", func(_ *IdentityClaim, w *ClaimExpectations) { w.Audience = "tool-gateway" }, "aud", reasonMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rc := fixtureRunContext(t)
			c := validClaim(rc)
			want := ClaimExpectations{Now: testNow, RunID: rc.RunID, TenantID: rc.TenantID, AgentURN: rc.Agent.AgentURN, SessionID: rc.SessionID}
			tc.mutate(c, &want)
			err := VerifyClaim(context.Background(), c, testKeys(), want)
			var ce *ClaimError
			if !errors.As(err, &ce) || !errors.Is(err, ErrClaim) {
				t.Fatalf("VerifyClaim = %v, want *ClaimError", err)
			}
			if ce.Field != tc.field || ce.Reason != tc.reason {
				t.Errorf("VerifyClaim = %s/%s, want %s/%s", ce.Field, ce.Reason, tc.field, tc.reason)
			}
			if strings.Contains(err.Error(), c.Sig) && c.Sig != "" {
				t.Errorf("error echoes the signature: %v", err)
			}
		})
	}
	// Leeway tolerates skew.
	rc := fixtureRunContext(t)
	c := validClaim(rc)
	if err := VerifyClaim(context.Background(), c, testKeys(), ClaimExpectations{Now: testNow.Add(5*time.Minute + 10*time.Second), RunID: rc.RunID, TenantID: rc.TenantID, AgentURN: rc.Agent.AgentURN, SessionID: rc.SessionID, Leeway: 30 * time.Second}); err != nil {
		t.Errorf("leeway not applied: %v", err)
	}
	if err := VerifyClaim(context.Background(), nil, testKeys(), ClaimExpectations{}); !errors.Is(err, ErrClaim) {
		t.Errorf("nil claim: %v", err)
	}
	if err := VerifyClaim(context.Background(), c, nil, ClaimExpectations{}); !errors.Is(err, ErrClaim) {
		t.Errorf("nil resolver: %v", err)
	}
	if err := SignClaim(&IdentityClaim{}, "k", ed25519.PrivateKey{1}); !errors.Is(err, ErrClaim) {
		t.Errorf("short key: %v", err)
	}
	// A resolver failure that is not an unknown kid is passed on, not turned into a rejection.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := VerifyRunClaim(ctx, withClaim(rc, c), testKeys(), testNow, 0); !errors.Is(err, context.Canceled) || errors.Is(err, ErrClaim) {
		t.Errorf("cancelled resolver: %v", err)
	}
}

func withClaim(rc *RunContext, c *IdentityClaim) *RunContext {
	rc.Agent.IdentityClaim = c
	return rc
}

// Audit output carries the claim hash, never token references or the signature.
func TestForAudit(t *testing.T) {
	rc := fixtureRunContext(t)
	rc.Agent.IdentityClaim = validClaim(rc)
	a := rc.ForAudit()
	b, _ := json.Marshal(a)
	for _, secret := range []string{"tok_user_7a", "tok_agent_92", rc.Agent.IdentityClaim.Sig} {
		if strings.Contains(string(b), secret) {
			t.Errorf("audit view contains %q: %s", secret, b)
		}
	}
	if !strings.Contains(string(b), rc.Agent.IdentityClaim.ClaimHash) {
		t.Error("audit view lost the claim hash")
	}
	if got := rc.AuthRef(); got != "claim_hash:"+rc.Agent.IdentityClaim.ClaimHash {
		t.Errorf("AuthRef = %q", got)
	}
	if rc.Agent.TokenRef != "tok_agent_92" {
		t.Error("ForAudit modified its receiver")
	}
	if (&RunContext{}).AuthRef() != "" {
		t.Error("AuthRef without claim should be empty")
	}
}

func TestStaticKeys(t *testing.T) {
	s := &StaticKeys{}
	if _, err := s.PublicKey(context.Background(), "k"); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("empty resolver: %v", err)
	}
	pub := testKey.Public().(ed25519.PublicKey)
	s.Add("k", pub)
	got, err := s.PublicKey(context.Background(), "k")
	if err != nil || !got.Equal(pub) {
		t.Errorf("PublicKey = %v, %v", got, err)
	}
	got[0] ^= 0xff // callers cannot corrupt the stored key
	again, _ := s.PublicKey(context.Background(), "k")
	if !again.Equal(pub) {
		t.Error("stored key was modified through a returned slice")
	}
}
