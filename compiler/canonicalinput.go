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

// objectWriter writes one JSON object's members in the order given (the
// callers give them in canonical order); the first error is kept and ends
// the writing.
type objectWriter struct {
	b   []byte
	sep byte
	err error
}

func newObject(dst []byte) objectWriter { return objectWriter{b: dst, sep: '{'} }

func (o *objectWriter) name(n string) {
	o.b = append(o.b, o.sep, '"')
	o.b = append(append(o.b, n...), '"', ':')
	o.sep = ','
}

func (o *objectWriter) str(n, v string) {
	o.name(n)
	o.b = canon.AppendString(o.b, v)
}

// strOmit writes a string member tagged omitempty.
func (o *objectWriter) strOmit(n, v string) {
	if v != "" {
		o.str(n, v)
	}
}

func (o *objectWriter) int(n string, v int64) {
	if o.err != nil {
		return
	}
	o.name(n)
	o.b, o.err = canon.AppendInt(o.b, v)
}

func (o *objectWriter) float(n string, v float64) {
	if o.err != nil {
		return
	}
	o.name(n)
	o.b, o.err = canon.AppendFloat(o.b, v)
}

func (o *objectWriter) strings(n string, v []string) {
	o.name(n)
	o.b = appendStrings(o.b, v)
}

// with writes member n's value by f.
func (o *objectWriter) with(n string, f func(dst []byte) ([]byte, error)) {
	if o.err != nil {
		return
	}
	o.name(n)
	o.b, o.err = f(o.b)
}

func (o *objectWriter) end() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	if o.sep == '{' {
		return append(o.b, '{', '}'), nil
	}
	return append(o.b, '}'), nil
}

func appendRequest(dst []byte, r *runcontext.InvokeRequest) ([]byte, error) {
	o := newObject(dst)
	o.with("agent", func(b []byte) ([]byte, error) { return appendAgent(b, &r.Agent) })
	if len(r.Attachments) > 0 {
		o.with("attachments", func(b []byte) ([]byte, error) { return appendSlice(b, r.Attachments, appendAttachment) })
	}
	o.strings("context_pack_refs", r.ContextPackRefs)
	o.with("input", func(b []byte) ([]byte, error) { return appendInput(b, &r.Input) })
	o.str("mode", string(r.Mode))
	o.str("request_id", r.RequestID)
	o.with("runtime", func(b []byte) ([]byte, error) { return appendHints(b, &r.Runtime) })
	o.strOmit("session_id", r.SessionID)
	o.str("tenant_id", r.TenantID)
	o.with("trace", func(b []byte) ([]byte, error) { return appendTrace(b, &r.Trace), nil })
	o.with("user", func(b []byte) ([]byte, error) { return appendUser(b, &r.User) })
	return o.end()
}

func appendRunContext(dst []byte, rc *runcontext.RunContext) ([]byte, error) {
	o := newObject(dst)
	o.with("agent", func(b []byte) ([]byte, error) { return appendAgent(b, &rc.Agent) })
	o.strOmit("intent", rc.Intent)
	o.strOmit("locale", rc.Locale)
	if len(rc.Metadata) > 0 {
		o.with("metadata", func(b []byte) ([]byte, error) { return canon.AppendValue(b, rc.Metadata) })
	}
	o.with("run_budget", func(b []byte) ([]byte, error) { return appendRunBudget(b, &rc.RunBudget) })
	o.str("run_id", rc.RunID)
	o.with("safety_mode", func(b []byte) ([]byte, error) { return appendApprovalMode(b, rc.SafetyMode) })
	o.strOmit("session_id", rc.SessionID)
	o.str("tenant_id", rc.TenantID)
	if tc := rc.TraceContext; tc != nil {
		o.name("trace_context")
		t := newObject(o.b)
		t.strOmit("baggage", tc.Baggage)
		t.str("traceparent", tc.TraceParent)
		t.strOmit("tracestate", tc.TraceState)
		o.b, _ = t.end()
	}
	o.str("trace_id", rc.TraceID)
	o.with("user", func(b []byte) ([]byte, error) { return appendUser(b, &rc.User) })
	return o.end()
}

func appendUser(dst []byte, u *runcontext.UserClaims) ([]byte, error) {
	if len(u.Claims) > 0 {
		return canon.AppendValue(dst, u)
	}
	o := newObject(dst)
	if d := u.Delegation; d != nil {
		o.name("delegation")
		t := newObject(o.b)
		t.str("auth_type", string(d.AuthType))
		t.strings("scopes", d.Scopes)
		t.str("subject", d.Subject)
		t.strOmit("token_ref", d.TokenRef)
		o.b, _ = t.end()
	}
	o.strOmit("role", u.Role)
	if u.TenureDays != nil {
		o.int("tenure_days", int64(*u.TenureDays))
	}
	o.str("user_id", u.UserID)
	return o.end()
}

