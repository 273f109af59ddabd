package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/decisionspec"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// builtinCritic enforces the pack:
// surfaced tools only, approval modes within the safety mode, closed
// outcome sets, required evidence before commit, budgets and a loop guard.
type builtinCritic struct{}

// verify judges a plan before it runs.
func (builtinCritic) verify(in *CriticInput, cp *checkpointState) Judgement {
	surfaced := in.Compiled.ContextLedger.Tools
	for i, s := range in.Plan.Steps {
		if !slices.Contains(surfaced, s.CapabilityID) {
			return Judgement{Verdict: VerdictReplan, Reason: fmt.Sprintf("violates_decision_spec: step %d calls %s, which is not in the tool manifest (surfaced: %s)", i, s.CapabilityID, strings.Join(surfaced, ", "))}
		}
		if s.ApprovalMode != "" && !s.ApprovalMode.AtMost(in.Run.SafetyMode) {
			return Judgement{Verdict: VerdictReplan, Reason: fmt.Sprintf("approval_mode_mismatch: step %d asks for %s above the run's safety mode %s", i, s.ApprovalMode, in.Run.SafetyMode)}
		}
	}
	if d := in.Plan.Decision; d != nil {
		spec, ok := decisionspec.For(in.Pack, d.DecisionKey)
		switch {
		case !ok:
			return Judgement{Verdict: VerdictReplan, Reason: fmt.Sprintf("violates_decision_spec: no decision %q in the pack", d.DecisionKey)}
		case !slices.Contains(spec.AllowedOutcomes, d.Outcome):
			return Judgement{Verdict: VerdictReplan, Reason: fmt.Sprintf("violates_decision_spec: outcome %q is not one of %v", d.Outcome, spec.AllowedOutcomes)}
		}
	}
	if len(in.Plan.Steps) == 0 && in.Plan.Decision == nil {
		if in.Plan.Replan != "" {
			return Judgement{Verdict: VerdictReplan, Reason: "planner_replan: " + in.Plan.Replan}
		}
		return Judgement{Verdict: VerdictReplan, Reason: "loop_guard: the plan has no steps and no decision"}
	}
	// Loop guard: the same steps again after they already ran.
	if len(in.Plan.Steps) > 0 && in.Plan.Decision == nil {
		if prev := lastRun(cp); prev != nil && prev.Decision == nil {
			a, _ := canon.Digest(prev.Steps)
			b, _ := canon.Digest(in.Plan.Steps)
			if a == b {
				return Judgement{Verdict: VerdictReplan, Reason: "loop_guard: the plan repeats the previous steps"}
			}
		}
	}
	return Judgement{Verdict: VerdictOK}
}

// lastRun is the plan the loop guard compares with: the latest one before
// the plan being verified (the last of cp.Plans) that proposed a decision
// or whose steps ran, or nil. Plans of steps that never ran are passed
// over: the turn that took the run over its budget, say, asked again on
// a resume with a larger one, is not a loop when proposed again, and a
// plan the loop guard sent back never ran either, so proposing the steps
// that ran again and again is still one.
func lastRun(cp *checkpointState) *Plan {
	for turn := len(cp.Plans) - 2; turn >= 0; turn-- {
		if cp.Plans[turn].Decision != nil || slices.ContainsFunc(cp.Results, func(r StepResult) bool { return r.Turn == turn }) {
			return cp.Plans[turn]
		}
	}
	return nil
}

// score judges a plan's results against the run's policy result and the
// facts the run established (runFacts). cont reports a plan that ran its
// steps and proposed no decision yet (the judgement is a replan with
// reason reasonContinue): the planner is asked again, which does not
// count as a replan.
func (c builtinCritic) score(in *CriticInput, pol *policy.Evaluation, facts *decision.Facts) (j Judgement, cont bool) {
	if in.Plan.Decision == nil && !c.failed(in) {
		return Judgement{Verdict: VerdictReplan, Reason: reasonContinue}, true
	}
	return c.scoreResults(in, pol, facts), false
}

// failed reports whether a step of the plan's turn did not succeed.
func (builtinCritic) failed(in *CriticInput) bool {
	for _, r := range in.Results {
		if r.Turn != in.Turn {
			continue
		}
		switch r.Result.Status {
		case gateway.StatusBlocked, gateway.StatusRejected, gateway.StatusFailed, gateway.StatusError:
			return true
		}
	}
	return false
}

