package compiler

import (
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/runcontext"
)

// The writers below are the canonical (RFC 8785) form of the request and
// the run context, whose digests every compile records (request_hash,
// run_context_hash), written field by field instead of by canon's
// reflective encoder, under the same contract as canonical.go's writers:
// exactly what canon.JSON writes for the same values. An open object with
// extension members (rare) and the free-form maps (the input's context,
// the run's metadata) are left to canon.AppendValue.
// TestInputWritersMatchReflection and FuzzInputWriters hold them to
// canon.JSON, every field of every type filled.

// requestEncoding is an InvokeRequest's canonical form.
type requestEncoding struct{ r *runcontext.InvokeRequest }

// AppendCanonical implements canon.Appender. Where the writer fails, the
// value is encoded again by canon.AppendValue, for the very error the
// reflective encoder reports.
func (e requestEncoding) AppendCanonical(dst []byte) ([]byte, error) {
	r := e.r
	if r == nil || len(r.Extensions) > 0 || len(r.User.Claims) > 0 {
		return canon.AppendValue(dst, r)
	}
	out, err := appendRequest(dst, r)
	if err != nil {
		return canon.AppendValue(dst, r)
	}
	return out, nil
}

// runContextEncoding is a RunContext's canonical form.
type runContextEncoding struct{ rc *runcontext.RunContext }

// AppendCanonical implements canon.Appender, as requestEncoding's.
func (e runContextEncoding) AppendCanonical(dst []byte) ([]byte, error) {
	rc := e.rc
	if rc == nil || len(rc.Extensions) > 0 || len(rc.User.Claims) > 0 {
		return canon.AppendValue(dst, rc)
	}
	out, err := appendRunContext(dst, rc)
	if err != nil {
		return canon.AppendValue(dst, rc)
	}
	return out, nil
}

func appendRequest(dst []byte, r *runcontext.InvokeRequest) ([]byte, error) {
	o := canon.NewObject(dst)
	o.With(`"agent":`, func(b []byte) ([]byte, error) { return appendAgent(b, &r.Agent) })
	if len(r.Attachments) > 0 {
		o.With(`"attachments":`, func(b []byte) ([]byte, error) { return appendSlice(b, r.Attachments, appendAttachment) })
	}
	o.Strings(`"context_pack_refs":`, r.ContextPackRefs)
	o.With(`"input":`, func(b []byte) ([]byte, error) { return appendInput(b, &r.Input) })
	o.Str(`"mode":`, string(r.Mode))
	o.Str(`"request_id":`, r.RequestID)
	o.With(`"runtime":`, func(b []byte) ([]byte, error) { return appendHints(b, &r.Runtime) })
	o.StrOmit(`"session_id":`, r.SessionID)
	o.Str(`"tenant_id":`, r.TenantID)
	o.With(`"trace":`, func(b []byte) ([]byte, error) { return appendTrace(b, &r.Trace), nil })
	o.With(`"user":`, func(b []byte) ([]byte, error) { return appendUser(b, &r.User) })
	return o.Close()
}

func appendRunContext(dst []byte, rc *runcontext.RunContext) ([]byte, error) {
	o := canon.NewObject(dst)
	o.With(`"agent":`, func(b []byte) ([]byte, error) { return appendAgent(b, &rc.Agent) })
	o.StrOmit(`"intent":`, rc.Intent)
	o.StrOmit(`"locale":`, rc.Locale)
	if len(rc.Metadata) > 0 {
		o.With(`"metadata":`, func(b []byte) ([]byte, error) { return canon.AppendValue(b, rc.Metadata) })
	}
	o.With(`"run_budget":`, func(b []byte) ([]byte, error) { return appendRunBudget(b, &rc.RunBudget) })
	o.Str(`"run_id":`, rc.RunID)
	o.With(`"safety_mode":`, func(b []byte) ([]byte, error) { return appendApprovalMode(b, rc.SafetyMode) })
	o.StrOmit(`"session_id":`, rc.SessionID)
	o.Str(`"tenant_id":`, rc.TenantID)
	if tc := rc.TraceContext; tc != nil {
		o.Key(`"trace_context":`)
		t := canon.NewObject(o.B)
		t.StrOmit(`"baggage":`, tc.Baggage)
		t.Str(`"traceparent":`, tc.TraceParent)
		t.StrOmit(`"tracestate":`, tc.TraceState)
		o.B, _ = t.Close()
	}
	o.Str(`"trace_id":`, rc.TraceID)
	o.With(`"user":`, func(b []byte) ([]byte, error) { return appendUser(b, &rc.User) })
	return o.Close()
}

