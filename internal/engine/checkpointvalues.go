package engine

import (
	"math"
	"slices"
	"strconv"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// The checkpoint's plan, step results, usage, meter usage, plans and
// chain are written here without reflection: each as json.Marshal writes
// it, member by member in the order and with the omitempty and omitzero
// rules of its struct tags (TestCheckpointValueTypes holds the types to
// the members written here, and fails when one gains a member or a JSON
// method). A value this writer does not know (a host's own type inside an
// args or output map, a json.Number, a policy decision list, an approval
// request, a map nested deeper than maxValueDepth) is left to encoding/json,
// which writes it, or fails, as it would inside the whole state.
// FuzzCheckpointValues and TestCheckpointValuesAreJSONMarshal hold every
// writer to json.Marshal's bytes.

// maxValueDepth bounds the nesting of maps and lists the writer follows
// itself; deeper values (a map that holds itself among them) are left to
// encoding/json, which finds the cycle.
const maxValueDepth = 64

// open starts an object; its members are written with member(start, ...).
func (w *objectWriter) open() int {
	w.b = append(w.b, '{')
	return len(w.b)
}

// member writes the key of a member of the object opened at start (k is
// a plain ASCII name, written as it is).
func (w *objectWriter) member(start int, k string) {
	if len(w.b) > start {
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *objectWriter) close() { w.b = append(w.b, '}') }

func (w *objectWriter) null() { w.b = append(w.b, "null"...) }

func (w *objectWriter) bool(v bool) {
	if v {
		w.b = append(w.b, "true"...)
	} else {
		w.b = append(w.b, "false"...)
	}
}

func (w *objectWriter) string(s string) { w.b = jsonv.AppendString(w.b, s) }

func (w *objectWriter) float(f float64) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		w.marshal(f) // encoding/json's error
		return
	}
	w.b = appendJSONFloat(w.b, f)
}

// strings writes a list of strings; nil is null.
func (w *objectWriter) strings(v []string) {
	if v == nil {
		w.null()
		return
	}
	w.b = append(w.b, '[')
	for i, s := range v {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = jsonv.AppendString(w.b, s)
	}
	w.b = append(w.b, ']')
}

// object writes a JSON object's map as encoding/json does: keys sorted
// bytewise, nil as null.
func (w *objectWriter) object(m map[string]any, depth int) {
	if m == nil {
		w.null()
		return
	}
	if depth > maxValueDepth {
		w.marshal(m)
		return
	}
	mark := len(w.keys)
	for k := range m {
		w.keys = append(w.keys, k)
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
		w.any(m[k], depth+1)
	}
	w.b = append(w.b, '}')
	clear(ks)
	w.keys = w.keys[:mark]
}

// any writes a value of a JSON map or list.
func (w *objectWriter) any(v any, depth int) {
	switch x := v.(type) {
	case nil:
		w.null()
	case string:
		w.b = jsonv.AppendString(w.b, x)
	case bool:
		w.bool(x)
	case float64:
		w.float(x)
	case int:
		w.b = strconv.AppendInt(w.b, int64(x), 10)
	case int64:
		w.b = strconv.AppendInt(w.b, x, 10)
	case map[string]any:
		w.object(x, depth)
	case []any:
		if x == nil {
			w.null()
			return
		}
		if depth > maxValueDepth {
			w.marshal(x)
			return
		}
		w.b = append(w.b, '[')
		for i, e := range x {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.any(e, depth+1)
		}
		w.b = append(w.b, ']')
	default:
		w.marshal(v)
	}
}

// plan writes a *Plan.
func (w *objectWriter) plan(p *Plan) {
	if p == nil {
		w.null()
		return
	}
	s := w.open()
	if len(p.Steps) > 0 {
		w.member(s, "steps")
		w.b = append(w.b, '[')
		for i := range p.Steps {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.step(&p.Steps[i])
		}
		w.b = append(w.b, ']')
	}
	if d := p.Decision; d != nil {
		w.member(s, "decision")
		w.proposal(d)
	}
	if len(p.Memory) > 0 {
		w.member(s, "memory")
		w.marshal(&p.Memory)
	}
	if p.Usage != (PlanUsage{}) {
		w.member(s, "usage")
		w.planUsage(&p.Usage)
	}
	if p.Replan != "" {
		w.member(s, "replan")
		w.string(p.Replan)
	}
	w.close()
}

