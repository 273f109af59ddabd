package runcontext

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"
)

// shortKeys resolves every kid to a key too short to be Ed25519.
type shortKeys struct{}

func (shortKeys) PublicKey(context.Context, string) (ed25519.PublicKey, error) {
	return ed25519.PublicKey{1, 2, 3}, nil
}

// Hostile identity claims: each fails closed with a *ClaimError naming the
// claim member at fault, and no error carries the signature or a key.
func TestHostileIdentityClaims(t *testing.T) {
	t.Parallel()
	attacker := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	// resign re-signs c under the test key after mutate, as an issuer that
	// minted the claim for something else would.
	resign := func(c *IdentityClaim, mutate func(c *IdentityClaim)) {
		mutate(c)
		if err := SignClaim(c, testKid, testKey); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		run   func(rc *RunContext) error // rc carries a valid claim
		field string
	}{
		{"expired claim (now = exp)", func(rc *RunContext) error {
			return VerifyRunClaim(ctx0, rc, testKeys(), time.Unix(rc.Agent.IdentityClaim.Exp, 0), 0)
		}, "exp"},
		{"nbf in the future", func(rc *RunContext) error {
			return VerifyRunClaim(ctx0, rc, testKeys(), time.Unix(rc.Agent.IdentityClaim.Nbf-1, 0), 0)
		}, "nbf"},
		{"claim for another agent (wrong sub)", func(rc *RunContext) error {
			resign(rc.Agent.IdentityClaim, func(c *IdentityClaim) { c.Sub = "agent:contextos/payments-admin@9.9.9" })
			return VerifyRunClaim(ctx0, rc, testKeys(), testNow, 0)
		}, "sub"},
		{"claim of another run (wrong run id)", func(rc *RunContext) error {
			resign(rc.Agent.IdentityClaim, func(c *IdentityClaim) { c.RunID = "run_0000000000000001" })
			return VerifyRunClaim(ctx0, rc, testKeys(), testNow, 0)
		}, "run_id"},
		{"claim of another tenant", func(rc *RunContext) error {
			resign(rc.Agent.IdentityClaim, func(c *IdentityClaim) { c.TenantID = "tenant_other" })
			return VerifyRunClaim(ctx0, rc, testKeys(), testNow, 0)
		}, "tenant_id"},
		{"claim for another session", func(rc *RunContext) error {
			resign(rc.Agent.IdentityClaim, func(c *IdentityClaim) { c.SessionID = "sess_other" })
			return VerifyRunClaim(ctx0, rc, testKeys(), testNow, 0)
		}, "session_id"},
		{"session-bound claim used by an ephemeral run", func(rc *RunContext) error {
			rc.SessionID = ""
			return VerifyRunClaim(ctx0, rc, testKeys(), testNow, 0)
		}, "session_id"},
		{"claim for another user", func(rc *RunContext) error {
			resign(rc.Agent.IdentityClaim, func(c *IdentityClaim) {
				c.PrincipalChain = []Principal{{Kind: PrincipalUser, ID: "usr_999", TenantID: rc.TenantID}, {Kind: PrincipalAgent, ID: rc.Agent.AgentURN}}
			})
			return VerifyRunClaim(ctx0, rc, testKeys(), testNow, 0)
		}, "principal_chain[0].id"},
		{"principal chain crossing tenants", func(rc *RunContext) error {
			resign(rc.Agent.IdentityClaim, func(c *IdentityClaim) { c.PrincipalChain[0].TenantID = "tenant_other" })
			return VerifyRunClaim(ctx0, rc, testKeys(), testNow, 0)
		}, "principal_chain[0].tenant_id"},
		{"bad signature (one bit flipped)", func(rc *RunContext) error {
			c := rc.Agent.IdentityClaim
			sig := []byte(c.Sig)
			sig[5] ^= 0x01
			if sig[5] == '-' || sig[5] == '_' {
				sig[5] = 'A'
			}
			c.Sig = string(sig)
			return VerifyRunClaim(ctx0, rc, testKeys(), testNow, 0)
		}, "sig"},
		{"signed by an untrusted key under a trusted kid", func(rc *RunContext) error {
			SignClaim(rc.Agent.IdentityClaim, testKid, attacker)
			return VerifyRunClaim(ctx0, rc, testKeys(), testNow, 0)
		}, "sig"},
		{"unknown kid", func(rc *RunContext) error {
			SignClaim(rc.Agent.IdentityClaim, "kid_attacker", attacker)
			return VerifyRunClaim(ctx0, rc, testKeys(), testNow, 0)
		}, "kid"},
		{"no key resolver configured", func(rc *RunContext) error {
			return VerifyRunClaim(ctx0, rc, nil, testNow, 0)
		}, "kid"},
		{"resolver hands back a truncated key", func(rc *RunContext) error {
			return VerifyRunClaim(ctx0, rc, shortKeys{}, testNow, 0)
		}, "sig"},
		{"scopes widened after signing", func(rc *RunContext) error {
			rc.Agent.IdentityClaim.Scopes = append(rc.Agent.IdentityClaim.Scopes, "payments.admin")
			return VerifyRunClaim(ctx0, rc, testKeys(), testNow, 0)
		}, "claim_hash"},
		{"exp extended after signing", func(rc *RunContext) error {
			rc.Agent.IdentityClaim.Exp += 86400
			return VerifyRunClaim(ctx0, rc, testKeys(), testNow.Add(time.Hour), 0)
		}, "claim_hash"},
		{"unknown claim version", func(rc *RunContext) error {
			resign(rc.Agent.IdentityClaim, func(c *IdentityClaim) { c.Version = "ctxid/0" })
			return VerifyRunClaim(ctx0, rc, testKeys(), testNow, 0)
		}, "version"},
		{"forged request claim behind a host agent (not dropped)", func(rc *RunContext) error {
			req := fixtureRequest(t)
			req.Agent.IdentityClaim = rc.Agent.clone().IdentityClaim
			SignClaim(req.Agent.IdentityClaim, testKid, attacker)
			host := rc.Clone()
			host.Agent.IdentityClaim = nil
			got, err := Materialize(req, host, nil)
			if err != nil {
				return err
			}
			return VerifyRunClaim(ctx0, got, testKeys(), testNow, 0)
		}, "sig"},
		{"missing claim", func(rc *RunContext) error {
			rc.Agent.IdentityClaim = nil
			return VerifyRunClaim(ctx0, rc, testKeys(), testNow, 0)
		}, "identity_claim"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rc := fixtureRunContext(t)
			rc.Agent.IdentityClaim = validClaim(rc)
			sig := rc.Agent.IdentityClaim.Sig
			err := tc.run(rc)
			var ce *ClaimError
			if !errors.As(err, &ce) || !errors.Is(err, ErrClaim) {
				t.Fatalf("error = %v, want a *ClaimError", err)
			}
			if ce.Field != tc.field {
				t.Errorf("field = %s (%s), want %s", ce.Field, ce.Reason, tc.field)
			}
			secrets := []string{sig, "tok_user_7a", "tok_agent_92"}
			if c := rc.Agent.IdentityClaim; c != nil {
				secrets = append(secrets, c.Sig)
			}
			for _, secret := range secrets {
				if secret != "" && strings.Contains(err.Error(), secret) {
					t.Errorf("error echoes a secret: %v", err)
				}
			}
		})
	}
}