// scoreResults is score of a plan with a failed step or a decision.
func (builtinCritic) scoreResults(in *CriticInput, pol *policy.Evaluation, facts *decision.Facts) Judgement {
	for _, r := range in.Results {
		if r.Turn != in.Turn {
			continue
		}
		switch r.Result.Status {
		case gateway.StatusBlocked, gateway.StatusRejected:
			return Judgement{Verdict: VerdictReplan, Reason: fmt.Sprintf("%s was %s: %s", r.Step.CapabilityID, r.Result.Status, r.Result.Error.Message)}
		case gateway.StatusFailed:
			if r.Result.Error != nil && r.Result.Error.Retryable {
				return Judgement{Verdict: VerdictRetry, Reason: fmt.Sprintf("%s failed (%s); try again", r.Step.CapabilityID, r.Result.Error.Code)}
			}
			return Judgement{Verdict: VerdictReplan, Reason: fmt.Sprintf("%s failed (%s)", r.Step.CapabilityID, errCode(r.Result))}
		case gateway.StatusError:
			return Judgement{Verdict: VerdictReplan, Reason: fmt.Sprintf("%s returned an error (%s)", r.Step.CapabilityID, errCode(r.Result))}
		}
	}
	d := in.Plan.Decision
	spec, _ := decisionspec.For(in.Pack, d.DecisionKey)
	if decisionspec.IsEscalation(spec, d.Outcome) {
		return Judgement{Verdict: VerdictEscalate, Reason: "the planner escalated: " + d.Rationale}
	}
	if decisionspec.IsRefusal(spec, d.Outcome) {
		return Judgement{Verdict: VerdictAccept}
	}
	// A write that did not complete (failed, refused, never executed) and
	// was not made good by a later successful call of the same capability
	// leaves only a refusal or escalation outcome decidable.
	if w := unresolvedWrite(in.Compiled, in.Results); w != nil {
		return Judgement{Verdict: VerdictReplan, Reason: fmt.Sprintf("write_not_completed: %s ended %s (%s); %s cannot be %q until it completes, only a refusal or escalation outcome can be decided",
			w.Step.CapabilityID, w.Result.Status, errCode(w.Result), d.DecisionKey, d.Outcome)}
	}
	// A deny bound to this decision forbids every outcome but its refusal
	// or escalation outcomes.
	for _, pd := range pol.Decisions {
		if pd.Outcome == policy.Deny && pd.DecisionBinding == d.DecisionKey {
			return Judgement{Verdict: VerdictReplan, Reason: fmt.Sprintf("violates_decision_spec: policy rule %s denied %s (%s); only a refusal or escalation outcome is allowed", pd.RuleID, d.DecisionKey, pd.Reason)}
		}
	}
	// Required evidence: the spec's required_evidence and the requires
	// entries of every policy rule that applied in the run and is bound to
	// this decision or to none (decision.Unsatisfied).
	if missing := decision.Unsatisfied(spec, facts); len(missing) > 0 {
		q := missing[0]
		if q.RuleID == "" {
			return Judgement{Verdict: VerdictReplan, Reason: fmt.Sprintf("missing_evidence: %s is required before %s can be decided", q.Name, d.DecisionKey)}
		}
		return Judgement{Verdict: VerdictReplan, Reason: fmt.Sprintf("missing_evidence: %s is required by policy rule %s#%s before %s can be decided", q.Name, q.BundleID, q.RuleID, d.DecisionKey)}
	}
	return Judgement{Verdict: VerdictAccept}
}

// unresolvedWrite returns the first write-class step result of the run
// that did not succeed and was not made good, or nil. A write that reached
// its adapter and failed is never made good: the same action proposed
// again gets its stored result (its idempotency key is the same), and
// another action does not undo the failure. A write refused before it ran
// (rejected arguments, blocked by policy, budget or gate) had no effect:
// a later successful call of the same capability makes it good. A
// capability missing from the compiled tool manifest counts as a write
// (fail closed).
func unresolvedWrite(cc *compiler.CompiledContext, results []StepResult) *StepResult {
	for i := range results {
		r := &results[i]
		if r.Result.Status.Succeeded() {
			continue
		}
		if mode, ok := capabilityMode(cc, r.Result.CapabilityID); ok && !mode.IsWrite() {
			continue
		}
		if r.Result.Metadata.Attempts > 0 {
			return r
		}
		if !slices.ContainsFunc(results[i+1:], func(later StepResult) bool {
			return later.Result.CapabilityID == r.Result.CapabilityID && later.Result.Status.Succeeded()
		}) {
			return r
		}
	}
	return nil
}

// capabilityMode is a surfaced capability's approval mode in the compiled
// tool manifest.
func capabilityMode(cc *compiler.CompiledContext, capabilityID string) (runcontext.ApprovalMode, bool) {
	adapter, capName, ok := strings.Cut(capabilityID, ".")
	if !ok {
		return "", false
	}
	for _, e := range cc.Manifests.ToolManifest {
		if e.AdapterID == adapter {
			if md, ok := e.CapabilityMetadata[capName]; ok {
				return md.ApprovalMode, true
			}
		}
	}
	return "", false
}

func errCode(r *gateway.ToolResultEnvelope) string {
	if r.Error == nil {
		return "unknown"
	}
	return r.Error.Code
}

// reasonContinue is the score reason for a plan that ran its steps and
// proposed no decision yet (builtinCritic.score's cont): the words the
// event and the next plan request carry; the loop decides on cont.
const reasonContinue = "continue: no decision proposed yet"