// plans writes a list of plans; nil is null.
func (w *objectWriter) plans(ps []*Plan) {
	if ps == nil {
		w.null()
		return
	}
	w.b = append(w.b, '[')
	for i, p := range ps {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.plan(p)
	}
	w.b = append(w.b, ']')
}

func (w *objectWriter) step(st *Step) {
	s := w.open()
	w.member(s, "capability_id")
	w.string(st.CapabilityID)
	w.member(s, "args")
	w.object(st.Args, 0)
	if len(st.EvidenceRefs) > 0 {
		w.member(s, "evidence_refs")
		w.strings(st.EvidenceRefs)
	}
	if st.IdempotencyKey != "" {
		w.member(s, "idempotency_key")
		w.string(st.IdempotencyKey)
	}
	if st.ApprovalMode != "" {
		w.member(s, "approval_mode")
		w.approvalMode(st.ApprovalMode)
	}
	if len(st.Attachments) > 0 {
		w.member(s, "attachments")
		w.strings(st.Attachments)
	}
	w.close()
}

// approvalMode writes m as its MarshalText does (a string), or leaves the
// mode it refuses to encoding/json for its error.
func (w *objectWriter) approvalMode(m runcontext.ApprovalMode) {
	t, err := m.MarshalText()
	if err != nil {
		w.marshal(m)
		return
	}
	w.b = jsonv.AppendString(w.b, string(t))
}

func (w *objectWriter) proposal(d *DecisionProposal) {
	s := w.open()
	w.member(s, "decision_key")
	w.string(d.DecisionKey)
	w.member(s, "outcome")
	w.string(d.Outcome)
	if len(d.Outputs) > 0 {
		w.member(s, "outputs")
		w.object(d.Outputs, 0)
	}
	if d.Rationale != "" {
		w.member(s, "rationale")
		w.string(d.Rationale)
	}
	if d.Confidence != 0 {
		w.member(s, "confidence")
		w.float(d.Confidence)
	}
	if len(d.SubjectIDs) > 0 {
		w.member(s, "subject_ids")
		w.strings(d.SubjectIDs)
	}
	if len(d.EvidenceRefs) > 0 {
		w.member(s, "evidence_refs")
		w.strings(d.EvidenceRefs)
	}
	w.close()
}

func (w *objectWriter) planUsage(u *PlanUsage) {
	s := w.open()
	if u.Tokens != 0 {
		w.member(s, "tokens")
		w.b = strconv.AppendInt(w.b, int64(u.Tokens), 10)
	}
	if u.CostCents != 0 {
		w.member(s, "cost_cents")
		w.float(u.CostCents)
	}
	if u.InputTokens != 0 {
		w.member(s, "input_tokens")
		w.b = strconv.AppendInt(w.b, int64(u.InputTokens), 10)
	}
	if u.OutputTokens != 0 {
		w.member(s, "output_tokens")
		w.b = strconv.AppendInt(w.b, int64(u.OutputTokens), 10)
	}
	if u.CachedInputTokens != 0 {
		w.member(s, "cached_input_tokens")
		w.b = strconv.AppendInt(w.b, int64(u.CachedInputTokens), 10)
	}
	w.close()
}

func (w *objectWriter) meterUsage(u *runcontext.Usage) {
	s := w.open()
	w.member(s, "tokens")
	w.b = strconv.AppendInt(w.b, int64(u.Tokens), 10)
	if len(u.TokensByBucket) > 0 {
		w.member(s, "tokens_by_bucket")
		w.marshal(&u.TokensByBucket)
	}
	w.member(s, "tool_calls")
	w.b = strconv.AppendInt(w.b, int64(u.ToolCalls), 10)
	w.member(s, "cost_cents")
	w.float(u.CostCents)
	w.member(s, "wall_clock_ms")
	w.b = strconv.AppendInt(w.b, u.WallClockMS, 10)
	w.close()
}

// spent writes a spent_since_point member's value.
func (w *objectWriter) spent(u *replay.Spent) {
	s := w.open()
	if u.Tokens != 0 {
		w.member(s, "tokens")
		w.b = strconv.AppendInt(w.b, int64(u.Tokens), 10)
	}
	if u.CostCents != 0 {
		w.member(s, "cost_cents")
		w.float(u.CostCents)
	}
	if u.WallClockMS != 0 {
		w.member(s, "wall_clock_ms")
		w.b = strconv.AppendInt(w.b, u.WallClockMS, 10)
	}
	w.close()
}