func appendUser(dst []byte, u *runcontext.UserClaims) ([]byte, error) {
	if len(u.Claims) > 0 {
		return canon.AppendValue(dst, u)
	}
	o := canon.NewObject(dst)
	if d := u.Delegation; d != nil {
		o.Key(`"delegation":`)
		t := canon.NewObject(o.B)
		t.Str(`"auth_type":`, string(d.AuthType))
		t.Strings(`"scopes":`, d.Scopes)
		t.Str(`"subject":`, d.Subject)
		t.StrOmit(`"token_ref":`, d.TokenRef)
		o.B, _ = t.Close()
	}
	o.StrOmit(`"role":`, u.Role)
	if u.TenureDays != nil {
		o.Int(`"tenure_days":`, int64(*u.TenureDays))
	}
	o.Str(`"user_id":`, u.UserID)
	return o.Close()
}

func appendAgent(dst []byte, a *runcontext.AgentIdentity) ([]byte, error) {
	o := canon.NewObject(dst)
	o.StrOmit(`"agent_id":`, a.AgentID)
	o.Str(`"agent_urn":`, a.AgentURN)
	if c := a.IdentityClaim; c != nil {
		o.With(`"identity_claim":`, func(b []byte) ([]byte, error) { return appendClaim(b, c) })
	}
	o.StrOmit(`"lifecycle":`, string(a.Lifecycle))
	if len(a.PrincipalChain) > 0 {
		o.With(`"principal_chain":`, func(b []byte) ([]byte, error) { return appendSlice(b, a.PrincipalChain, appendPrincipal) })
	}
	o.StrOmit(`"role":`, a.Role)
	o.StrOmit(`"token_ref":`, a.TokenRef)
	o.Str(`"workload_identity":`, a.WorkloadIdentity)
	return o.Close()
}

func appendClaim(dst []byte, c *runcontext.IdentityClaim) ([]byte, error) {
	o := canon.NewObject(dst)
	o.StrOmit(`"aud":`, c.Aud)
	o.Str(`"claim_hash":`, c.ClaimHash)
	o.Int(`"exp":`, c.Exp)
	o.Str(`"iss":`, c.Iss)
	o.Str(`"kid":`, c.Kid)
	o.Int(`"nbf":`, c.Nbf)
	o.With(`"principal_chain":`, func(b []byte) ([]byte, error) { return appendSlice(b, c.PrincipalChain, appendPrincipal) })
	o.Str(`"run_id":`, c.RunID)
	o.Strings(`"scopes":`, c.Scopes)
	o.StrOmit(`"session_id":`, c.SessionID)
	o.StrOmit(`"sig":`, c.Sig)
	o.Str(`"sub":`, c.Sub)
	o.Str(`"tenant_id":`, c.TenantID)
	o.Str(`"version":`, c.Version)
	return o.Close()
}

func appendPrincipal(dst []byte, p *runcontext.Principal) ([]byte, error) {
	o := canon.NewObject(dst)
	o.StrOmit(`"display":`, p.Display)
	o.Str(`"id":`, p.ID)
	o.Str(`"kind":`, string(p.Kind))
	o.StrOmit(`"tenant_id":`, p.TenantID)
	return o.Close()
}

