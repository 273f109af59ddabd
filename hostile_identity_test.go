package contextos_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// The identity service's key in these tests (a trust root of its own,
// not the harness's pack-signing key).
var (
	idKey  = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
	idKid  = "kid_identity_test"
	idKeys = runcontext.NewStaticKeys(map[string]ed25519.PublicKey{idKid: idKey.Public().(ed25519.PublicKey)})
)

// signedClaim is a valid claim for rc at contextostest.FixedTime(), after
// mutate (applied before signing).
func signedClaim(t testing.TB, rc *runcontext.RunContext, mutate func(c *runcontext.IdentityClaim)) *runcontext.IdentityClaim {
	t.Helper()
	c := &runcontext.IdentityClaim{Iss: "https://id.example", Sub: rc.Agent.AgentURN, RunID: rc.RunID, SessionID: rc.SessionID,
		TenantID: rc.TenantID, PrincipalChain: rc.PrincipalChain(), Scopes: []string{"tools:read", "tools:write"},
		Nbf: contextostest.FixedTime().Add(-time.Minute).Unix(), Exp: contextostest.FixedTime().Add(5 * time.Minute).Unix()}
	if mutate != nil {
		mutate(c)
	}
	if err := runcontext.SignClaim(c, idKid, idKey); err != nil {
		t.Fatal(err)
	}
	return c
}

