package runcontext

import (
	"maps"
	"slices"

	"github.com/contextos/contextos/internal/jsonv"
)

// Clone returns a deep copy of rc; nil for nil.
func (rc *RunContext) Clone() *RunContext {
	if rc == nil {
		return nil
	}
	c := rc.clone()
	return &c
}

// clone is Clone of a run context that is not nil, as a value
// (Materialize copies it into the run context it builds).
func (rc *RunContext) clone() RunContext {
	c := *rc
	c.User = rc.User.clone()
	c.Agent = rc.Agent.clone()
	c.RunBudget.BucketTokens = maps.Clone(rc.RunBudget.BucketTokens)
	if rc.TraceContext != nil {
		tc := *rc.TraceContext
		c.TraceContext = &tc
	}
	c.Metadata = jsonv.CloneObject(rc.Metadata)
	c.Extensions = jsonv.CloneRaw(rc.Extensions)
	return c
}

// Clone returns a deep copy of r; nil for nil.
func (r *InvokeRequest) Clone() *InvokeRequest {
	if r == nil {
		return nil
	}
	c := *r
	c.User = r.User.clone()
	c.Agent = r.Agent.clone()
	c.ContextPackRefs = slices.Clone(r.ContextPackRefs)
	c.Input.Context = jsonv.CloneObject(r.Input.Context)
	c.Runtime = r.Runtime.clone()
	c.Attachments = slices.Clone(r.Attachments)
	c.Extensions = jsonv.CloneRaw(r.Extensions)
	return &c
}

// clone returns a deep copy of u.
func (u UserClaims) clone() UserClaims {
	if u.Delegation != nil {
		d := *u.Delegation
		d.Scopes = slices.Clone(d.Scopes)
		u.Delegation = &d
	}
	if u.TenureDays != nil {
		v := *u.TenureDays
		u.TenureDays = &v
	}
	u.Claims = jsonv.CloneRaw(u.Claims)
	return u
}

// clone returns a deep copy of a.
func (a AgentIdentity) clone() AgentIdentity {
	a.PrincipalChain = slices.Clone(a.PrincipalChain)
	if a.IdentityClaim != nil {
		c := *a.IdentityClaim
		c.PrincipalChain = slices.Clone(c.PrincipalChain)
		c.Scopes = slices.Clone(c.Scopes)
		a.IdentityClaim = &c
	}
	return a
}

func (h RuntimeHints) clone() RuntimeHints {
	h.PlanTimeoutMS = clonePtr(h.PlanTimeoutMS)
	h.MaxSessionDurationMS = clonePtr(h.MaxSessionDurationMS)
	h.MaxToolCalls = clonePtr(h.MaxToolCalls)
	h.MaxPayloadBytes = clonePtr(h.MaxPayloadBytes)
	h.MaxCostCents = clonePtr(h.MaxCostCents)
	h.TotalTokens = clonePtr(h.TotalTokens)
	h.BucketTokens = maps.Clone(h.BucketTokens)
	h.MaxReplanAttempts = clonePtr(h.MaxReplanAttempts)
	h.WallClockMS = clonePtr(h.WallClockMS)
	return h
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
