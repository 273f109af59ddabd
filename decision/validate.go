package decision

import (
	"errors"
	"fmt"
	"github.com/contextos/contextos/internal/decisionspec"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/internal/logic"
	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/internal/sortedkeys"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contextos/contextos/internal/packrules"
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
	CodeOutcome            Code = "outcome_not_allowed"
	CodeEvidenceMissing    Code = "required_evidence_missing"
	CodeEvidenceUnknown    Code = "evidence_ref_unresolved"
	CodeSubjectNamespace   Code = "subject_outside_namespaces"
	CodeApprovalMissing    Code = "approval_missing"
	CodeApprovalIncomplete Code = "approval_incomplete"
	CodeControls           Code = "controls_mismatch"
	CodeStatus             Code = "status_inconsistent"
	CodeField              Code = "field"
	CodePolicyUnbound      Code = "policy_decision_unrecorded"
)

// Problem is one validation problem of a record (code, path, message). It
// is the Problem of every validating package (runcontext, pack, schemas).
type Problem = problem.Problem

// Code names a validation failure mode (the Code* constants).
type Code = problem.Code

// ValidationError lists every problem of a record. It matches ErrInvalid;
// Has(code) and HasAt(code, path) look a problem up.
// It is one type shared by runcontext, pack, decision and schemas, so
// errors.As finds it whichever package refused; errors.Is(err, ErrInvalid)
// tells this package's refusals from the others'.
type ValidationError = problem.ValidationError

// invalid returns the *ValidationError of probs, matching ErrInvalid.
func invalid(probs []Problem) *ValidationError {
	return problem.New(ErrInvalid, "decision: invalid record", probs)
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
	// AppliedRules are the policy rules that applied in the run: their
	// applies_to matched and the branch their condition chose (then when
	// it held, else otherwise) is what they decided. The requires entries
	// of that branch must be satisfied before a decision the rule is
	// bound to, or any decision when it is bound to none, is DECIDED with
	// an outcome other than a refusal or an escalation.
	AppliedRules []AppliedRule
}

// AppliedRule is one policy rule that applied in a run, with the evidence
// names its chosen branch requires.
type AppliedRule struct {
	BundleID string
	RuleID   string
	// DecisionBinding is the rule's decision_binding; "" binds it to every
	// decision of the run.
	DecisionBinding string
	// Requires are the requires entries of the branch the rule took.
	Requires []string
}

// Requirement is one evidence name a decision needs, and where it comes
// from: the decision spec's required_evidence (RuleID "") or a policy
// rule that applied in the run.
type Requirement struct {
	Name string
	// Path locates the name: "required_evidence[i]", or
	// "policy_rules[<bundle>#<rule>].requires[i]".
	Path     string
	BundleID string
	RuleID   string
}

// requirements returns every evidence name a decision of spec needs in a
// run with facts f, in order: the spec's required_evidence, then the
// requires entries of each applied rule bound to spec's decision or to
// none. Refusal and escalation outcomes need none of them. Their paths
// are left to [requirement.withPath]: only an unsatisfied one is given
// its path. They are yielded, not gathered in a list: Unsatisfied keeps
// only the few a run lacks.
func requirements(spec pack.DecisionSpec, f *Facts) iter.Seq[requirement] {
	return func(yield func(requirement) bool) {
		for i, name := range spec.RequiredEvidence {
			if !yield(requirement{q: Requirement{Name: name}, index: i}) {
				return
			}
		}
		for _, r := range f.AppliedRules {
			if r.DecisionBinding != "" && r.DecisionBinding != spec.DecisionKey {
				continue
			}
			for i, name := range r.Requires {
				if !yield(requirement{q: Requirement{Name: name, BundleID: r.BundleID, RuleID: r.RuleID}, index: i, rule: true}) {
					return
				}
			}
		}
	}
}

// requirement is a Requirement without its Path, and what the path is
// written from.
type requirement struct {
	q     Requirement
	index int  // in the spec's required_evidence, or the rule's requires
	rule  bool // a rule's requires entry
}

// withPath is the Requirement with its Path.
func (r requirement) withPath() Requirement {
	q := r.q
	if r.rule {
		q.Path = "policy_rules[" + q.BundleID + "#" + q.RuleID + "].requires[" + strconv.Itoa(r.index) + "]"
	} else {
		q.Path = "required_evidence[" + strconv.Itoa(r.index) + "]"
	}
	return q
}