// strictHarness is the refund harness with identity enforced: claim keys
// configured and no waiver.
func strictHarness(t *testing.T, planner contextos.Planner, logs *bytes.Buffer) *contextostest.Harness {
	t.Helper()
	o := &contextostest.Options{Runtime: contextos.Options{Identity: contextos.IdentityOptions{Keys: idKeys}}}
	if logs != nil {
		o.Runtime.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h := bareHarness(t, planner, o)
	scriptDefaults(h, "")
	return h
}

// assertNothingRan checks a refused run left no trace but a released
// claim: no tool call, no record, no live checkpoint.
func assertNothingRan(t *testing.T, h *contextostest.Harness, runID string) {
	t.Helper()
	for _, a := range []string{"adp_orders", "adp_policy", "adp_payments"} {
		if n := len(h.Adapter(a).Calls()); n != 0 {
			t.Errorf("%s was called %d times", a, n)
		}
	}
	if recs, _ := h.Decisions.List(context.Background(), decision.Filter{RunID: runID}); len(recs) != 0 {
		t.Errorf("a refused run stored %d records", len(recs))
	}
	if cp, err := loadState(context.Background(), h.Checkpoints, runID); err == nil && (cp.Active || cp.Terminal || cp.Pending != nil || len(cp.Results) > 0) {
		t.Errorf("a refused run left a live checkpoint: %+v", cp)
	}
}

// Identity is enforced on every run: a claim that does not verify, or a
// run whose pack allows destructive or delegated work without a claim,
// ends Invoke with a *runcontext.ClaimError before any tool call, record
// or checkpoint, and nothing secret is logged.
func TestHostileIdentity(t *testing.T) {
	tests := []struct {
		name   string
		claim  func(t *testing.T, rc *runcontext.RunContext) *runcontext.IdentityClaim
		inReq  bool                                                           // put the claim in the request instead of the host run context
		before func(req *runcontext.InvokeRequest, rc *runcontext.RunContext) // further changes
		field  string
	}{
		{"expired claim", func(t *testing.T, rc *runcontext.RunContext) *runcontext.IdentityClaim {
			return signedClaim(t, rc, func(c *runcontext.IdentityClaim) { c.Exp = contextostest.FixedTime().Unix() })
		}, false, nil, "exp"},
		{"claim not valid before a future nbf", func(t *testing.T, rc *runcontext.RunContext) *runcontext.IdentityClaim {
			return signedClaim(t, rc, func(c *runcontext.IdentityClaim) { c.Nbf = contextostest.FixedTime().Add(time.Minute).Unix() })
		}, false, nil, "nbf"},
		{"claim for another agent", func(t *testing.T, rc *runcontext.RunContext) *runcontext.IdentityClaim {
			return signedClaim(t, rc, func(c *runcontext.IdentityClaim) { c.Sub = "agent:contextos/payments-admin@1.0.0" })
		}, false, nil, "sub"},
		{"claim of another run", func(t *testing.T, rc *runcontext.RunContext) *runcontext.IdentityClaim {
			return signedClaim(t, rc, func(c *runcontext.IdentityClaim) { c.RunID = "run_0000000000000009" })
		}, true, nil, "run_id"},
		{"claim of another tenant", func(t *testing.T, rc *runcontext.RunContext) *runcontext.IdentityClaim {
			return signedClaim(t, rc, func(c *runcontext.IdentityClaim) { c.TenantID = "tenant_other" })
		}, true, nil, "tenant_id"},
		{"claim with a bad signature", func(t *testing.T, rc *runcontext.RunContext) *runcontext.IdentityClaim {
			c := signedClaim(t, rc, nil)
			c.Sig = c.Sig[:10] + strings.Repeat("A", len(c.Sig)-10)
			return c
		}, false, nil, "sig"},
		{"claim signed with an unknown kid", func(t *testing.T, rc *runcontext.RunContext) *runcontext.IdentityClaim {
			c := signedClaim(t, rc, nil)
			runcontext.SignClaim(c, "kid_rogue", ed25519.NewKeyFromSeed(make([]byte, 32)))
			return c
		}, false, nil, "kid"},
		{"claim signed with the pack-signing key", func(t *testing.T, rc *runcontext.RunContext) *runcontext.IdentityClaim {
			c := signedClaim(t, rc, nil)
			seed := make([]byte, ed25519.SeedSize)
			seed[0] = 7 // the harness's pack key: a pack signer is not an identity issuer
			runcontext.SignClaim(c, idKid, ed25519.NewKeyFromSeed(seed))
			return c
		}, false, nil, "sig"},
		{"claim for another session", func(t *testing.T, rc *runcontext.RunContext) *runcontext.IdentityClaim {
			return signedClaim(t, rc, func(c *runcontext.IdentityClaim) { c.SessionID = "sess_other" })
		}, false, func(req *runcontext.InvokeRequest, rc *runcontext.RunContext) { req.SessionID, rc.SessionID = "", "" }, "session_id"},
		{"claim for another user", func(t *testing.T, rc *runcontext.RunContext) *runcontext.IdentityClaim {
			return signedClaim(t, rc, func(c *runcontext.IdentityClaim) { c.PrincipalChain[0].ID = "usr_999" })
		}, true, nil, "principal_chain[0].id"},
		{"claim whose scopes were widened after signing", func(t *testing.T, rc *runcontext.RunContext) *runcontext.IdentityClaim {
			c := signedClaim(t, rc, nil)
			c.Scopes = append(c.Scopes, "payments.admin")
			return c
		}, false, nil, "claim_hash"},
		{"missing claim on a destructive pack", func(*testing.T, *runcontext.RunContext) *runcontext.IdentityClaim { return nil }, false, nil, "identity_claim"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := strictHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &logs)
			req, rc := refundRequest(t, 1200, true)
			if tc.before != nil {
				tc.before(req, rc)
			}
			c := tc.claim(t, rc)
			if tc.inReq {
				req.Agent.IdentityClaim = c
			} else {
				rc.Agent.IdentityClaim = c
			}
			res, err := h.Runtime.Invoke(context.Background(), req, rc)
			var ce *runcontext.ClaimError
			if res != nil || !errors.As(err, &ce) || !errors.Is(err, runcontext.ErrClaim) {
				t.Fatalf("Invoke = %+v, %v; want a *runcontext.ClaimError", res, err)
			}
			if ce.Field != tc.field {
				t.Errorf("claim error names %s (%s), want %s", ce.Field, ce.Reason, tc.field)
			}
			assertNothingRan(t, h, rc.RunID)
			if c != nil && (strings.Contains(err.Error(), c.Sig) || strings.Contains(logs.String(), c.Sig)) {
				t.Error("the claim's signature reached the error or the logs")
			}
			// A claim that does not fit the run's own fields is invalid input
			// (a *runcontext.ValidationError that also gives the
			// *ClaimError); one that fails verification is logged.
			if !errors.Is(err, runcontext.ErrInvalid) && !strings.Contains(logs.String(), "identity claim") {
				t.Errorf("the refusal is not logged: %s", logs.String())
			}
		})
	}
}

