package engine

import (
	"errors"
	"slices"
	"strconv"

	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/runcontext"
)

// The run's request and run context are written here as their MarshalJSON
// writes them when they carry no extension members (nor the user unknown
// claims): then MarshalJSON is json.Marshal of the struct, which these
// writers follow member by member. With extensions, or when a value has
// no JSON form (an approval mode MarshalText refuses), MarshalJSON itself
// writes them, or fails, as before. TestCheckpointRunValues holds the two
// to the same bytes for random requests and run contexts.

// errNotPlain stops a writer below: the value is left to MarshalJSON.
var errNotPlain = errors.New("contextos: not written without MarshalJSON")

// encodeRunContext is rc.MarshalJSON() (what the checkpoint writes of rc).
func encodeRunContext(rc *runcontext.RunContext) ([]byte, error) {
	var w objectWriter
	if len(rc.Extensions) == 0 && w.plain(func() { w.runContext(rc) }) {
		return w.b, nil
	}
	return rc.MarshalJSON()
}

// encodeRequest is r.MarshalJSON() (what the checkpoint writes of r).
func encodeRequest(r *runcontext.InvokeRequest) ([]byte, error) {
	var w objectWriter
	if len(r.Extensions) == 0 && w.plain(func() { w.request(r) }) {
		return w.b, nil
	}
	return r.MarshalJSON()
}

// plain runs write, which writes a value into w, and reports whether it
// wrote it: when it stopped (errNotPlain, or encoding/json failed on a
// value inside), w is left as it was.
func (w *objectWriter) plain(write func()) bool {
	mark, err := len(w.b), w.err
	w.err = nil
	write()
	ok := w.err == nil
	if !ok {
		w.b = w.b[:mark]
	}
	w.err = err
	return ok
}

// strictMode writes an approval mode as MarshalText does, or stops.
func (w *objectWriter) strictMode(m runcontext.ApprovalMode) {
	t, err := m.MarshalText()
	if err != nil {
		w.fail(errNotPlain)
		return
	}
	w.b = jsonv.AppendString(w.b, string(t))
}

func (w *objectWriter) runContext(rc *runcontext.RunContext) {
	s := w.open()
	w.member(s, "run_id")
	w.string(rc.RunID)
	w.member(s, "trace_id")
	w.string(rc.TraceID)
	if rc.SessionID != "" {
		w.member(s, "session_id")
		w.string(rc.SessionID)
	}
	w.member(s, "tenant_id")
	w.string(rc.TenantID)
	w.member(s, "user")
	w.user(&rc.User)
	w.member(s, "agent")
	w.agent(&rc.Agent)
	if rc.Intent != "" {
		w.member(s, "intent")
		w.string(rc.Intent)
	}
	if rc.Locale != "" {
		w.member(s, "locale")
		w.string(rc.Locale)
	}
	w.member(s, "safety_mode")
	w.strictMode(rc.SafetyMode)
	w.member(s, "run_budget")
	w.runBudget(&rc.RunBudget)
	if tc := rc.TraceContext; tc != nil {
		w.member(s, "trace_context")
		t := w.open()
		w.member(t, "traceparent")
		w.string(tc.TraceParent)
		if tc.TraceState != "" {
			w.member(t, "tracestate")
			w.string(tc.TraceState)
		}
		if tc.Baggage != "" {
			w.member(t, "baggage")
			w.string(tc.Baggage)
		}
		w.close()
	}
	if len(rc.Metadata) > 0 {
		w.member(s, "metadata")
		w.object(rc.Metadata, 0)
	}
	w.close()
}

func (w *objectWriter) user(u *runcontext.UserClaims) {
	if len(u.Claims) > 0 {
		w.fail(errNotPlain)
		return
	}
	s := w.open()
	w.member(s, "user_id")
	w.string(u.UserID)
	if d := u.Delegation; d != nil {
		w.member(s, "delegation")
		t := w.open()
		w.member(t, "auth_type")
		w.string(string(d.AuthType))
		w.member(t, "scopes")
		w.strings(d.Scopes)
		w.member(t, "subject")
		w.string(d.Subject)
		if d.TokenRef != "" {
			w.member(t, "token_ref")
			w.string(d.TokenRef)
		}
		w.close()
	}
	if u.Role != "" {
		w.member(s, "role")
		w.string(u.Role)
	}
	if u.TenureDays != nil {
		w.member(s, "tenure_days")
		w.b = strconv.AppendInt(w.b, int64(*u.TenureDays), 10)
	}
	w.close()
}

