package gateway

import (
	"fmt"
	"strings"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/runcontext"
)

// The gateway writes the envelopes' canonical JSON itself: every call
// hashes two of them into the transcript chain, and the reflective encoder
// was a third of a call's cost. Keys are written in RFC 8785 order (all
// ASCII, so byte order); the tests and fuzz targets of this file hold
// these writers to the general encoder (internal/canon) byte for byte.

// object writes one JSON object's members in the order given.
type object struct {
	dst []byte
	n   int
	err error
}

// key starts a member; k is the member's name already written as JSON
// with its colon (`"name":`), so a key is one copy.
func (o *object) key(k string) {
	if o.n > 0 {
		o.dst = append(o.dst, ',')
	}
	o.n++
	o.dst = append(o.dst, k...)
}

func (o *object) str(k, v string) { o.key(k); o.dst = canon.AppendString(o.dst, v) }

// members writes members already encoded (`"a":1,"b":2`): the same as a
// key, which is written as given.
func (o *object) members(m string) { o.key(m) }

// runAndSession writes the run_id member and, when there is one, the
// session_id member (adjacent in both envelopes).
func (o *object) runAndSession(runID, sessionID string) {
	o.str(`"run_id":`, runID)
	o.strOmit(`"session_id":`, sessionID)
}

func (o *object) strOmit(k, v string) {
	if v != "" {
		o.str(k, v)
	}
}

func (o *object) strPtr(k string, v *string) {
	o.key(k)
	if v == nil {
		o.dst = append(o.dst, "null"...)
		return
	}
	o.dst = canon.AppendString(o.dst, *v)
}

func (o *object) strs(k string, v []string) {
	o.key(k)
	o.dst = appendStrings(o.dst, v)
}

func (o *object) strsOmit(k string, v []string) {
	if len(v) > 0 {
		o.strs(k, v)
	}
}

func (o *object) mode(k string, m runcontext.ApprovalMode) {
	if !m.Valid() {
		if m != "" && o.err == nil {
			o.err = fmt.Errorf("%w: %s %q is not an approval mode", canon.ErrNotCanonicalizable, strings.Trim(k, `":`), string(m))
		}
		o.str(k, string(m))
		return
	}
	// A known mode is plain ASCII: written as is.
	o.key(k)
	o.dst = append(append(append(o.dst, '"'), m...), '"')
}

func (o *object) int(k string, v int64) {
	o.key(k)
	if o.err != nil {
		return
	}
	o.dst, o.err = canon.AppendInt(o.dst, v)
}

func (o *object) bool(k string, v bool) { o.key(k); o.dst = canon.AppendBool(o.dst, v) }

func (o *object) float(k string, v float64) {
	o.key(k)
	if o.err != nil {
		return
	}
	o.dst, o.err = canon.AppendFloat(o.dst, v)
}

// value writes any value; raw, when set, is its canonical form already.
func (o *object) value(k string, v any, raw []byte) {
	o.key(k)
	if o.err != nil {
		return
	}
	if raw != nil {
		o.dst = append(o.dst, raw...)
		return
	}
	o.dst, o.err = canon.AppendValue(o.dst, v)
}

func (o *object) open() { o.dst = append(o.dst, '{') }

func (o *object) close() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	return append(o.dst, '}'), nil
}

func appendStrings(dst []byte, v []string) []byte {
	if v == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range v {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = canon.AppendString(dst, s)
	}
	return append(dst, ']')
}

// callEncoding writes a call envelope's canonical JSON (canon.Appender):
// with args and meta, when set, as the canonical forms of its Args and
// Metadata already encoded, and, when m is the run's and matches the
// envelope, the run's constant members as m encoded them. The zero
// caches encode everything afresh.
type callEncoding struct {
	e          *ToolCallEnvelope
	args, meta []byte
	m          *runMembers
}

func (c callEncoding) AppendCanonical(dst []byte) ([]byte, error) {
	e, args, meta, m := c.e, c.args, c.meta, c.m
	if m != nil && (!m.matches(e.RunID, e.SessionID, e.TraceID) || !m.sharesPrincipals(e.PrincipalChain)) {
		m = nil
	}
	o := object{dst: dst}
	o.open()
	o.mode(`"approval_mode_effective":`, e.ApprovalModeEffective)
	o.mode(`"approval_mode_highest":`, e.ApprovalModeHighest)
	o.mode(`"approval_mode_requested":`, e.ApprovalModeRequested)
	if e.Args == nil {
		args = nil
	}
	o.value(`"args":`, e.Args, args)
	o.strPtr(`"auth_ref":`, e.AuthRef)
	o.str(`"capability_id":`, e.CapabilityID)
	if e.EnvelopeVersion == CallEnvelopeVersion {
		o.members(callVersionMember)
	} else {
		o.str(`"envelope_version":`, e.EnvelopeVersion)
	}
	o.strs(`"evidence_refs":`, e.EvidenceRefs)
	o.strPtr(`"idempotency_key":`, e.IdempotencyKey)
	if len(e.Metadata) > 0 {
		o.value(`"metadata":`, e.Metadata, meta)
	}
	o.strPtr(`"policy_decision_id":`, e.PolicyDecisionID)
	if m != nil {
		o.members(m.principalsAndRun)
	} else {
		o.key(`"principal_chain":`)
		o.dst = appendPrincipals(o.dst, e.PrincipalChain)
		o.runAndSession(e.RunID, e.SessionID)
	}
	o.str(`"tool_call_id":`, e.ToolCallID)
	if m != nil {
		o.members(m.trace)
	} else {
		o.str(`"trace_id":`, e.TraceID)
	}
	return o.close()
}