// callInProgress writes a call_in_progress member's value.
func (w *objectWriter) callInProgress(c *callInProgress) {
	s := w.open()
	w.member(s, "tool_call_id")
	w.string(c.ToolCallID)
	w.member(s, "seq")
	w.b = strconv.AppendInt(w.b, int64(c.Seq), 10)
	if c.Tokens != 0 {
		w.member(s, "tokens")
		w.b = strconv.AppendInt(w.b, int64(c.Tokens), 10)
	}
	if c.CostCents != 0 {
		w.member(s, "cost_cents")
		w.float(c.CostCents)
	}
	w.close()
}

// results writes the step results; nil is null.
func (w *objectWriter) results(rs []StepResult) {
	if rs == nil {
		w.null()
		return
	}
	w.b = append(w.b, '[')
	for i := range rs {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		r := &rs[i]
		s := w.open()
		w.member(s, "turn")
		w.b = strconv.AppendInt(w.b, int64(r.Turn), 10)
		w.member(s, "index")
		w.b = strconv.AppendInt(w.b, int64(r.Index), 10)
		w.member(s, "step")
		w.step(&r.Step)
		w.member(s, "result")
		w.envelope(r.Result)
		if len(r.PolicyDecisions) > 0 {
			w.member(s, "policy_decisions")
			w.marshal(&r.PolicyDecisions)
		}
		w.close()
	}
	w.b = append(w.b, ']')
}

func (w *objectWriter) envelope(e *gateway.ToolResultEnvelope) {
	if e == nil {
		w.null()
		return
	}
	s := w.open()
	w.member(s, "envelope_version")
	w.string(e.EnvelopeVersion)
	w.member(s, "tool_call_id")
	w.string(e.ToolCallID)
	w.member(s, "run_id")
	w.string(e.RunID)
	w.member(s, "trace_id")
	w.string(e.TraceID)
	if e.SessionID != "" {
		w.member(s, "session_id")
		w.string(e.SessionID)
	}
	w.member(s, "capability_id")
	w.string(e.CapabilityID)
	w.member(s, "status")
	w.string(string(e.Status))
	w.member(s, "output")
	w.object(e.Output, 0)
	w.member(s, "error")
	w.toolError(e.Error)
	w.member(s, "artifacts")
	w.strings(e.Artifacts)
	w.member(s, "citations")
	w.citations(e.Citations)
	w.member(s, "mutations")
	w.strings(e.Mutations)
	w.member(s, "risk_tags")
	w.strings(e.RiskTags)
	w.member(s, "policy_decision_id")
	if e.PolicyDecisionID == nil {
		w.null()
	} else {
		w.string(*e.PolicyDecisionID)
	}
	w.member(s, "latency_ms")
	w.b = strconv.AppendInt(w.b, e.LatencyMS, 10)
	w.member(s, "metadata")
	w.resultMetadata(&e.Metadata)
	if e.Approval != nil {
		w.member(s, "approval_request")
		w.marshal(&e.Approval)
	}
	w.close()
}

// toolError writes a *gateway.ToolError; nil is null.
func (w *objectWriter) toolError(te *gateway.ToolError) {
	if te == nil {
		w.null()
		return
	}
	s := w.open()
	w.member(s, "code")
	w.string(te.Code)
	w.member(s, "reason")
	w.string(te.Reason)
	w.member(s, "retryable")
	w.bool(te.Retryable)
	w.member(s, "message")
	w.string(te.Message)
	w.member(s, "details")
	w.object(te.Details, 0)
	w.close()
}

// citations writes a list of citations; nil is null.
func (w *objectWriter) citations(cs []gateway.Citation) {
	if cs == nil {
		w.null()
		return
	}
	w.b = append(w.b, '[')
	for i, c := range cs {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, `{"evidence_ref":`...)
		w.string(c.EvidenceRef)
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, ']')
}

