package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// IdentityOptions configure how a Runtime treats agents' identity claims
// (ctxid/1, seed 000 agent.identity_claim).
//
// A claim that is present, in the request or in the host's RunContext, is
// verified on every Invoke and again on every Resume: its Ed25519
// signature through Keys, sub equal to the agent URN, run_id, tenant_id,
// session and user equal to the run's, and nbf ≤ now < exp on the
// runtime's clock (Options.Now). A run whose packs allow delegated or
// destructive work — an allowed capability of such an approval mode that
// the run's safety_mode admits — must carry a claim, unless AllowUnclaimed
// waives it. A claim that fails, or a claim that is required and missing,
// ends the Invoke (or Resume) with an error matching runcontext.ErrClaim
// (errors.As gives the *runcontext.ClaimError naming the claim member at
// fault) before any tool call, checkpoint change or record: a request
// that cannot say who is acting is not a run.
type IdentityOptions struct {
	// Keys resolves the public keys that sign identity claims, by kid. It
	// is a trust root of its own: a pack signer is not an identity issuer,
	// so do not reuse the pack key resolver here. Without it, every claim
	// is refused (unknown kid).
	Keys runcontext.KeyResolver
	// Audience, when set, must equal each claim's aud.
	Audience string
	// Leeway tolerates clock skew on nbf and exp. Default: none.
	Leeway time.Duration
	// AllowUnclaimed waives the claim a run needs when its packs allow
	// delegated or destructive work. The run's records state the waiver:
	// agent_identity.claim_verification is "waived". A claim that is
	// present is verified all the same. Default false: such a run without
	// a claim is refused. Test harnesses and offline tools set it; a host
	// in front of live systems should not.
	AllowUnclaimed bool
}

// verifyIdentity verifies rc's identity claim, when it carries one, at
// now (a reading of the run's clock, so a replay judges the claim at the
// recorded time).
func (rt *Runtime) verifyIdentity(ctx context.Context, rc *runcontext.RunContext, now time.Time) (decision.ClaimVerification, error) {
	c := rc.Agent.IdentityClaim
	if c == nil {
		return "", nil
	}
	o := rt.opts.Identity
	err := runcontext.VerifyClaim(ctx, c, o.Keys, runcontext.ClaimExpectations{
		Now: now, RunID: rc.RunID, TenantID: rc.TenantID, AgentURN: rc.Agent.AgentURN,
		SessionID: rc.SessionID, UserID: rc.User.UserID, Audience: o.Audience, Leeway: o.Leeway,
	})
	if err != nil {
		// The error names the claim member, never the signature or a key.
		rt.opts.Logger.Warn("identity claim rejected", "run_id", rc.RunID, "tenant_id", rc.TenantID, "error", logWords(err))
		return "", fmt.Errorf("contextos: run %s: %w", rc.RunID, err)
	}
	return decision.ClaimVerified, nil
}

// setupRun sets the run up to execute (packs, compile, gateway) and then
// checks that a run whose packs allow delegated or destructive work
// carries a verified claim, or that the host waived it.
func (r *run) setupRun(ctx context.Context, chain *gateway.ChainState) (err error) {
	defer func() {
		if err != nil {
			failSpan(r.span, "run failed: "+errorType(err))
		}
	}()
	start := r.rt.compileStart(ctx)
	// A new run needs a published or pinned pack; a resumed run (chain !=
	// nil) may finish on a deprecated one, never on a revoked one; a
	// replay re-runs a recorded run on any pack it was recorded with.
	use := pack.UseExecute
	switch {
	case r.rt.mode == ModeReplay:
		use = pack.UseReplay
	case chain != nil:
		use = pack.UseResume
	}
	err = r.setup(ctx, use, chain)
	// A resumed run (chain != nil) compiles again: its compile counts, but
	// its tool surface, rule evaluations and truncations were counted when
	// it began.
	r.observeCompile(ctx, start, err, chain == nil)
	if err != nil {
		return err
	}
	if r.rc.Agent.IdentityClaim != nil {
		return nil // verified before the run was claimed
	}
	mode, needed := claimNeeded(r.prepared.Pack(), r.rc.SafetyMode)
	if !needed {
		return nil
	}
	// A replay re-runs a recorded run offline, with no live effect: a run
	// recorded without a claim was waived when it ran, and is again.
	if !r.rt.opts.Identity.AllowUnclaimed && r.rt.mode != ModeReplay {
		r.rt.opts.Logger.Warn("identity claim required", "run_id", r.rc.RunID, "tenant_id", r.rc.TenantID, "approval_mode", string(mode))
		return fmt.Errorf("contextos: run %s may do %s work and carries no identity claim (Options.Identity.AllowUnclaimed waives it): %w",
			r.rc.RunID, mode, &runcontext.ClaimError{Field: "identity_claim", Reason: "missing"})
	}
	r.identity = decision.ClaimWaived
	return nil
}

// claimNeeded reports whether a run of p at safety needs an identity
// claim: an allowed permission exposes a capability whose adapter's
// approval mode is delegated or above and at most safety. It returns the
// highest such mode.
func claimNeeded(p *pack.Pack, safety runcontext.ApprovalMode) (runcontext.ApprovalMode, bool) {
	var top runcontext.ApprovalMode
	for _, a := range p.ToolingLayer.AdapterRegistry {
		if a.ApprovalMode.Compare(runcontext.Delegated) < 0 || !a.ApprovalMode.AtMost(safety) {
			continue
		}
		for _, perm := range p.ToolingLayer.Permissions {
			if perm.Allow && perm.AdapterID == a.AdapterID && (top == "" || a.ApprovalMode.Compare(top) > 0) {
				top = a.ApprovalMode
			}
		}
	}
	return top, top != ""
}
