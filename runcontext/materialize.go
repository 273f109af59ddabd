package runcontext

import (
	"fmt"
	"maps"
	"slices"

	"github.com/contextos/contextos/internal/canon"
)

// Budget defaults, applied when neither the host's RunContext nor the
// request's runtime hints set a dimension. They are the seed's example run
// budget (seed 000, "Run Context").
const (
	DefaultTotalTokens          = 12000
	DefaultMaxToolCalls         = 8
	DefaultMaxReplanAttempts    = 2
	DefaultWallClockMS          = 30000
	DefaultMaxCostCents         = 25.0
	DefaultPlanTimeoutMS        = 15000
	DefaultMaxPayloadBytes      = 1 << 20
	DefaultMaxSessionDurationMS = 4 * 60 * 60 * 1000 // long_running sessions
)

// DefaultBucketTokens returns the default per-bucket token allocation
// (it adds up to DefaultTotalTokens).
func DefaultBucketTokens() map[Bucket]int {
	return map[Bucket]int{
		BucketPolicy: 1800, BucketTool: 1500, BucketEvidence: 3500,
		BucketMemory: 1500, BucketBusiness: 1500, BucketSession: 2200,
	}
}

// DefaultRunBudget returns the budget a run gets when nothing sets one.
func DefaultRunBudget() RunBudget {
	return RunBudget{
		TotalTokens:          DefaultTotalTokens,
		BucketTokens:         DefaultBucketTokens(),
		MaxToolCalls:         DefaultMaxToolCalls,
		MaxReplanAttempts:    DefaultMaxReplanAttempts,
		WallClockMS:          DefaultWallClockMS,
		MaxCostCents:         DefaultMaxCostCents,
		PlanTimeoutMS:        DefaultPlanTimeoutMS,
		MaxPayloadBytes:      DefaultMaxPayloadBytes,
		MaxSessionDurationMS: DefaultMaxSessionDurationMS,
	}
}

// MaterializeOptions tunes Materialize. The zero value is ready to use.
type MaterializeOptions struct {
	// NewRunID returns the run id when the host RunContext has none. It must
	// return an id starting with "run_". Default: derived from tenant and
	// request id (canon.ID), so the same request always gets the same run id.
	NewRunID func(req *InvokeRequest) (string, error)
	// DefaultSafetyMode applies when the host RunContext sets none.
	// Default: read_only (least privilege; a host must opt into more).
	DefaultSafetyMode ApprovalMode
	// DefaultBudget is the budget before hints apply when the host
	// RunContext sets none. Default: DefaultRunBudget().
	DefaultBudget *RunBudget
}