func appendAttachment(dst []byte, a *runcontext.Attachment) ([]byte, error) {
	o := canon.NewObject(dst)
	o.Str(`"artifact_id":`, a.ArtifactID)
	o.Str(`"media_type":`, a.MediaType)
	o.Str(`"sha256":`, a.SHA256)
	o.Str(`"uri":`, a.URI)
	return o.Close()
}

func appendInput(dst []byte, in *runcontext.Input) ([]byte, error) {
	o := canon.NewObject(dst)
	o.StrOmit(`"channel":`, in.Channel)
	if len(in.Context) > 0 {
		o.With(`"context":`, func(b []byte) ([]byte, error) { return canon.AppendValue(b, in.Context) })
	}
	o.Str(`"intent":`, in.Intent)
	o.StrOmit(`"locale":`, in.Locale)
	o.Str(`"message":`, in.Message)
	return o.Close()
}

func appendBucketTokens(dst []byte, m map[runcontext.Bucket]int) ([]byte, error) {
	return appendMap(dst, m, appendIntValue)
}

func appendHints(dst []byte, h *runcontext.RuntimeHints) ([]byte, error) {
	o := canon.NewObject(dst)
	if len(h.BucketTokens) > 0 {
		o.With(`"bucket_tokens":`, func(b []byte) ([]byte, error) { return appendBucketTokens(b, h.BucketTokens) })
	}
	if h.MaxCostCents != nil {
		o.Float(`"max_cost_cents":`, *h.MaxCostCents)
	}
	if h.MaxPayloadBytes != nil {
		o.Int(`"max_payload_bytes":`, *h.MaxPayloadBytes)
	}
	if h.MaxReplanAttempts != nil {
		o.Int(`"max_replan_attempts":`, int64(*h.MaxReplanAttempts))
	}
	if h.MaxSessionDurationMS != nil {
		o.Int(`"max_session_duration_ms":`, *h.MaxSessionDurationMS)
	}
	if h.MaxToolCalls != nil {
		o.Int(`"max_tool_calls":`, int64(*h.MaxToolCalls))
	}
	if h.PlanTimeoutMS != nil {
		o.Int(`"plan_timeout_ms":`, *h.PlanTimeoutMS)
	}
	if h.TotalTokens != nil {
		o.Int(`"total_tokens":`, int64(*h.TotalTokens))
	}
	if h.WallClockMS != nil {
		o.Int(`"wall_clock_ms":`, *h.WallClockMS)
	}
	return o.Close()
}

func appendRunBudget(dst []byte, rb *runcontext.RunBudget) ([]byte, error) {
	o := canon.NewObject(dst)
	if len(rb.BucketTokens) > 0 {
		o.With(`"bucket_tokens":`, func(b []byte) ([]byte, error) { return appendBucketTokens(b, rb.BucketTokens) })
	}
	o.Float(`"max_cost_cents":`, rb.MaxCostCents)
	if rb.MaxPayloadBytes != 0 {
		o.Int(`"max_payload_bytes":`, rb.MaxPayloadBytes)
	}
	o.Int(`"max_replan_attempts":`, int64(rb.MaxReplanAttempts))
	if rb.MaxSessionDurationMS != 0 {
		o.Int(`"max_session_duration_ms":`, rb.MaxSessionDurationMS)
	}
	o.Int(`"max_tool_calls":`, int64(rb.MaxToolCalls))
	if rb.PlanTimeoutMS != 0 {
		o.Int(`"plan_timeout_ms":`, rb.PlanTimeoutMS)
	}
	o.Int(`"total_tokens":`, int64(rb.TotalTokens))
	o.Int(`"wall_clock_ms":`, rb.WallClockMS)
	return o.Close()
}

func appendTrace(dst []byte, t *runcontext.Trace) []byte {
	o := canon.NewObject(dst)
	o.StrOmit(`"baggage":`, t.Baggage)
	o.Str(`"span_id":`, t.SpanID)
	o.StrOmit(`"trace_flags":`, t.TraceFlags)
	o.Str(`"trace_id":`, t.TraceID)
	o.StrOmit(`"tracestate":`, t.TraceState)
	b, _ := o.Close()
	return b
}