// Unsatisfied returns the requirements of a decision of spec (see
// requirements) that f does not satisfy. Refusal and escalation outcomes
// need none of them.
func Unsatisfied(spec pack.DecisionSpec, f *Facts) []Requirement {
	var out []Requirement
	for r := range requirements(spec, f) {
		if !satisfied(r.q.Name, f) {
			out = append(out, r.withPath())
		}
	}
	return out
}

// ToolFact is one successful tool result; a record cites it as the
// evidence ref "tool:<capability_id>:<tool_call_id>".
type ToolFact struct {
	CapabilityID string
	ToolCallID   string
}

// ref is the evidence ref a tool result is cited by.
func (t ToolFact) ref() string { return "tool:" + t.CapabilityID + ":" + t.ToolCallID }

// isRef reports whether s is t.ref(), without writing it.
func (t ToolFact) isRef(s string) bool {
	rest, ok := strings.CutPrefix(s, "tool:")
	return ok && len(rest) == len(t.CapabilityID)+1+len(t.ToolCallID) && rest[:len(t.CapabilityID)] == t.CapabilityID &&
		rest[len(t.CapabilityID)] == ':' && rest[len(t.CapabilityID)+1:] == t.ToolCallID
}

// satisfied reports whether a required evidence name is satisfied
// (docs/evidence.md): by a successful tool result of the
// capability it designates, by the run's policy evaluation (policy_eval),
// by request context, or by admitted evidence of that kind.
func satisfied(name string, f *Facts) bool {
	if f.Pack != nil {
		for _, a := range f.Pack.ToolingLayer.AdapterRegistry {
			for _, c := range a.Capabilities {
				if joined(name, packrules.AdapterNoun(a.AdapterID), '_', c) || joined(name, a.AdapterID, '.', c) {
					return slices.ContainsFunc(f.ToolResults, func(t ToolFact) bool { return joined(t.CapabilityID, a.AdapterID, '.', c) })
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

// joined reports whether s is a, then sep, then b (s == a+string(sep)+b,
// without building the right-hand side).
func joined(s, a string, sep byte, b string) bool {
	return len(s) == len(a)+1+len(b) && s[len(a)] == sep && s[:len(a)] == a && s[len(a)+1:] == b
}

// Validate checks r against its decision spec and the run's facts, and
// returns a *ValidationError with every problem, or nil. The checks run in
// stages, in this order: the record's own fields, the decision spec it
// names (version and outcome), the evidence and approvals a DECIDED
// outcome needs, the evidence refs, subjects and policy decisions it
// cites, the runtime controls, and status consistency. Without a decision
// spec only the first stage runs.
func Validate(r *Record, f *Facts) error {
	c := &checker{r: r, f: f}
	c.fields()
	spec, ok := c.spec()
	if ok {
		c.outcome(spec)
		c.evidence(spec)
		c.approvals(spec)
		c.refusalGrounds(spec)
		c.citations()
		c.controls()
		c.statusConsistency()
	}
	if len(c.probs) == 0 {
		return nil
	}
	return invalid(c.probs)
}

// checker collects the problems of one record against one run's facts.
type checker struct {
	r     *Record
	f     *Facts
	probs []Problem
}

func (c *checker) add(code Code, path, format string, a ...any) {
	c.probs = append(c.probs, Problem{Code: code, Path: path, Message: fmt.Sprintf(format, a...)})
}

// fields checks the record's own members: status, the required ids, the
// replay block against the lineage, the timestamp and the claim
// verification.
func (c *checker) fields() {
	r := c.r
	if !slices.Contains(statuses(), r.Status) {
		c.add(CodeField, "status", "%v", errStatus(string(r.Status)))
	}
	for _, fld := range []struct{ path, v string }{{"record_id", r.RecordID}, {"decision_key", r.DecisionKey}, {"run_id", r.RunID}, {"trace_id", r.TraceID}, {"tenant_id", r.TenantID}, {"lineage.compiled_context_hash", r.Lineage.CompiledContextHash}} {
		if fld.v == "" {
			c.add(CodeField, fld.path, "is required")
		}
	}
	if rp := r.Replay; rp != nil {
		if rp.ReplayPacketID != r.Lineage.ReplayPacketID {
			c.add(CodeField, "replay.replay_packet_id", "must equal lineage.replay_packet_id")
		}
		if rp.CompiledContextHash != r.Lineage.CompiledContextHash {
			c.add(CodeField, "replay.compiled_context_hash", "must equal lineage.compiled_context_hash")
		}
		if rp.ToolTranscriptChainHash != r.Lineage.ToolTranscriptChainHash {
			c.add(CodeField, "replay.tool_transcript_chain_hash", "must equal lineage.tool_transcript_chain_hash")
		}
	}
	if _, err := time.Parse(time.RFC3339, r.Timestamp); err != nil {
		c.add(CodeField, "timestamp", "must be an RFC 3339 time")
	}
	switch cv := r.AgentIdentity.ClaimVerification; {
	case cv != "" && !slices.Contains(claimVerifications(), cv):
		c.add(CodeField, "agent_identity.claim_verification", "must be verified or waived")
	case cv == ClaimVerified && r.AgentIdentity.ClaimHash == "":
		c.add(CodeField, "agent_identity.claim_verification", "a verified claim needs its claim_hash")
	case cv == ClaimWaived && r.AgentIdentity.ClaimHash != "":
		c.add(CodeField, "agent_identity.claim_verification", "a waived claim has no claim_hash")
	}
}

// spec finds the record's decision spec in the pack.
func (c *checker) spec() (pack.DecisionSpec, bool) {
	if c.f.Pack != nil {
		if spec, ok := decisionspec.For(c.f.Pack, c.r.DecisionKey); ok {
			return spec, true
		}
	}
	c.add(CodeField, "decision_key", "no decision spec %q in the pack", c.r.DecisionKey)
	return pack.DecisionSpec{}, false
}

// outcome checks the decision version and the outcome against the spec.
func (c *checker) outcome(spec pack.DecisionSpec) {
	r := c.r
	if r.DecisionVersion != spec.Version {
		c.add(CodeField, "decision_version", "is %q; the spec is version %s", r.DecisionVersion, spec.Version)
	}
	if r.Outcome != "" && !slices.Contains(spec.AllowedOutcomes, r.Outcome) {
		c.add(CodeOutcome, "outcome", "%q is not one of %v", r.Outcome, spec.AllowedOutcomes)
	}
	if r.Status == Decided && r.Outcome == "" {
		c.add(CodeStatus, "outcome", "a DECIDED record needs an outcome")
	}
}

// needsGrounds reports whether the record is DECIDED with an outcome
// that is neither a refusal nor an escalation: such a record needs its
// evidence and approvals.
func (c *checker) needsGrounds(spec pack.DecisionSpec) bool {
	return c.r.Status == Decided && !refusesOrEscalates(spec, c.r.Outcome)
}

func refusesOrEscalates(spec pack.DecisionSpec, outcome string) bool {
	return decisionspec.IsRefusal(spec, outcome) || decisionspec.IsEscalation(spec, outcome)
}

// evidence checks that every requirement of a DECIDED outcome is
// satisfied.
func (c *checker) evidence(spec pack.DecisionSpec) {
	if !c.needsGrounds(spec) {
		return
	}
	for _, q := range Unsatisfied(spec, c.f) {
		if q.RuleID == "" {
			c.add(CodeEvidenceMissing, q.Path, "%q is not satisfied by a tool result, the policy evaluation, request context or admitted evidence", q.Name)
			continue
		}
		c.add(CodeEvidenceMissing, q.Path, "%q, which policy rule %s#%s requires, is not satisfied by a tool result, the policy evaluation, request context or admitted evidence", q.Name, q.BundleID, q.RuleID)
	}
}

// approvals checks that every active gate has a complete approval on a
// DECIDED outcome (a denial is not one). Gates are checked in id order.
func (c *checker) approvals(spec pack.DecisionSpec) {
	if !c.needsGrounds(spec) {
		return
	}
	for _, gate := range sortedkeys.Of(c.f.ActiveGates) {
		role := c.f.ActiveGates[gate]
		i := slices.IndexFunc(c.r.Approvals, func(a Approval) bool { return a.GateID == gate && !a.Denied() })
		if i < 0 {
			c.add(CodeApprovalMissing, "approvals", "gate %s is active and has no approval", gate)
			continue
		}
		a := c.r.Approvals[i]
		if a.Approver == "" || !a.ApprovalModeEffective.Valid() || a.EvidenceSnapshotHash == "" || (a.ApproverRole != "" && a.ApproverRole != role) {
			c.add(CodeApprovalIncomplete, fmt.Sprintf("approvals[%d]", i), "approval on %s needs an approver holding %s, the effective mode and the evidence snapshot hash", gate, role)
		}
	}
}

// refusalGrounds checks that a DECIDED refusal or escalation cites the
// policy decision or evidence that forced it.
func (c *checker) refusalGrounds(spec pack.DecisionSpec) {
	r := c.r
	if r.Status == Decided && refusesOrEscalates(spec, r.Outcome) && len(r.PolicyDecisions) == 0 && len(r.EvidenceRefs) == 0 {
		c.add(CodeEvidenceMissing, "policy_decisions", "a %s outcome needs the policy decision or evidence that forced it", r.Outcome)
	}
}

// citations checks what the record cites: its evidence refs resolve in
// the run, its subjects are in a CEID namespace of the pack, and every
// policy decision a tool call was bound to is recorded.
func (c *checker) citations() {
	r, f := c.r, c.f
	resolves := f.resolves
	if len(r.EvidenceRefs)*(len(f.ToolResults)+len(f.PolicyRefs)+len(f.Artifacts)) > maxRefScan {
		// Many refs against many sources: one index of them all.
		known := make(map[string]bool, len(f.Admitted)+len(f.ToolResults)+len(f.PolicyRefs)+len(f.Artifacts))
		for ref := range f.Admitted {
			known[ref] = true
		}
		for _, t := range f.ToolResults {
			known[t.ref()] = true
		}
		for _, ref := range slices.Concat(f.PolicyRefs, f.Artifacts) {
			known[ref] = true
		}
		resolves = func(ref string) bool { return known[ref] }
	}
	for i, ref := range r.EvidenceRefs {
		if !resolves(ref) {
			c.add(CodeEvidenceUnknown, fmt.Sprintf("evidence_refs[%d]", i), "%q does not resolve to admitted evidence, a tool result, a policy or an artifact of the run", ref)
		}
	}
	namespaces := f.Pack.IntelligenceRefs.IdentityLayer.CEIDNamespaces
	for i, s := range r.SubjectIDs {
		ns, _, found := strings.Cut(s, ":")
		if !found || !slices.Contains(namespaces, ns) {
			c.add(CodeSubjectNamespace, fmt.Sprintf("subject_ids[%d]", i), "%q is not in a CEID namespace of the pack (%v)", s, namespaces)
		}
	}
	for _, id := range f.BoundPolicyIDs {
		if !slices.ContainsFunc(r.PolicyDecisions, func(p PolicyDecisionRef) bool { return p.PolicyDecisionID == id }) {
			c.add(CodePolicyUnbound, "policy_decisions", "%s, which a tool call of the run is bound to, is not recorded", id)
		}
	}
}

// maxRefScan bounds the comparisons citations makes scanning the run's
// lists for the record's refs; past it, it indexes them.
const maxRefScan = 4096

// resolves reports whether ref names admitted evidence, a tool result, a
// policy or an artifact of the run: looked up where each is kept, with no
// index of them all built (a record cites a few).
func (f *Facts) resolves(ref string) bool {
	if _, ok := f.Admitted[ref]; ok {
		return true
	}
	return slices.ContainsFunc(f.ToolResults, func(t ToolFact) bool { return t.isRef(ref) }) ||
		slices.Contains(f.PolicyRefs, ref) || slices.Contains(f.Artifacts, ref)
}

// controls checks the record's controls against the compiled ones.
func (c *checker) controls() {
	if !equalControls(c.r.ControlsActive, c.f.Controls) {
		c.add(CodeControls, "controls_active", "must equal the compiled runtime controls")
	}
}

// statusConsistency checks what a DEFERRED or CLOSED record must say.
func (c *checker) statusConsistency() {
	if c.r.Status == Deferred && c.r.Awaiting == nil {
		c.add(CodeStatus, "awaiting", "a DEFERRED record says what it awaits")
	}
	if c.r.Status == Closed && c.r.Closes == "" {
		c.add(CodeStatus, "closes", "a CLOSED record names the record it closes")
	}
}

func equalControls(a, b Controls) bool {
	return slices.Equal(a.MustRefuse, b.MustRefuse) && slices.Equal(a.MustEscalate, b.MustEscalate) &&
		slices.Equal(a.ApprovalGatesActive, b.ApprovalGatesActive) && slices.Equal(a.RedactionRulesActive, b.RedactionRulesActive)
}
