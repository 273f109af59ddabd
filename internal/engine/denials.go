package engine

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/principal"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/runcontext"
)

// An approver's refusal is a decision like an approval: the run's records
// list it among their approvals (decision "denied"), with the gate, the
// approver and role, the paused call, the action's evidence snapshot, the
// time and the reason, redacted. The gateway refuses the call; the run
// goes on as its planner and critic decide.

// maxDenialReason bounds the reason a record keeps (bytes of UTF-8).
const maxDenialReason = 1000

// noteDenial keeps the refusal call carried, when it answers the pause
// the run resumed from: a denied approval with an id and an approver, for
// the gate and the action awaited. A refusal already kept (its approval
// id) is not kept twice.
func (r *run) noteDenial(step *Step, call *gateway.CallRequest) {
	a, p := call.Approval, call.ApprovalRequest
	if a == nil || p == nil || !a.Denied || a.GateID != p.GateID || a.ActionDigest != p.ActionDigest ||
		strings.TrimSpace(a.ApprovalID) == "" || principal.Canonical(a.Approver) == "" {
		return
	}
	if slices.ContainsFunc(r.cp.Denials, func(d decision.Approval) bool { return d.ApprovalID == a.ApprovalID }) {
		return
	}
	mode, ok := capabilityMode(r.cc, step.CapabilityID)
	if !ok {
		mode = runcontext.Destructive
	}
	r.cp.Denials = append(r.cp.Denials, decision.Approval{GateID: a.GateID, Approver: a.Approver, ApproverRole: a.ApproverRole,
		ApprovalModeEffective: mode, EvidenceSnapshotHash: p.EvidenceSnapshotHash, DecidedAt: a.DecidedAt.UTC().Format(time.RFC3339),
		ToolCallID: p.ToolCallID, ApprovalID: a.ApprovalID, Decision: decision.ApprovalDenied, Reason: denialReason(a.Reason)})
}

// denialReason is a reason as a record keeps it: every kind of sensitive
// data redacted, at most maxDenialReason bytes of valid UTF-8.
func denialReason(s string) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	s, _ = sensitive.Redact(s, sensitive.All)
	if len(s) > maxDenialReason {
		s = s[:maxDenialReason]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}

// redactReasons returns approvals with their reasons as a record keeps
// them (denialReason): the checkpoint and a replay packet keep nothing
// the record would not. A list without a reason to change is returned as
// it is.
func redactReasons(approvals []gateway.Approval) []gateway.Approval {
	var out []gateway.Approval
	for i, a := range approvals {
		if why := denialReason(a.Reason); why != a.Reason {
			if out == nil {
				out = slices.Clone(approvals)
			}
			out[i].Reason = why
		}
	}
	if out == nil {
		return approvals
	}
	return out
}
