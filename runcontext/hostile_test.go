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

// Hostile values a caller sends in a request or run context: each is
// refused with a *ValidationError naming the member, and no error repeats
// the value (a credential in an attachment URI, or pasted into an enum).
func TestHostileRequestValuesNeverEchoed(t *testing.T) {
	t.Parallel()
	const key = "sk-live-hr5attachmentsecret0001"
	att := func(uri string) func(r *InvokeRequest) {
		return func(r *InvokeRequest) {
			r.Attachments = []Attachment{{ArtifactID: "art_1", MediaType: "application/pdf", URI: uri, SHA256: strings.Repeat("2f", 32)}}
		}
	}
	tests := []struct {
		name   string
		req    func(r *InvokeRequest) // nil: rc instead
		rc     func(rc *RunContext)
		json   string // when set, decoded as the request (the mode member replaced)
		field  string
		secret string
	}{
		{name: "api key in an attachment uri's query", req: att("https://files.example/x.pdf?api_key=" + key), field: "attachments[0].uri", secret: key},
		{name: "token in an attachment uri's query", req: att("https://files.example/x.pdf?v=2&token=hr5opaque0002"), field: "attachments[0].uri", secret: "hr5opaque0002"},
		{name: "s3 pre-signed attachment uri", req: att("https://b.s3.amazonaws.com/x.pdf?X-Amz-Expires=300&X-Amz-Signature=4f0c2c1d9e8b7a6f5e4d3c2b1a0f9e8d"), field: "attachments[0].uri", secret: "4f0c2c1d9e8b7a6f5e4d3c2b1a0f9e8d"},
		{name: "azure sas attachment uri", req: att("https://acct.blob.core.windows.net/c/x.pdf?sv=2022-11-02&sp=r&sig=hr5sasSignature0003%3D"), field: "attachments[0].uri", secret: "hr5sasSignature0003"},
		{name: "access token in an attachment uri's fragment", req: att("https://files.example/x.pdf#access_token=hr5fragment0004"), field: "attachments[0].uri", secret: "hr5fragment0004"},
		{name: "percent-encoded secret-named query parameter", req: att("https://files.example/x.pdf?api%5Fkey=hr5encoded0005"), field: "attachments[0].uri", secret: "hr5encoded0005"},
		{name: "vendor key in an attachment uri's path", req: att("https://files.example/" + key + "/x.pdf"), field: "attachments[0].uri", secret: key},
		{name: "vendor key as an artifact id", req: func(r *InvokeRequest) {
			att("s3://b/k.pdf")(r)
			r.Attachments[0].ArtifactID = key
		}, field: "attachments[0].artifact_id", secret: key},
		{name: "vendor key as the request mode", req: func(r *InvokeRequest) { r.Mode = key }, field: "mode", secret: key},
		{name: "vendor key as the request mode, decoded", json: key, field: "mode", secret: key},
		{name: "vendor key as the run context safety_mode", rc: func(rc *RunContext) { rc.SafetyMode = key }, field: "safety_mode", secret: key},
		{name: "vendor key as a delegation auth_type", req: func(r *InvokeRequest) {
			r.User.Delegation = &Delegation{AuthType: key, TokenRef: "tok_user_7a"}
		}, field: "user.delegation.auth_type", secret: key},
		{name: "vendor key as a principal kind", req: func(r *InvokeRequest) {
			r.Agent.PrincipalChain = []Principal{{Kind: PrincipalKind(key), ID: "x"}}
		}, field: "agent.principal_chain[0].kind", secret: key},
		{name: "vendor key as the agent lifecycle", req: func(r *InvokeRequest) { r.Agent.Lifecycle = Lifecycle(key) }, field: "agent.lifecycle", secret: key},
		{name: "vendor key as the agent urn's version", req: func(r *InvokeRequest) { r.Agent.AgentURN = "agent:contextos/support@" + key }, field: "agent.agent_urn", secret: key},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var err error
			switch {
			case tc.json != "":
				b := readFixture(t, "invoke.support-refund.json")
				b = []byte(strings.Replace(string(b), `"mode": "batch"`, `"mode": "`+tc.json+`"`, 1))
				if !strings.Contains(string(b), tc.json) {
					t.Fatal("fixture has no batch mode member")
				}
				_, err = DecodeInvokeRequest(b)
			case tc.req != nil:
				r := fixtureRequest(t)
				tc.req(r)
				err = r.Validate()
			default:
				rc := fixtureRunContext(t)
				tc.rc(rc)
				err = rc.Validate()
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error = %v, want a *ValidationError", err)
			}
			found := false
			for _, p := range ve.Problems {
				found = found || p.Path == tc.field
			}
			if !found {
				t.Errorf("problems = %v, want one at %s", ve.Problems, tc.field)
			}
			if strings.Contains(err.Error(), tc.secret) {
				t.Errorf("error echoes the value: %v", err)
			}
		})
	}
}