// The version members, written once.
const (
	callVersionMember   = `"envelope_version":"` + CallEnvelopeVersion + `"`
	resultVersionMember = `"envelope_version":"` + ResultEnvelopeVersion + `"`
)

// runMembers is a run's constant envelope members in canonical JSON,
// encoded once per run: every call records two envelopes that repeat them.
// The gateway's recording uses them for the envelopes it built itself (and
// checks the ids match); VerifyTranscript encodes everything afresh, and
// every gateway test holds the two to the same bytes.
type runMembers struct {
	runID, sessionID, traceID string
	principals                []runcontext.Principal // the run's, shared by its envelopes
	// principalsAndRun is `"principal_chain":[…],"run_id":"…"` and, when
	// the run has one, `,"session_id":"…"`; run is its suffix from run_id.
	principalsAndRun, run string
	trace                 string // `"trace_id":"…"`
}

func newRunMembers(runID, sessionID, traceID string, principals []runcontext.Principal) *runMembers {
	o := object{}
	o.key(`"principal_chain":`)
	o.dst = appendPrincipals(o.dst, principals)
	runAt := len(o.dst) + 1 // after the comma
	o.runAndSession(runID, sessionID)
	all := string(o.dst)
	return &runMembers{runID: runID, sessionID: sessionID, traceID: traceID, principals: principals,
		principalsAndRun: all, run: all[runAt:], trace: string(canon.AppendString([]byte(`"trace_id":`), traceID))}
}

func (m *runMembers) matches(runID, sessionID, traceID string) bool {
	return m.runID == runID && m.sessionID == sessionID && m.traceID == traceID
}

// sharesPrincipals reports whether ps is the run's principal chain itself
// (the same backing array), so principalsAndRun encodes it.
func (m *runMembers) sharesPrincipals(ps []runcontext.Principal) bool {
	return len(ps) == len(m.principals) && (len(ps) == 0 || &ps[0] == &m.principals[0])
}

func appendPrincipals(dst []byte, ps []runcontext.Principal) []byte {
	if ps == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, p := range ps {
		if i > 0 {
			dst = append(dst, ',')
		}
		o := object{dst: dst}
		o.open()
		o.strOmit(`"display":`, p.Display)
		o.str(`"id":`, p.ID)
		o.str(`"kind":`, string(p.Kind))
		o.strOmit(`"tenant_id":`, p.TenantID)
		dst, _ = o.close() // strings only: cannot fail
	}
	return append(dst, ']')
}

// resultEncoding writes a result envelope's canonical JSON
// (canon.Appender), with the run's constant members as m encoded them
// when m matches the result (nil: encode them).
type resultEncoding struct {
	r *ToolResultEnvelope
	m *runMembers
}

func (x resultEncoding) AppendCanonical(dst []byte) ([]byte, error) {
	r, m := x.r, x.m
	if m != nil && !m.matches(r.RunID, r.SessionID, r.TraceID) {
		m = nil
	}
	o := object{dst: dst}
	o.open()
	if r.Approval != nil {
		o.key(`"approval_request":`)
		if o.err == nil {
			o.dst, o.err = appendApprovalRequest(o.dst, r.Approval)
		}
	}
	o.strs(`"artifacts":`, r.Artifacts)
	o.str(`"capability_id":`, r.CapabilityID)
	o.key(`"citations":`)
	if r.Citations == nil {
		o.dst = append(o.dst, "null"...)
	} else {
		o.dst = append(o.dst, '[')
		for i, c := range r.Citations {
			if i > 0 {
				o.dst = append(o.dst, ',')
			}
			o.dst = append(o.dst, `{"evidence_ref":`...)
			o.dst = append(canon.AppendString(o.dst, c.EvidenceRef), '}')
		}
		o.dst = append(o.dst, ']')
	}
	if r.EnvelopeVersion == ResultEnvelopeVersion {
		o.members(resultVersionMember)
	} else {
		o.str(`"envelope_version":`, r.EnvelopeVersion)
	}
	o.key(`"error":`)
	if r.Error == nil {
		o.dst = append(o.dst, "null"...)
	} else if o.err == nil {
		o.dst, o.err = appendToolError(o.dst, r.Error)
	}
	o.int(`"latency_ms":`, r.LatencyMS)
	o.key(`"metadata":`)
	if o.err == nil {
		o.dst, o.err = appendResultMetadata(o.dst, &r.Metadata)
	}
	o.strs(`"mutations":`, r.Mutations)
	o.value(`"output":`, r.Output, nil)
	o.strPtr(`"policy_decision_id":`, r.PolicyDecisionID)
	o.strs(`"risk_tags":`, r.RiskTags)
	if m != nil {
		o.members(m.run)
	} else {
		o.runAndSession(r.RunID, r.SessionID)
	}
	o.str(`"status":`, string(r.Status))
	o.str(`"tool_call_id":`, r.ToolCallID)
	if m != nil {
		o.members(m.trace)
	} else {
		o.str(`"trace_id":`, r.TraceID)
	}
	return o.close()
}