// A host run context and a request that carry different claims conflict.
func TestHostileClaimConflict(t *testing.T) {
	rc := fixtureRunContext(t)
	rc.Agent.IdentityClaim = validClaim(rc)
	req := fixtureRequest(t)
	other := rc.Clone()
	other.RunID = "run_0000000000000002"
	req.Agent.IdentityClaim = validClaim(other)
	_, err := Materialize(req, rc, nil)
	var ce *ClaimError
	if !errors.Is(err, ErrConflict) || !errors.Is(err, ErrClaim) || !errors.As(err, &ce) || ce.Field != "identity_claim" || ce.Reason != reasonMismatch {
		t.Errorf("Materialize = %v, want a conflict on agent.identity_claim that is a *ClaimError", err)
	}
	// A claim for another tenant, caught by validation, is a *ClaimError
	// naming tenant_id too; other validation problems are not.
	req = fixtureRequest(t)
	req.Agent.IdentityClaim = validClaim(rc)
	req.Agent.IdentityClaim.TenantID = "tenant_other"
	err = req.Validate()
	if !errors.As(err, &ce) || ce.Field != "tenant_id" || !errors.Is(err, ErrClaim) || !errors.Is(err, ErrInvalid) {
		t.Errorf("Validate = %v, want a *ClaimError naming tenant_id", err)
	}
	req = fixtureRequest(t)
	req.RequestID = "bad id"
	if err := req.Validate(); errors.As(err, &ce) || errors.Is(err, ErrClaim) {
		t.Errorf("a problem outside the claim is taken for a claim error: %v", err)
	}
}

var ctx0 = context.Background()