// Materialize builds the RunContext of a request.
//
// The host may pass its own RunContext (host, may be nil): its values are
// kept, and where it leaves a field empty the request fills it. Where both
// set tenant, session, trace id, user id, agent URN or intent and they
// differ, that is a conflict and an error (errors.Is(err, ErrConflict)),
// never a silent override. The request's trace becomes the run's
// trace_context. Runtime hints become run_budget: over a host budget a hint
// may only tighten a dimension; over the default budget it sets it.
//
// The result is validated; every problem of the request, the host context
// and the result is returned in one *ValidationError. Neither input is
// modified.
func Materialize(req *InvokeRequest, host *RunContext, opts *MaterializeOptions) (*RunContext, error) {
	var o MaterializeOptions
	if opts != nil {
		o = *opts
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var rc RunContext
	hostBudget := false
	if host != nil {
		rc = *host.Clone()
		hostBudget = rc.RunBudget.TotalTokens != 0
	}
	var ps problems
	merge := func(path string, dst *string, v string) {
		switch {
		case v == "":
		case *dst == "":
			*dst = v
		case *dst != v:
			ps.add(path, RuleConflict, fmt.Sprintf("host run context and request disagree on %s", path))
		}
	}
	merge("tenant_id", &rc.TenantID, req.TenantID)
	merge("session_id", &rc.SessionID, req.SessionID)
	merge("trace_id", &rc.TraceID, req.Trace.TraceID)
	merge("intent", &rc.Intent, req.Input.Intent)
	merge("locale", &rc.Locale, req.Input.Locale)
	if rc.User.UserID == "" {
		rc.User = req.User.Clone()
	} else {
		merge("user.user_id", &rc.User.UserID, req.User.UserID)
	}
	if rc.Agent.AgentURN == "" && rc.Agent.AgentID == "" {
		rc.Agent = req.Agent.Clone()
	} else {
		merge("agent.agent_urn", &rc.Agent.AgentURN, req.Agent.AgentURN)
		merge("agent.agent_id", &rc.Agent.AgentID, req.Agent.AgentID)
		merge("agent.workload_identity", &rc.Agent.WorkloadIdentity, req.Agent.WorkloadIdentity)
		// The request's identity claim is never dropped: the host's agent
		// takes it when it has none, and two different claims conflict.
		switch hc, rq := rc.Agent.IdentityClaim, req.Agent.IdentityClaim; {
		case rq == nil:
		case hc == nil:
			rc.Agent.IdentityClaim = req.Agent.Clone().IdentityClaim
		case hc.ClaimHash != rq.ClaimHash:
			ps.add("agent.identity_claim", RuleConflict, "host run context and request carry different identity claims")
		}
	}
	if err := ps.err(KindRunContext); err != nil {
		return nil, err
	}
	if rc.TraceContext == nil {
		h := req.Trace.Headers()
		rc.TraceContext = &h
	}
	if rc.RunID == "" {
		id, err := newRunID(o, req)
		if err != nil {
			return nil, err
		}
		rc.RunID = id
	}
	if rc.SafetyMode == "" {
		rc.SafetyMode = o.DefaultSafetyMode
		if rc.SafetyMode == "" {
			rc.SafetyMode = ReadOnly
		}
	}
	if !hostBudget {
		if o.DefaultBudget != nil {
			rc.RunBudget = *o.DefaultBudget
			rc.RunBudget.BucketTokens = maps.Clone(o.DefaultBudget.BucketTokens)
		} else {
			rc.RunBudget = DefaultRunBudget()
		}
	}
	applyHints(&rc.RunBudget, &req.Runtime, hostBudget)
	if err := rc.Validate(); err != nil {
		return nil, err
	}
	return &rc, nil
}

func newRunID(o MaterializeOptions, req *InvokeRequest) (string, error) {
	if o.NewRunID != nil {
		id, err := o.NewRunID(req)
		if err != nil {
			return "", fmt.Errorf("runcontext: new run id: %w", err)
		}
		return id, nil
	}
	return canon.ID(canon.PrefixRun, req.TenantID, req.RequestID)
}

// applyHints folds request hints into b. With tighten set (a host budget),
// a hint can only lower a limit.
func applyHints(b *RunBudget, h *RuntimeHints, tighten bool) {
	set64 := func(dst *int64, v *int64) {
		if v != nil && (!tighten || *dst == 0 || *v < *dst) {
			*dst = *v
		}
	}
	setInt := func(dst *int, v *int) {
		if v != nil && (!tighten || *v < *dst) {
			*dst = *v
		}
	}
	set64(&b.PlanTimeoutMS, h.PlanTimeoutMS)
	set64(&b.MaxSessionDurationMS, h.MaxSessionDurationMS)
	set64(&b.MaxPayloadBytes, h.MaxPayloadBytes)
	set64(&b.WallClockMS, h.WallClockMS)
	setInt(&b.MaxToolCalls, h.MaxToolCalls)
	setInt(&b.MaxReplanAttempts, h.MaxReplanAttempts)
	setInt(&b.TotalTokens, h.TotalTokens)
	if h.MaxCostCents != nil && (!tighten || *h.MaxCostCents < b.MaxCostCents) {
		b.MaxCostCents = *h.MaxCostCents
	}
	if len(h.BucketTokens) > 0 {
		if b.BucketTokens == nil {
			b.BucketTokens = map[Bucket]int{}
		}
		for _, k := range sortedBuckets(h.BucketTokens) {
			if cur, ok := b.BucketTokens[k]; !tighten || !ok || h.BucketTokens[k] < cur {
				b.BucketTokens[k] = h.BucketTokens[k]
			}
		}
	}
}

// ForAudit returns a copy of rc safe for audit output: token references and
// the claim signature are removed; the claim keeps its claim_hash, which is
// what audit records cite.
func (rc *RunContext) ForAudit() *RunContext {
	c := rc.Clone()
	c.Agent.TokenRef = ""
	if c.User.Delegation != nil {
		c.User.Delegation.TokenRef = ""
	}
	if c.Agent.IdentityClaim != nil {
		c.Agent.IdentityClaim.Sig = ""
	}
	return c
}

// AuthRef returns the audit reference of the run's identity,
// "claim_hash:<digest>", or "" when the run carries no claim.
func (rc *RunContext) AuthRef() string {
	if rc == nil || rc.Agent.IdentityClaim == nil || rc.Agent.IdentityClaim.ClaimHash == "" {
		return ""
	}
	return "claim_hash:" + rc.Agent.IdentityClaim.ClaimHash
}

// PrincipalChain returns the agent's principal chain, or, when none is set,
// the chain the run implies: the user, then the agent.
func (rc *RunContext) PrincipalChain() []Principal {
	if len(rc.Agent.PrincipalChain) > 0 {
		return slices.Clone(rc.Agent.PrincipalChain)
	}
	var chain []Principal
	if rc.User.UserID != "" {
		chain = append(chain, Principal{Kind: PrincipalUser, ID: rc.User.UserID, TenantID: rc.TenantID})
	}
	if rc.Agent.AgentURN != "" {
		chain = append(chain, Principal{Kind: PrincipalAgent, ID: rc.Agent.AgentURN, TenantID: rc.TenantID})
	}
	return chain
}
