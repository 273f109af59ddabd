package decision

import (
	"errors"
	"fmt"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/internal/logic"
	"slices"
	"strings"
	"time"

	"github.com/contextos/contextos/pack"
)

// ErrInvalid reports a record that fails validation; the error is a
// *ValidationError.
var ErrInvalid = errors.New("decision: invalid record")

func errStatus(s string) error {
	return fmt.Errorf("status %q is not one of DECIDED, DEFERRED, REJECTED, ESCALATED, IN_FLIGHT, CLOSED", s)
}

// Problem codes.
const (
	CodeOutcome            = "outcome_not_allowed"
	CodeEvidenceMissing    = "required_evidence_missing"
	CodeEvidenceUnknown    = "evidence_ref_unresolved"
	CodeSubjectNamespace   = "subject_outside_namespaces"
	CodeApprovalMissing    = "approval_missing"
	CodeApprovalIncomplete = "approval_incomplete"
	CodeControls           = "controls_mismatch"
	CodeStatus             = "status_inconsistent"
	CodeField              = "field"
	CodePolicyUnbound      = "policy_decision_unrecorded"
)

// Problem is one validation problem.
type Problem struct {
	Code    string `json:"code"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

// ValidationError lists every problem of a record. It matches ErrInvalid.
type ValidationError struct{ Problems []Problem }

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Path + ": " + p.Message
	}
	return "decision: invalid record: " + strings.Join(parts, "; ")
}

// Is matches ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Has reports whether a problem with the code exists.
func (e *ValidationError) Has(code string) bool {
	return slices.ContainsFunc(e.Problems, func(p Problem) bool { return p.Code == code })
}

// Facts are what the run established, against which a record is checked.
type Facts struct {
	// Pack is the (merged) pack the run used: decision specs, adapters for
	// evidence names, CEID namespaces.
	Pack *pack.Pack
	// Admitted maps each admitted evidence ref to its kind.
	Admitted map[string]string
	// ToolResults are the successful tool results of the run.
	ToolResults []ToolFact
	// PolicyRefs are the policy refs the run can cite
	// ("policy:<bundle>#<rule>"), and PolicyEvaluated says policy ran.
	PolicyRefs      []string
	PolicyEvaluated bool
	// Artifacts are the request's attachment refs ("artifact:<id>#<sha>").
	Artifacts []string
	// RequestContext is the invoke input.context.
	RequestContext map[string]any
	// ActiveGates are the gates active for the run (id → approver role).
	ActiveGates map[string]string
	// Controls are the compiled runtime controls.
	Controls Controls
	// BoundPolicyIDs are the policy decision ids the run's tool calls were
	// bound to (every call, whatever its status): each must be in the
	// record's policy_decisions.
	BoundPolicyIDs []string
}

// ToolFact is one successful tool result.
type ToolFact struct {
	CapabilityID string
	ToolCallID   string
}

// Ref is the evidence ref a tool result is cited by.
func (t ToolFact) Ref() string { return "tool:" + t.CapabilityID + ":" + t.ToolCallID }

// SpecFor returns the decision spec of key in p.
func SpecFor(p *pack.Pack, key string) (pack.DecisionSpec, bool) {
	for _, s := range p.DecisionLayer.DecisionSpecs {
		if s.DecisionKey == key {
			return s, true
		}
	}
	return pack.DecisionSpec{}, false
}

// IsRefusal reports whether outcome is one of spec's refusal outcomes
// (default: denied, rejected, refused).
func IsRefusal(spec pack.DecisionSpec, outcome string) bool {
	if len(spec.RefusalOutcomes) > 0 {
		return slices.Contains(spec.RefusalOutcomes, outcome)
	}
	return outcome == "denied" || outcome == "rejected" || outcome == "refused"
}

// IsEscalation reports whether outcome is one of spec's escalation
// outcomes (default: escalated).
func IsEscalation(spec pack.DecisionSpec, outcome string) bool {
	if len(spec.EscalationOutcomes) > 0 {
		return slices.Contains(spec.EscalationOutcomes, outcome)
	}
	return outcome == "escalated"
}

// Satisfied reports whether a required evidence name is satisfied
// (DESIGN.md "Evidence names"): by a successful tool result of the
// capability it designates, by the run's policy evaluation (policy_eval),
// by request context, or by admitted evidence of that kind.
func Satisfied(name string, f *Facts) bool {
	if f.Pack != nil {
		for _, a := range f.Pack.ToolingLayer.AdapterRegistry {
			for _, c := range a.Capabilities {
				if name == pack.AdapterNoun(a.AdapterID)+"_"+c || name == a.AdapterID+"."+c {
					return slices.ContainsFunc(f.ToolResults, func(t ToolFact) bool { return t.CapabilityID == a.AdapterID+"."+c })
				}
			}
		}
	}
	if name == "policy_eval" && f.PolicyEvaluated {
		return true
	}
	// A request context value satisfies a requirement when it is truthy
	// as JsonLogic judges it (the policy rules read it so): 0, NaN, "",
	// [] and null do not.
	if v, ok := f.RequestContext[name]; ok && logic.Truthy(jsonv.Normalize(v)) {
		return true
	}
	for _, kind := range f.Admitted {
		if kind == name {
			return true
		}
	}
	return false
}

// Validate checks r against its decision spec and the run's facts, and
// returns a *ValidationError with every problem, or nil.
func Validate(r *Record, f *Facts) error {
	var probs []Problem
	add := func(code, path, format string, a ...any) {
		probs = append(probs, Problem{Code: code, Path: path, Message: fmt.Sprintf(format, a...)})
	}
	if !slices.Contains(Statuses(), r.Status) {
		add(CodeField, "status", "%v", errStatus(string(r.Status)))
	}
	for _, fld := range []struct{ path, v string }{{"record_id", r.RecordID}, {"decision_key", r.DecisionKey}, {"run_id", r.RunID}, {"trace_id", r.TraceID}, {"tenant_id", r.TenantID}, {"lineage.compiled_context_hash", r.Lineage.CompiledContextHash}} {
		if fld.v == "" {
			add(CodeField, fld.path, "is required")
		}
	}
	if _, err := time.Parse(time.RFC3339, r.Timestamp); err != nil {
		add(CodeField, "timestamp", "must be an RFC 3339 time")
	}
	switch cv := r.AgentIdentity.ClaimVerification; {
	case cv != "" && !slices.Contains(ClaimVerifications(), cv):
		add(CodeField, "agent_identity.claim_verification", "must be verified or waived")
	case cv == ClaimVerified && r.AgentIdentity.ClaimHash == "":
		add(CodeField, "agent_identity.claim_verification", "a verified claim needs its claim_hash")
	case cv == ClaimWaived && r.AgentIdentity.ClaimHash != "":
		add(CodeField, "agent_identity.claim_verification", "a waived claim has no claim_hash")
	}
	var spec pack.DecisionSpec
	var ok bool
	if f.Pack != nil {
		spec, ok = SpecFor(f.Pack, r.DecisionKey)
	}
	if !ok {
		add(CodeField, "decision_key", "no decision spec %q in the pack", r.DecisionKey)
		return &ValidationError{Problems: probs}
	}
	if r.DecisionVersion != spec.Version {
		add(CodeField, "decision_version", "is %q; the spec is version %s", r.DecisionVersion, spec.Version)
	}
	if r.Outcome != "" && !slices.Contains(spec.AllowedOutcomes, r.Outcome) {
		add(CodeOutcome, "outcome", "%q is not one of %v", r.Outcome, spec.AllowedOutcomes)
	}
	decided := r.Status == Decided
	if decided && r.Outcome == "" {
		add(CodeStatus, "outcome", "a DECIDED record needs an outcome")
	}
	refusal := IsRefusal(spec, r.Outcome) || IsEscalation(spec, r.Outcome)
	if decided && !refusal {
		for i, name := range spec.RequiredEvidence {
			if !Satisfied(name, f) {
				add(CodeEvidenceMissing, fmt.Sprintf("required_evidence[%d]", i), "%q is not satisfied by a tool result, the policy evaluation, request context or admitted evidence", name)
			}
		}
		for gate, role := range f.ActiveGates {
			i := slices.IndexFunc(r.Approvals, func(a Approval) bool { return a.GateID == gate })
			if i < 0 {
				add(CodeApprovalMissing, "approvals", "gate %s is active and has no approval", gate)
				continue
			}
			a := r.Approvals[i]
			if a.Approver == "" || !a.ApprovalModeEffective.Valid() || a.EvidenceSnapshotHash == "" || (a.ApproverRole != "" && a.ApproverRole != role) {
				add(CodeApprovalIncomplete, fmt.Sprintf("approvals[%d]", i), "approval on %s needs an approver holding %s, the effective mode and the evidence snapshot hash", gate, role)
			}
		}
	}
	if decided && refusal && len(r.PolicyDecisions) == 0 && len(r.EvidenceRefs) == 0 {
		add(CodeEvidenceMissing, "policy_decisions", "a %s outcome needs the policy decision or evidence that forced it", r.Outcome)
	}
	known := map[string]bool{}
	for ref := range f.Admitted {
		known[ref] = true
	}
	for _, t := range f.ToolResults {
		known[t.Ref()] = true
	}
	for _, ref := range slices.Concat(f.PolicyRefs, f.Artifacts) {
		known[ref] = true
	}
	for i, ref := range r.EvidenceRefs {
		if !known[ref] {
			add(CodeEvidenceUnknown, fmt.Sprintf("evidence_refs[%d]", i), "%q does not resolve to admitted evidence, a tool result, a policy or an artifact of the run", ref)
		}
	}
	namespaces := f.Pack.IntelligenceRefs.IdentityLayer.CEIDNamespaces
	for i, s := range r.SubjectIDs {
		ns, _, found := strings.Cut(s, ":")
		if !found || !slices.Contains(namespaces, ns) {
			add(CodeSubjectNamespace, fmt.Sprintf("subject_ids[%d]", i), "%q is not in a CEID namespace of the pack (%v)", s, namespaces)
		}
	}
	for _, id := range f.BoundPolicyIDs {
		if !slices.ContainsFunc(r.PolicyDecisions, func(p PolicyDecisionRef) bool { return p.PolicyDecisionID == id }) {
			add(CodePolicyUnbound, "policy_decisions", "%s, which a tool call of the run is bound to, is not recorded", id)
		}
	}
	if !equalControls(r.ControlsActive, f.Controls) {
		add(CodeControls, "controls_active", "must equal the compiled runtime controls")
	}
	if r.Status == Deferred && r.Awaiting == nil {
		add(CodeStatus, "awaiting", "a DEFERRED record says what it awaits")
	}
	if r.Status == Closed && r.Closes == "" {
		add(CodeStatus, "closes", "a CLOSED record names the record it closes")
	}
	if len(probs) == 0 {
		return nil
	}
	return &ValidationError{Problems: probs}
}

func equalControls(a, b Controls) bool {
	return slices.Equal(a.MustRefuse, b.MustRefuse) && slices.Equal(a.MustEscalate, b.MustEscalate) &&
		slices.Equal(a.ApprovalGatesActive, b.ApprovalGatesActive) && slices.Equal(a.RedactionRulesActive, b.RedactionRulesActive)
}