func appendResultMetadata(dst []byte, m *ResultMetadata) ([]byte, error) {
	o := object{dst: dst}
	o.open()
	o.strOmit(`"approval_evidence_snapshot_hash":`, m.ApprovalEvidenceSnapshotHash)
	o.strOmit(`"approval_gate_id":`, m.ApprovalGateID)
	o.strOmit(`"approval_id":`, m.ApprovalID)
	o.strOmit(`"approved_at":`, m.ApprovedAt)
	o.strOmit(`"approver":`, m.Approver)
	o.int(`"attempts":`, int64(m.Attempts))
	o.float(`"cost_cents":`, m.CostCents)
	if m.Duplicate {
		o.bool(`"duplicate":`, true)
	}
	o.strsOmit(`"evidence_hashes":`, m.EvidenceHashes)
	o.strOmit(`"idempotency_key":`, m.IdempotencyKey)
	o.bool(`"redaction_applied":`, m.RedactionApplied)
	o.int(`"retries":`, int64(m.Retries))
	if m.Retryable != nil {
		o.bool(`"retryable":`, *m.Retryable)
	}
	o.strsOmit(`"signals":`, m.Signals)
	if m.Tokens != 0 {
		o.int(`"tokens":`, int64(m.Tokens))
	}
	o.strOmit(`"tool_code":`, m.ToolCode)
	o.strOmit(`"tool_reason":`, m.ToolReason)
	o.strOmit(`"tool_status":`, m.ToolStatus)
	o.strOmit(`"tool_transcript_id":`, m.ToolTranscriptID)
	return o.close()
}

func appendToolError(dst []byte, e *ToolError) ([]byte, error) {
	o := object{dst: dst}
	o.open()
	o.str(`"code":`, e.Code)
	o.value(`"details":`, e.Details, nil)
	o.str(`"message":`, e.Message)
	o.str(`"reason":`, e.Reason)
	o.bool(`"retryable":`, e.Retryable)
	return o.close()
}

func appendApprovalRequest(dst []byte, a *ApprovalRequest) ([]byte, error) {
	o := object{dst: dst}
	o.open()
	o.str(`"action_digest":`, a.ActionDigest)
	if a.AllowSelfApproval {
		o.bool(`"allow_self_approval":`, true)
	}
	o.str(`"evidence_snapshot_hash":`, a.EvidenceSnapshotHash)
	o.str(`"gate_id":`, a.GateID)
	o.strOmit(`"idempotency_key":`, a.IdempotencyKey)
	o.value(`"requested_at":`, a.RequestedAt, nil)
	o.str(`"required_approver_role":`, a.ApproverRole)
	o.str(`"tool_call_id":`, a.ToolCallID)
	o.int(`"ttl_seconds":`, int64(a.TTLSeconds))
	return o.close()
}

// recordedCall and recordedResult are how the gateway records what it has
// just built: with the call's cached encodings and the run's members.
// They are one pointer each, so making them a canon.Appender allocates
// nothing.
type (
	recordedCall   callRecord
	recordedResult result
)

func (c *recordedCall) AppendCanonical(dst []byte) ([]byte, error) {
	return callEncoding{e: &c.env, args: (*callRecord)(c).argsJSON(), meta: (*callRecord)(c).metaJSON(), m: c.m}.AppendCanonical(dst)
}

func (r *recordedResult) AppendCanonical(dst []byte) ([]byte, error) {
	return resultEncoding{r: &r.env, m: r.m}.AppendCanonical(dst)
}

var (
	_ canon.Appender = callEncoding{}
	_ canon.Appender = resultEncoding{}
	_ canon.Appender = (*recordedCall)(nil)
	_ canon.Appender = (*recordedResult)(nil)
)

// evidenceManifest is the canonical form of a compiled evidence manifest,
// which a run's approvals are bound to (evidence_snapshot_hash): its
// digest was the reflective encoder's at every run.
// TestEvidenceManifestWriter and FuzzEvidenceManifestWriter hold it to
// canon.JSON of the same entries.
type evidenceManifest []compiler.EvidenceManifestEntry

// AppendCanonical implements canon.Appender.
func (m evidenceManifest) AppendCanonical(dst []byte) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i := range m {
		if i > 0 {
			dst = append(dst, ',')
		}
		e := &m[i]
		dst = canon.AppendString(append(dst, `{"evidence_ref":`...), e.EvidenceRef)
		if e.Hash != "" {
			dst = canon.AppendString(append(dst, `,"hash":`...), e.Hash)
		}
		if e.SourceID != "" {
			dst = canon.AppendString(append(dst, `,"source_id":`...), e.SourceID)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']'), nil
}
