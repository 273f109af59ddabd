package runcontext

import (
	"fmt"
	"github.com/contextos/contextos/internal/sortedkeys"
	"maps"
	"slices"

	"github.com/contextos/contextos/internal/canon"
)

// Budget defaults (DefaultRunBudget), applied when neither the host's
// RunContext nor the request's runtime hints set a dimension. They are the
// seed's example run budget (seed 000, "Run Context").
const (
	defaultTotalTokens          = 12000
	defaultMaxToolCalls         = 8
	defaultMaxReplanAttempts    = 2
	defaultWallClockMS          = 30000
	defaultMaxCostCents         = 25.0
	defaultPlanTimeoutMS        = 15000
	defaultMaxPayloadBytes      = 1 << 20
	defaultMaxSessionDurationMS = 4 * 60 * 60 * 1000 // long_running sessions
)

// defaultBucketTokens returns the default per-bucket token allocation
// (it adds up to defaultTotalTokens).
func defaultBucketTokens() map[Bucket]int {
	return map[Bucket]int{
		BucketPolicy: 1800, BucketTool: 1500, BucketEvidence: 3500,
		BucketMemory: 1500, BucketBusiness: 1500, BucketSession: 2200,
	}
}

// DefaultRunBudget returns the budget a run gets when nothing sets one.
func DefaultRunBudget() RunBudget {
	return RunBudget{
		TotalTokens:          defaultTotalTokens,
		BucketTokens:         defaultBucketTokens(),
		MaxToolCalls:         defaultMaxToolCalls,
		MaxReplanAttempts:    defaultMaxReplanAttempts,
		WallClockMS:          defaultWallClockMS,
		MaxCostCents:         defaultMaxCostCents,
		PlanTimeoutMS:        defaultPlanTimeoutMS,
		MaxPayloadBytes:      defaultMaxPayloadBytes,
		MaxSessionDurationMS: defaultMaxSessionDurationMS,
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
		rc = host.clone()
		hostBudget = rc.RunBudget.TotalTokens != 0
	}
	if err := CheckAgreement(req, &rc); err != nil {
		return nil, err
	}
	fill := func(dst *string, v string) {
		if *dst == "" {
			*dst = v
		}
	}
	fill(&rc.TenantID, req.TenantID)
	fill(&rc.SessionID, req.SessionID)
	fill(&rc.TraceID, req.Trace.TraceID)
	fill(&rc.Intent, req.Input.Intent)
	fill(&rc.Locale, req.Input.Locale)
	if rc.User.UserID == "" {
		rc.User = req.User.clone()
	}
	// reqAgent: rc's agent is the request's, which req.Validate checked.
	reqAgent := !hostAgent(&rc)
	if reqAgent {
		rc.Agent = req.Agent.clone()
	} else {
		fill(&rc.Agent.AgentURN, req.Agent.AgentURN)
		fill(&rc.Agent.AgentID, req.Agent.AgentID)
		fill(&rc.Agent.WorkloadIdentity, req.Agent.WorkloadIdentity)
		// The request's identity claim is never dropped: the host's agent
		// takes it when it has none (two different claims conflict).
		if rc.Agent.IdentityClaim == nil && req.Agent.IdentityClaim != nil {
			rc.Agent.IdentityClaim = req.Agent.clone().IdentityClaim
		}
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
	// The request's agent, checked with the request's tenant, is not
	// checked again.
	if err := rc.validate(reqAgent && rc.TenantID == req.TenantID); err != nil {
		return nil, err
	}
	return &rc, nil
}

// CheckAgreement reports where a run context disagrees with the request it
// runs: tenant_id, session_id, trace_id, intent, locale, user.user_id,
// and, when rc names an agent (agent_urn or agent_id), agent.agent_urn,
// agent.agent_id, agent.workload_identity and agent.identity_claim — each
// set on both sides to different values. The error is a *ValidationError
// (kind run-context) with one CodeConflict problem per member, matching
// ErrConflict and ErrInvalid; nil when they agree. A member set on one
// side only is no disagreement: Materialize fills it from the request.
//
// Materialize refuses a host run context that disagrees; compiler.Compile
// refuses a request and run context that disagree, with this same check.
func CheckAgreement(req *InvokeRequest, rc *RunContext) error {
	if req == nil || rc == nil {
		return invalid(KindRunContext, []Problem{{Code: CodeRequired, Message: "request and run context are required"}})
	}
	var ps problems
	differ := func(path, have, want string) {
		if have != "" && want != "" && have != want {
			ps.add(path, CodeConflict, fmt.Sprintf("host run context and request disagree on %s", path))
		}
	}
	differ("tenant_id", rc.TenantID, req.TenantID)
	differ("session_id", rc.SessionID, req.SessionID)
	differ("trace_id", rc.TraceID, req.Trace.TraceID)
	differ("intent", rc.Intent, req.Input.Intent)
	differ("locale", rc.Locale, req.Input.Locale)
	differ("user.user_id", rc.User.UserID, req.User.UserID)
	if hostAgent(rc) {
		differ("agent.agent_urn", rc.Agent.AgentURN, req.Agent.AgentURN)
		differ("agent.agent_id", rc.Agent.AgentID, req.Agent.AgentID)
		differ("agent.workload_identity", rc.Agent.WorkloadIdentity, req.Agent.WorkloadIdentity)
		if hc, rq := rc.Agent.IdentityClaim, req.Agent.IdentityClaim; hc != nil && rq != nil && hc.ClaimHash != rq.ClaimHash {
			ps.add("agent.identity_claim", CodeConflict, "host run context and request carry different identity claims")
		}
	}
	return ps.err(KindRunContext)
}

// hostAgent reports whether rc names its agent (otherwise Materialize
// takes the request's agent whole).
func hostAgent(rc *RunContext) bool { return rc.Agent.AgentURN != "" || rc.Agent.AgentID != "" }

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
		for _, k := range sortedkeys.Of(h.BucketTokens) {
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
