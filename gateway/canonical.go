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

// object is canon's object writer with the envelopes' own members.
type object struct{ canon.Object }

// runAndSession writes the run_id member and, when there is one, the
// session_id member (adjacent in both envelopes).
func (o *object) runAndSession(runID, sessionID string) {
	o.Str(`"run_id":`, runID)
	o.StrOmit(`"session_id":`, sessionID)
}

func (o *object) mode(k string, m runcontext.ApprovalMode) {
	if !m.Valid() {
		if m != "" {
			o.Fail(fmt.Errorf("%w: %s %q is not an approval mode", canon.ErrNotCanonicalizable, strings.Trim(k, `":`), string(m)))
		}
		o.Str(k, string(m))
		return
	}
	// A known mode is plain ASCII: written as is.
	o.Key(k)
	o.B = append(append(append(o.B, '"'), m...), '"')
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
	o := object{canon.NewObject(dst)}
	o.mode(`"approval_mode_effective":`, e.ApprovalModeEffective)
	o.mode(`"approval_mode_highest":`, e.ApprovalModeHighest)
	o.mode(`"approval_mode_requested":`, e.ApprovalModeRequested)
	if e.Args == nil {
		args = nil
	}
	o.Value(`"args":`, e.Args, args)
	o.StrPtr(`"auth_ref":`, e.AuthRef)
	o.Str(`"capability_id":`, e.CapabilityID)
	if e.EnvelopeVersion == CallEnvelopeVersion {
		o.Members(callVersionMember)
	} else {
		o.Str(`"envelope_version":`, e.EnvelopeVersion)
	}
	o.Strings(`"evidence_refs":`, e.EvidenceRefs)
	o.StrPtr(`"idempotency_key":`, e.IdempotencyKey)
	if len(e.Metadata) > 0 {
		o.Value(`"metadata":`, e.Metadata, meta)
	}
	o.StrPtr(`"policy_decision_id":`, e.PolicyDecisionID)
	if m != nil {
		o.Members(m.principalsAndRun)
	} else {
		o.Key(`"principal_chain":`)
		o.B = appendPrincipals(o.B, e.PrincipalChain)
		o.runAndSession(e.RunID, e.SessionID)
	}
	o.Str(`"tool_call_id":`, e.ToolCallID)
	if m != nil {
		o.Members(m.trace)
	} else {
		o.Str(`"trace_id":`, e.TraceID)
	}
	return o.Close()
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
	o.Key(`"principal_chain":`)
	o.B = appendPrincipals(o.B, principals)
	runAt := len(o.B) + 1 // after the comma
	o.runAndSession(runID, sessionID)
	all := string(o.B)
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
		o := object{canon.NewObject(dst)}
		o.StrOmit(`"display":`, p.Display)
		o.Str(`"id":`, p.ID)
		o.Str(`"kind":`, string(p.Kind))
		o.StrOmit(`"tenant_id":`, p.TenantID)
		dst, _ = o.Close() // strings only: cannot fail
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
	o := object{canon.NewObject(dst)}
	if r.Approval != nil {
		o.Key(`"approval_request":`)
		o.Put(appendApprovalRequest(o.B, r.Approval))
	}
	o.Strings(`"artifacts":`, r.Artifacts)
	o.Str(`"capability_id":`, r.CapabilityID)
	o.Key(`"citations":`)
	if r.Citations == nil {
		o.B = append(o.B, "null"...)
	} else {
		o.B = append(o.B, '[')
		for i, c := range r.Citations {
			if i > 0 {
				o.B = append(o.B, ',')
			}
			o.B = append(o.B, `{"evidence_ref":`...)
			o.B = append(canon.AppendString(o.B, c.EvidenceRef), '}')
		}
		o.B = append(o.B, ']')
	}
	if r.EnvelopeVersion == ResultEnvelopeVersion {
		o.Members(resultVersionMember)
	} else {
		o.Str(`"envelope_version":`, r.EnvelopeVersion)
	}
	o.Key(`"error":`)
	if r.Error == nil {
		o.B = append(o.B, "null"...)
	} else {
		o.Put(appendToolError(o.B, r.Error))
	}
	o.Int(`"latency_ms":`, r.LatencyMS)
	o.Key(`"metadata":`)
	o.Put(appendResultMetadata(o.B, &r.Metadata))
	o.Strings(`"mutations":`, r.Mutations)
	o.Value(`"output":`, r.Output, nil)
	o.StrPtr(`"policy_decision_id":`, r.PolicyDecisionID)
	o.Strings(`"risk_tags":`, r.RiskTags)
	if m != nil {
		o.Members(m.run)
	} else {
		o.runAndSession(r.RunID, r.SessionID)
	}
	o.Str(`"status":`, string(r.Status))
	o.Str(`"tool_call_id":`, r.ToolCallID)
	if m != nil {
		o.Members(m.trace)
	} else {
		o.Str(`"trace_id":`, r.TraceID)
	}
	return o.Close()
}