func (w *objectWriter) agent(a *runcontext.AgentIdentity) {
	s := w.open()
	if a.AgentID != "" {
		w.member(s, "agent_id")
		w.string(a.AgentID)
	}
	w.member(s, "agent_urn")
	w.string(a.AgentURN)
	w.member(s, "workload_identity")
	w.string(a.WorkloadIdentity)
	if a.Role != "" {
		w.member(s, "role")
		w.string(a.Role)
	}
	if a.TokenRef != "" {
		w.member(s, "token_ref")
		w.string(a.TokenRef)
	}
	if a.Lifecycle != "" {
		w.member(s, "lifecycle")
		w.string(string(a.Lifecycle))
	}
	if len(a.PrincipalChain) > 0 {
		w.member(s, "principal_chain")
		w.principals(a.PrincipalChain)
	}
	if c := a.IdentityClaim; c != nil {
		w.member(s, "identity_claim")
		t := w.open()
		for _, f := range [...]struct {
			k, v string
			omit bool
		}{{"version", c.Version, false}, {"iss", c.Iss, false}, {"sub", c.Sub, false}, {"aud", c.Aud, true},
			{"run_id", c.RunID, false}, {"session_id", c.SessionID, true}, {"tenant_id", c.TenantID, false}} {
			if !f.omit || f.v != "" {
				w.member(t, f.k)
				w.string(f.v)
			}
		}
		w.member(t, "principal_chain")
		w.principals(c.PrincipalChain)
		w.member(t, "scopes")
		w.strings(c.Scopes)
		w.member(t, "nbf")
		w.b = strconv.AppendInt(w.b, c.Nbf, 10)
		w.member(t, "exp")
		w.b = strconv.AppendInt(w.b, c.Exp, 10)
		w.member(t, "kid")
		w.string(c.Kid)
		w.member(t, "claim_hash")
		w.string(c.ClaimHash)
		if c.Sig != "" {
			w.member(t, "sig")
			w.string(c.Sig)
		}
		w.close()
	}
	w.close()
}

// principals writes a principal chain; nil is null.
func (w *objectWriter) principals(ps []runcontext.Principal) {
	if ps == nil {
		w.null()
		return
	}
	w.b = append(w.b, '[')
	for i := range ps {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		p := &ps[i]
		s := w.open()
		w.member(s, "kind")
		w.string(string(p.Kind))
		w.member(s, "id")
		w.string(p.ID)
		if p.TenantID != "" {
			w.member(s, "tenant_id")
			w.string(p.TenantID)
		}
		if p.Display != "" {
			w.member(s, "display")
			w.string(p.Display)
		}
		w.close()
	}
	w.b = append(w.b, ']')
}

func (w *objectWriter) runBudget(b *runcontext.RunBudget) {
	s := w.open()
	w.member(s, "total_tokens")
	w.b = strconv.AppendInt(w.b, int64(b.TotalTokens), 10)
	if len(b.BucketTokens) > 0 {
		w.member(s, "bucket_tokens")
		w.bucketTokens(b.BucketTokens)
	}
	w.member(s, "max_tool_calls")
	w.b = strconv.AppendInt(w.b, int64(b.MaxToolCalls), 10)
	w.member(s, "max_replan_attempts")
	w.b = strconv.AppendInt(w.b, int64(b.MaxReplanAttempts), 10)
	w.member(s, "wall_clock_ms")
	w.b = strconv.AppendInt(w.b, b.WallClockMS, 10)
	w.member(s, "max_cost_cents")
	w.float(b.MaxCostCents)
	for _, f := range [...]struct {
		k string
		v int64
	}{{"plan_timeout_ms", b.PlanTimeoutMS}, {"max_payload_bytes", b.MaxPayloadBytes}, {"max_session_duration_ms", b.MaxSessionDurationMS}} {
		if f.v != 0 {
			w.member(s, f.k)
			w.b = strconv.AppendInt(w.b, f.v, 10)
		}
	}
	w.close()
}