// A pack whose highest capability is delegated needs a claim as well.
func TestHostileIdentityDelegatedPack(t *testing.T) {
	doc := bytes.Replace(readTestdata(t, "ctxpack.support-1.0.0.json"),
		[]byte("\"capabilities\": [\"issue_refund\"],\n\"approval_mode\": \"destructive\""), []byte("\"capabilities\": [\"issue_refund\"],\n\"approval_mode\": \"delegated\""), 1)
	if bytes.Equal(doc, readTestdata(t, "ctxpack.support-1.0.0.json")) {
		t.Fatal("the pack fixture changed; the payments adapter was not made delegated")
	}
	h := contextostest.New(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), [][]byte{doc}, &contextostest.Options{
		Runtime: contextos.Options{Evidence: evidence(t), Identity: contextos.IdentityOptions{Keys: idKeys}},
		Scopes:  map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 1200, true)
	rc.SafetyMode = runcontext.Delegated
	_, err := h.Runtime.Invoke(context.Background(), req, rc)
	var ce *runcontext.ClaimError
	if !errors.As(err, &ce) || ce.Field != "identity_claim" || !strings.Contains(err.Error(), "delegated work") {
		t.Fatalf("Invoke = %v; want a missing-claim error naming delegated work", err)
	}
	assertNothingRan(t, h, rc.RunID)
	// The same run with a valid claim runs, and its record says the claim was verified.
	rc.Agent.IdentityClaim = signedClaim(t, rc, nil)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	if res.Record.AgentIdentity.ClaimVerification != decision.ClaimVerified || res.Record.AgentIdentity.ClaimHash != rc.Agent.IdentityClaim.ClaimHash {
		t.Errorf("record identity = %+v", res.Record.AgentIdentity)
	}
}

// A host that opts out runs without a claim, and every record of the run
// says the claim was waived; a run that needs no claim says nothing.
func TestIdentityOptOutIsRecorded(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), &contextostest.Options{
		Runtime: contextos.Options{Identity: contextos.IdentityOptions{Keys: idKeys, AllowUnclaimed: true}}})
	req, rc := refundRequest(t, 4200, true)
	paused := h.Invoke(req, rc)
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	done := h.Approve(paused, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
	contextostest.AssertStatus(t, done, decision.Decided)
	recs, _ := h.Decisions.List(context.Background(), decision.Filter{RunID: done.RunID})
	for _, r := range recs {
		if r.AgentIdentity.ClaimVerification != decision.ClaimWaived || r.AgentIdentity.ClaimHash != "" {
			t.Errorf("record %s (%s) identity = %+v, want the waiver stated", r.RecordID, r.Status, r.AgentIdentity)
		}
	}
	contextostest.AssertReplayEqual(t, h.Replay(done))

	// A read-only run of the same pack can do no delegated or destructive
	// work: it needs no claim, and its record states nothing.
	h2 := strictHarness(t, contextostest.NewPlanner(lookupPlan(), deniedPlan()), nil)
	req, rc = refundRequest(t, 1200, true)
	rc.SafetyMode = runcontext.ReadOnly
	res := h2.Invoke(req, rc)
	if res.Record.AgentIdentity.ClaimVerification != "" {
		t.Errorf("read-only run records claim_verification %q", res.Record.AgentIdentity.ClaimVerification)
	}
}

// The claim is verified again on Resume, on the resume's clock: a claim
// that expired while the run waited for its approval does not carry the
// run on, and the paused refund stays unissued and resumable.
func TestHostileResumeWithExpiredClaim(t *testing.T) {
	now := contextostest.FixedTime()
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), &contextostest.Options{
		Runtime: contextos.Options{Identity: contextos.IdentityOptions{Keys: idKeys}}, Now: func() time.Time { return now }})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 4200, true)
	rc.Agent.IdentityClaim = signedClaim(t, rc, nil)
	paused := h.Invoke(req, rc)
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	if paused.Record.AgentIdentity.ClaimVerification != decision.ClaimVerified {
		t.Errorf("deferred record identity = %+v", paused.Record.AgentIdentity)
	}
	now = now.Add(10 * time.Minute) // past exp
	approval := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, now)
	_, err := h.Runtime.Resume(context.Background(), paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{approval}})
	var ce *runcontext.ClaimError
	if !errors.As(err, &ce) || ce.Field != "exp" {
		t.Fatalf("Resume = %v; want an expired-claim error", err)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
	cp, err := loadState(context.Background(), h.Checkpoints, paused.RunID)
	if err != nil || cp.Pending == nil || cp.Active {
		t.Errorf("the paused run is no longer paused: %+v, %v", cp, err)
	}
}

// Claims differing between the request and the host run context conflict.
func TestHostileIdentityConflictingClaims(t *testing.T) {
	h := strictHarness(t, contextostest.NewPlanner(lookupPlan()), nil)
	req, rc := refundRequest(t, 1200, true)
	rc.Agent.IdentityClaim = signedClaim(t, rc, nil)
	req.Agent.IdentityClaim = signedClaim(t, rc, func(c *runcontext.IdentityClaim) { c.Scopes = []string{"tools:admin"} })
	if _, err := h.Runtime.Invoke(context.Background(), req, rc); !errors.Is(err, runcontext.ErrConflict) {
		t.Fatalf("Invoke = %v, want ErrConflict", err)
	}
	assertNothingRan(t, h, rc.RunID)
}