func appendResultMetadata(dst []byte, m *ResultMetadata) ([]byte, error) {
	o := object{canon.NewObject(dst)}
	o.StrOmit(`"approval_evidence_snapshot_hash":`, m.ApprovalEvidenceSnapshotHash)
	o.StrOmit(`"approval_gate_id":`, m.ApprovalGateID)
	o.StrOmit(`"approval_id":`, m.ApprovalID)
	o.StrOmit(`"approved_at":`, m.ApprovedAt)
	o.StrOmit(`"approver":`, m.Approver)
	o.Int(`"attempts":`, int64(m.Attempts))
	o.Float(`"cost_cents":`, m.CostCents)
	if m.Duplicate {
		o.Bool(`"duplicate":`, true)
	}
	o.StringsOmit(`"evidence_hashes":`, m.EvidenceHashes)
	o.StrOmit(`"idempotency_key":`, m.IdempotencyKey)
	o.Bool(`"redaction_applied":`, m.RedactionApplied)
	o.Int(`"retries":`, int64(m.Retries))
	if m.Retryable != nil {
		o.Bool(`"retryable":`, *m.Retryable)
	}
	o.StringsOmit(`"signals":`, m.Signals)
	if m.Tokens != 0 {
		o.Int(`"tokens":`, int64(m.Tokens))
	}
	o.StrOmit(`"tool_code":`, m.ToolCode)
	o.StrOmit(`"tool_reason":`, m.ToolReason)
	o.StrOmit(`"tool_status":`, m.ToolStatus)
	o.StrOmit(`"tool_transcript_id":`, m.ToolTranscriptID)
	return o.Close()
}

func appendToolError(dst []byte, e *ToolError) ([]byte, error) {
	o := object{canon.NewObject(dst)}
	o.Str(`"code":`, e.Code)
	o.Value(`"details":`, e.Details, nil)
	o.Str(`"message":`, e.Message)
	o.Str(`"reason":`, e.Reason)
	o.Bool(`"retryable":`, e.Retryable)
	return o.Close()
}

func appendApprovalRequest(dst []byte, a *ApprovalRequest) ([]byte, error) {
	o := object{canon.NewObject(dst)}
	o.Str(`"action_digest":`, a.ActionDigest)
	if a.AllowSelfApproval {
		o.Bool(`"allow_self_approval":`, true)
	}
	o.Str(`"evidence_snapshot_hash":`, a.EvidenceSnapshotHash)
	o.Str(`"gate_id":`, a.GateID)
	o.StrOmit(`"idempotency_key":`, a.IdempotencyKey)
	o.Value(`"requested_at":`, a.RequestedAt, nil)
	o.Str(`"required_approver_role":`, a.ApproverRole)
	o.Str(`"tool_call_id":`, a.ToolCallID)
	o.Int(`"ttl_seconds":`, int64(a.TTLSeconds))
	return o.Close()
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
