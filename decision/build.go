package decision

import (
	"fmt"
	"slices"
	"time"

	"github.com/contextos/contextos/internal/decisionspec"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/runcontext"
)

// BuildInput is what a run knows when it ends (or pauses).
type BuildInput struct {
	Run       *runcontext.RunContext
	RequestID string
	// Seq numbers the records of one run (0 for the first).
	Seq int
	// Time is the record's timestamp (from the runtime's clock).
	Time time.Time

	DecisionKey string
	Outcome     string
	Outputs     map[string]any
	Confidence  float64
	Rationale   Rationale
	SubjectIDs  []string
	// EvidenceRefs are the refs the decision cites; Build adds the refs of
	// the run's successful tool results and policy decisions.
	EvidenceRefs    []string
	PolicyDecisions []PolicyDecisionRef
	Approvals       []Approval
	Budget          BudgetUsage
	Lineage         Lineage
	// LedgerHash is the run's context ledger_hash (replay.ledger_hash).
	LedgerHash string
	// Status is the status the run asks for: DECIDED for a decision, or
	// REJECTED, ESCALATED, DEFERRED, IN_FLIGHT. Build lowers a DECIDED
	// that the facts do not support.
	Status   Status
	Awaiting *Awaiting
	Closes   string
	Facts    *Facts
	// ClaimVerification is what the runtime did with the run's identity
	// claim (agent_identity.claim_verification); "" when it needed none.
	ClaimVerification ClaimVerification

	// outputsRedacted, set only through decisionhook.OutputsRedacted by
	// the module's own packages, says Outputs already passed the built-in
	// secret detectors: Build does not apply them to Outputs again.
	outputsRedacted bool
}

// Build assembles a record and settles its status against the facts (its
// outputs and rationale pass the built-in secret detectors first, whatever
// redaction rules the pack names): a
// record asked to be DECIDED that does not validate (an active gate without
// its approval, required evidence not satisfied, an evidence ref that does
// not resolve, a subject outside the pack's CEID namespaces, a tool call's
// policy decision not recorded, ...) becomes ESCALATED and lists the
// problems in Problems. It never becomes DEFERRED: only a run paused with a
// resumable checkpoint is. Build returns the record and its validation
// error (nil when it validates); a record that does not validate carries
// its problems whatever its status.
func Build(in BuildInput) (*Record, error) {
	rc := in.Run
	if rc == nil || in.Facts == nil || in.Facts.Pack == nil {
		return nil, fmt.Errorf("%w: Build needs the run context and the facts with the pack", ErrInvalid)
	}
	spec, ok := decisionspec.For(in.Facts.Pack, in.DecisionKey)
	if !ok {
		return nil, fmt.Errorf("%w: no decision spec %q", ErrInvalid, in.DecisionKey)
	}
	// The record's evidence refs: the caller's, then each tool result's
	// not among them, in a list sized for them all.
	refs := append(make([]string, 0, len(in.EvidenceRefs)+len(in.Facts.ToolResults)), in.EvidenceRefs...)
	for _, t := range in.Facts.ToolResults {
		if !slices.ContainsFunc(refs, t.isRef) {
			refs = append(refs, t.ref())
		}
	}
	agent := AgentIdentity{Subject: rc.Agent.AgentURN, PrincipalChain: rc.PrincipalChain(), ClaimVerification: in.ClaimVerification}
	if c := rc.Agent.IdentityClaim; c != nil {
		agent.ClaimHash = c.ClaimHash
	}
	actorID := rc.Agent.AgentID
	if actorID == "" {
		actorID = rc.Agent.AgentURN
	}
	r := &Record{
		DecisionKey: in.DecisionKey, DecisionVersion: spec.Version, Timestamp: in.Time.UTC().Format(time.RFC3339),
		Status: in.Status, Actor: Actor{Type: "AGENT", ID: actorID}, AgentIdentity: agent, IntentRef: rc.Intent,
		SubjectIDs: nonNil(in.SubjectIDs), InputsRefs: InputsRefs{Request: in.RequestID, Session: rc.SessionID},
		Outcome: in.Outcome, Outputs: in.Outputs, EvidenceRefs: nonNil(refs),
		PolicyDecisions: in.PolicyDecisions, Approvals: in.Approvals, ControlsActive: in.Facts.Controls,
		Confidence: in.Confidence, Rationale: in.Rationale, BudgetUsage: in.Budget, Lineage: in.Lineage,
		TraceID: rc.TraceID, RunID: rc.RunID, TenantID: rc.TenantID, Awaiting: in.Awaiting, Closes: in.Closes,
		Replay: &Replay{ReplayPacketID: in.Lineage.ReplayPacketID, CompiledContextHash: in.Lineage.CompiledContextHash,
			ToolTranscriptChainHash: in.Lineage.ToolTranscriptChainHash, LedgerHash: in.LedgerHash},
	}
	if r.PolicyDecisions == nil {
		r.PolicyDecisions = []PolicyDecisionRef{}
	}
	if r.Approvals == nil {
		r.Approvals = []Approval{}
	}
	if r.Rationale.AlternativesConsidered == nil {
		r.Rationale.AlternativesConsidered = []string{}
	}
	if r.Outputs == nil {
		r.Outputs = map[string]any{}
	}
	redactSecrets(r, in.outputsRedacted)
	if r.Status == Decided {
		// A DECIDED record must validate: one that does not is ESCALATED
		// and names its problems, never stored as decided.
		if err := Validate(withID(r, in), in.Facts); err != nil {
			r.Status = Escalated
			r.Problems = err.(*ValidationError).Problems
			return withID(r, in), err
		}
		return r, nil // validated as it is, its id set
	}
	r = withID(r, in)
	if err := Validate(r, in.Facts); err != nil {
		r.Problems = err.(*ValidationError).Problems
		return r, err
	}
	return r, nil
}

// redactSecrets applies the built-in secret detectors to what a record
// takes from a planner, a critic or a stop reason (its outputs and
// rationale), whatever redaction rules the pack names: a key, a token or
// the value of a secret-named output never reaches a record. What they
// find becomes "[REDACTED]"; the inputs are not changed. Outputs they
// already redacted (outputsRedacted) are not redacted again: it would
// change nothing.
func redactSecrets(r *Record, outputsRedacted bool) {
	if !outputsRedacted {
		if out, changed := sensitive.RedactSecrets(r.Outputs); changed {
			r.Outputs = out.(map[string]any)
		}
	}
	r.Rationale.Strategy, _ = sensitive.Redact(r.Rationale.Strategy, sensitive.Secrets)
	r.Rationale.Summary, _ = sensitive.Redact(r.Rationale.Summary, sensitive.Secrets)
	var alts []string
	for i, a := range r.Rationale.AlternativesConsidered {
		if red, changed := sensitive.Redact(a, sensitive.Secrets); changed {
			if alts == nil {
				alts = slices.Clone(r.Rationale.AlternativesConsidered)
			}
			alts[i] = red
		}
	}
	if alts != nil {
		r.Rationale.AlternativesConsidered = alts
	}
}

func withID(r *Record, in BuildInput) *Record {
	id, err := decisionspec.RecordID(in.Run.RunID, in.DecisionKey, string(r.Status), in.Seq)
	if err == nil {
		r.RecordID = id
	}
	return r
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