// outcomes writes the adapter outcomes a replay packet records; nil is
// null.
func (w *objectWriter) outcomes(os []replay.AdapterOutcome) {
	if os == nil {
		w.null()
		return
	}
	w.b = append(w.b, '[')
	for i := range os {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		o := &os[i]
		s := w.open()
		w.member(s, "tool_call_id")
		w.string(o.ToolCallID)
		w.member(s, "capability_id")
		w.string(o.CapabilityID)
		w.member(s, "attempt")
		w.b = strconv.AppendInt(w.b, int64(o.Attempt), 10)
		if o.Outcome != nil {
			w.member(s, "outcome")
			w.outcome(o.Outcome)
		}
		if o.Error != nil {
			w.member(s, "error")
			w.toolError(o.Error)
		}
		if o.Panic {
			w.member(s, "panic")
			w.bool(true)
		}
		if len(o.Invalid) > 0 {
			w.member(s, "invalid")
			w.strings(o.Invalid)
		}
		if o.Canceled {
			w.member(s, "canceled")
			w.bool(true)
		}
		if o.Redacted {
			w.member(s, "redacted")
			w.bool(true)
		}
		w.close()
	}
	w.b = append(w.b, ']')
}

func (w *objectWriter) outcome(o *gateway.Outcome) {
	s := w.open()
	if len(o.Output) > 0 {
		w.member(s, "output")
		w.object(o.Output, 0)
	}
	for _, f := range [...]struct {
		k string
		v []string
	}{{"mutations", o.Mutations}, {"artifacts", o.Artifacts}} {
		if len(f.v) > 0 {
			w.member(s, f.k)
			w.strings(f.v)
		}
	}
	if len(o.Citations) > 0 {
		w.member(s, "citations")
		w.citations(o.Citations)
	}
	for _, f := range [...]struct {
		k string
		v []string
	}{{"risk_tags", o.RiskTags}, {"signals", o.Signals}} {
		if len(f.v) > 0 {
			w.member(s, f.k)
			w.strings(f.v)
		}
	}
	if o.CostCents != 0 {
		w.member(s, "cost_cents")
		w.float(o.CostCents)
	}
	if o.Tokens != 0 {
		w.member(s, "tokens")
		w.b = strconv.AppendInt(w.b, int64(o.Tokens), 10)
	}
	w.close()
}

func (w *objectWriter) resultMetadata(m *gateway.ResultMetadata) {
	s := w.open()
	for _, f := range [...]struct{ k, v string }{
		{"approver", m.Approver},
		{"approval_id", m.ApprovalID},
		{"approval_gate_id", m.ApprovalGateID},
		{"approved_at", m.ApprovedAt},
		{"approval_evidence_snapshot_hash", m.ApprovalEvidenceSnapshotHash},
		{"tool_transcript_id", m.ToolTranscriptID},
	} {
		if f.v != "" {
			w.member(s, f.k)
			w.string(f.v)
		}
	}
	w.member(s, "redaction_applied")
	w.bool(m.RedactionApplied)
	w.member(s, "retries")
	w.b = strconv.AppendInt(w.b, int64(m.Retries), 10)
	w.member(s, "attempts")
	w.b = strconv.AppendInt(w.b, int64(m.Attempts), 10)
	w.member(s, "cost_cents")
	w.float(m.CostCents)
	if m.Tokens != 0 {
		w.member(s, "tokens")
		w.b = strconv.AppendInt(w.b, int64(m.Tokens), 10)
	}
	if m.IdempotencyKey != "" {
		w.member(s, "idempotency_key")
		w.string(m.IdempotencyKey)
	}
	if m.Duplicate {
		w.member(s, "duplicate")
		w.bool(true)
	}
	if len(m.Signals) > 0 {
		w.member(s, "signals")
		w.strings(m.Signals)
	}
	if len(m.EvidenceHashes) > 0 {
		w.member(s, "evidence_hashes")
		w.strings(m.EvidenceHashes)
	}
	for _, f := range [...]struct{ k, v string }{
		{"tool_status", m.ToolStatus},
		{"tool_code", m.ToolCode},
		{"tool_reason", m.ToolReason},
	} {
		if f.v != "" {
			w.member(s, f.k)
			w.string(f.v)
		}
	}
	if m.Retryable != nil {
		w.member(s, "retryable")
		w.bool(*m.Retryable)
	}
	w.close()
}

func (w *objectWriter) chain(c *gateway.ChainState) {
	w.b = append(w.b, `{"seq":`...)
	w.b = strconv.AppendInt(w.b, int64(c.Seq), 10)
	w.b = append(w.b, `,"hash":`...)
	w.string(c.Hash)
	w.close()
}

// appendJSONFloat appends a finite f as encoding/json writes a float64:
// ES6 number-to-string form, exponent notation below 1e-6 and from 1e21,
// the exponent without leading zeros.
func appendJSONFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