func appendAgent(dst []byte, a *runcontext.AgentIdentity) ([]byte, error) {
	o := newObject(dst)
	o.strOmit("agent_id", a.AgentID)
	o.str("agent_urn", a.AgentURN)
	if c := a.IdentityClaim; c != nil {
		o.with("identity_claim", func(b []byte) ([]byte, error) { return appendClaim(b, c) })
	}
	o.strOmit("lifecycle", string(a.Lifecycle))
	if len(a.PrincipalChain) > 0 {
		o.with("principal_chain", func(b []byte) ([]byte, error) { return appendSlice(b, a.PrincipalChain, appendPrincipal) })
	}
	o.strOmit("role", a.Role)
	o.strOmit("token_ref", a.TokenRef)
	o.str("workload_identity", a.WorkloadIdentity)
	return o.end()
}

func appendClaim(dst []byte, c *runcontext.IdentityClaim) ([]byte, error) {
	o := newObject(dst)
	o.strOmit("aud", c.Aud)
	o.str("claim_hash", c.ClaimHash)
	o.int("exp", c.Exp)
	o.str("iss", c.Iss)
	o.str("kid", c.Kid)
	o.int("nbf", c.Nbf)
	o.with("principal_chain", func(b []byte) ([]byte, error) { return appendSlice(b, c.PrincipalChain, appendPrincipal) })
	o.str("run_id", c.RunID)
	o.strings("scopes", c.Scopes)
	o.strOmit("session_id", c.SessionID)
	o.strOmit("sig", c.Sig)
	o.str("sub", c.Sub)
	o.str("tenant_id", c.TenantID)
	o.str("version", c.Version)
	return o.end()
}

func appendPrincipal(dst []byte, p *runcontext.Principal) ([]byte, error) {
	o := newObject(dst)
	o.strOmit("display", p.Display)
	o.str("id", p.ID)
	o.str("kind", string(p.Kind))
	o.strOmit("tenant_id", p.TenantID)
	return o.end()
}

func appendAttachment(dst []byte, a *runcontext.Attachment) ([]byte, error) {
	o := newObject(dst)
	o.str("artifact_id", a.ArtifactID)
	o.str("media_type", a.MediaType)
	o.str("sha256", a.SHA256)
	o.str("uri", a.URI)
	return o.end()
}

func appendInput(dst []byte, in *runcontext.Input) ([]byte, error) {
	o := newObject(dst)
	o.strOmit("channel", in.Channel)
	if len(in.Context) > 0 {
		o.with("context", func(b []byte) ([]byte, error) { return canon.AppendValue(b, in.Context) })
	}
	o.str("intent", in.Intent)
	o.strOmit("locale", in.Locale)
	o.str("message", in.Message)
	return o.end()
}

func appendBucketTokens(dst []byte, m map[runcontext.Bucket]int) ([]byte, error) {
	return appendMap(dst, m, appendIntValue)
}

func appendHints(dst []byte, h *runcontext.RuntimeHints) ([]byte, error) {
	o := newObject(dst)
	if len(h.BucketTokens) > 0 {
		o.with("bucket_tokens", func(b []byte) ([]byte, error) { return appendBucketTokens(b, h.BucketTokens) })
	}
	if h.MaxCostCents != nil {
		o.float("max_cost_cents", *h.MaxCostCents)
	}
	if h.MaxPayloadBytes != nil {
		o.int("max_payload_bytes", *h.MaxPayloadBytes)
	}
	if h.MaxReplanAttempts != nil {
		o.int("max_replan_attempts", int64(*h.MaxReplanAttempts))
	}
	if h.MaxSessionDurationMS != nil {
		o.int("max_session_duration_ms", *h.MaxSessionDurationMS)
	}
	if h.MaxToolCalls != nil {
		o.int("max_tool_calls", int64(*h.MaxToolCalls))
	}
	if h.PlanTimeoutMS != nil {
		o.int("plan_timeout_ms", *h.PlanTimeoutMS)
	}
	if h.TotalTokens != nil {
		o.int("total_tokens", int64(*h.TotalTokens))
	}
	if h.WallClockMS != nil {
		o.int("wall_clock_ms", *h.WallClockMS)
	}
	return o.end()
}

func appendRunBudget(dst []byte, rb *runcontext.RunBudget) ([]byte, error) {
	o := newObject(dst)
	if len(rb.BucketTokens) > 0 {
		o.with("bucket_tokens", func(b []byte) ([]byte, error) { return appendBucketTokens(b, rb.BucketTokens) })
	}
	o.float("max_cost_cents", rb.MaxCostCents)
	if rb.MaxPayloadBytes != 0 {
		o.int("max_payload_bytes", rb.MaxPayloadBytes)
	}
	o.int("max_replan_attempts", int64(rb.MaxReplanAttempts))
	if rb.MaxSessionDurationMS != 0 {
		o.int("max_session_duration_ms", rb.MaxSessionDurationMS)
	}
	o.int("max_tool_calls", int64(rb.MaxToolCalls))
	if rb.PlanTimeoutMS != 0 {
		o.int("plan_timeout_ms", rb.PlanTimeoutMS)
	}
	o.int("total_tokens", int64(rb.TotalTokens))
	o.int("wall_clock_ms", rb.WallClockMS)
	return o.end()
}

func appendTrace(dst []byte, t *runcontext.Trace) []byte {
	o := newObject(dst)
	o.strOmit("baggage", t.Baggage)
	o.str("span_id", t.SpanID)
	o.strOmit("trace_flags", t.TraceFlags)
	o.str("trace_id", t.TraceID)
	o.strOmit("tracestate", t.TraceState)
	b, _ := o.end()
	return b
}