// bucketTokens writes a budget's bucket_tokens as encoding/json writes the
// map (a Bucket is a string with no text marshaller): its keys sorted, as
// strings, and its ints.
func (w *objectWriter) bucketTokens(m map[runcontext.Bucket]int) {
	mark := len(w.keys)
	for k := range m {
		w.keys = append(w.keys, string(k))
	}
	ks := w.keys[mark:]
	slices.Sort(ks)
	w.b = append(w.b, '{')
	for i, k := range ks {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = jsonv.AppendString(w.b, k)
		w.b = append(w.b, ':')
		w.b = strconv.AppendInt(w.b, int64(m[runcontext.Bucket(k)]), 10)
	}
	w.b = append(w.b, '}')
	clear(ks)
	w.keys = w.keys[:mark]
}

func (w *objectWriter) request(r *runcontext.InvokeRequest) {
	s := w.open()
	w.member(s, "request_id")
	w.string(r.RequestID)
	if r.SessionID != "" {
		w.member(s, "session_id")
		w.string(r.SessionID)
	}
	w.member(s, "tenant_id")
	w.string(r.TenantID)
	w.member(s, "user")
	w.user(&r.User)
	w.member(s, "agent")
	w.agent(&r.Agent)
	w.member(s, "context_pack_refs")
	w.strings(r.ContextPackRefs)
	w.member(s, "input")
	in := &r.Input
	t := w.open()
	w.member(t, "intent")
	w.string(in.Intent)
	w.member(t, "message")
	w.string(in.Message)
	if in.Channel != "" {
		w.member(t, "channel")
		w.string(in.Channel)
	}
	if in.Locale != "" {
		w.member(t, "locale")
		w.string(in.Locale)
	}
	if len(in.Context) > 0 {
		w.member(t, "context")
		w.object(in.Context, 0)
	}
	w.close()
	w.member(s, "mode")
	w.string(string(r.Mode))
	w.member(s, "runtime")
	w.runtimeHints(&r.Runtime)
	if len(r.Attachments) > 0 {
		w.member(s, "attachments")
		w.b = append(w.b, '[')
		for i, a := range r.Attachments {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, `{"artifact_id":`...)
			w.string(a.ArtifactID)
			w.b = append(w.b, `,"media_type":`...)
			w.string(a.MediaType)
			w.b = append(w.b, `,"sha256":`...)
			w.string(a.SHA256)
			w.b = append(w.b, `,"uri":`...)
			w.string(a.URI)
			w.close()
		}
		w.b = append(w.b, ']')
	}
	w.member(s, "trace")
	tr := &r.Trace
	t = w.open()
	w.member(t, "trace_id")
	w.string(tr.TraceID)
	w.member(t, "span_id")
	w.string(tr.SpanID)
	for _, f := range [...]struct{ k, v string }{{"trace_flags", tr.TraceFlags}, {"tracestate", tr.TraceState}, {"baggage", tr.Baggage}} {
		if f.v != "" {
			w.member(t, f.k)
			w.string(f.v)
		}
	}
	w.close()
	w.close()
}

func (w *objectWriter) runtimeHints(h *runcontext.RuntimeHints) {
	s := w.open()
	i64 := func(k string, v *int64) {
		if v != nil {
			w.member(s, k)
			w.b = strconv.AppendInt(w.b, *v, 10)
		}
	}
	i := func(k string, v *int) {
		if v != nil {
			w.member(s, k)
			w.b = strconv.AppendInt(w.b, int64(*v), 10)
		}
	}
	i64("plan_timeout_ms", h.PlanTimeoutMS)
	i64("max_session_duration_ms", h.MaxSessionDurationMS)
	i("max_tool_calls", h.MaxToolCalls)
	i64("max_payload_bytes", h.MaxPayloadBytes)
	if h.MaxCostCents != nil {
		w.member(s, "max_cost_cents")
		w.float(*h.MaxCostCents)
	}
	i("total_tokens", h.TotalTokens)
	if len(h.BucketTokens) > 0 {
		w.member(s, "bucket_tokens")
		w.marshal(&h.BucketTokens)
	}
	i("max_replan_attempts", h.MaxReplanAttempts)
	i64("wall_clock_ms", h.WallClockMS)
	w.close()
}
