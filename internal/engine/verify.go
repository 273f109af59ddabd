package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/decisionspec"
	"github.com/contextos/contextos/policy"
)

// verifyWrite is the run's gateway.RunOptions.VerifyWrite: the built-in
// critic's check before a write commits. A write-class call runs only when
// what the run already holds (the results of the calls that ran before it,
// the policy evaluation, request context, admitted evidence) satisfies
// every evidence name that
//   - the required_evidence of the run's primary decision names, and of
//     the decision its plan proposes when that is another decision of the
//     pack (the plan is the model's: naming a decision that needs less
//     never lowers what a write needs);
//   - a rule that applied in the run's evaluation requires, when it is
//     bound to one of those decisions or to none;
//   - a rule that applied to the call itself (its own evaluation, when the
//     policy reads tool data) requires, whatever decision it is bound to.
//
// Otherwise the call is blocked (permission_denied, naming the first
// missing name and the rule or decision that requires it; details list
// every missing name), nothing reaches the adapter, and the critic sends
// the plan back. Names are satisfied as docs/evidence.md says; a tool
// result satisfies one only if it succeeded before this call.
func (r *run) verifyWrite(w *gateway.WriteCall) *gateway.ToolError {
	keys := []string{r.primaryDecision()}
	if p := r.cp.Plan; p != nil && p.Decision != nil && p.Decision.DecisionKey != keys[0] {
		keys = append(keys, p.Decision.DecisionKey)
	}
	f := r.facts()
	// The rules that apply to this write: the run's, and the call's own,
	// which bind it whatever their decision_binding says.
	own := make([]policy.Decision, len(w.Decisions))
	for i, d := range w.Decisions {
		d.DecisionBinding = ""
		own[i] = d
	}
	fc := *f // the run's facts are shared (run.facts): this call's own
	fc.AppliedRules = appliedRules(r.cc.ContextLedger.PolicyResults, own)
	f = &fc
	type miss struct {
		decision.Requirement
		key string
	}
	var missing []miss
	served := false
	for _, key := range keys {
		// A plan naming a decision the pack does not have never passes
		// the critic; the run's own decision still binds the write.
		spec, ok := decisionspec.For(r.prepared.Pack(), key)
		if !ok {
			continue
		}
		served = true
		for _, q := range decision.Unsatisfied(spec, f) {
			missing = append(missing, miss{q, key})
		}
	}
	if !served {
		// Fail closed: a write that serves no decision of the pack cannot
		// be verified.
		return gateway.NewToolError(gateway.CodePermissionDenied, false, "missing_evidence: the write serves no decision of the pack, so what it requires cannot be verified", nil)
	}
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, 0, len(missing))
	for _, q := range missing {
		if !slices.Contains(names, q.Name) {
			names = append(names, q.Name)
		}
	}
	q := missing[0]
	by := ""
	if q.RuleID != "" {
		by = " by policy rule " + q.BundleID + "#" + q.RuleID
	}
	msg := fmt.Sprintf("missing_evidence: %s is required%s before %s, and the run does not hold it before %s runs (missing: %s)", q.Name, by, q.key, w.CapabilityID, strings.Join(names, ", "))
	return gateway.NewToolError(gateway.CodePermissionDenied, false, msg, map[string]any{"missing_evidence": names, "decision_key": q.key})
}
