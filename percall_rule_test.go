package contextos_test

import (
	"slices"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// A rule that reads the tool call is evaluated per call by the gateway.
// When it applies to a call and its branch requires evidence, that
// requirement binds the run's decision exactly as a rule that applied at
// compile time does, and the record names the rule on the call's policy
// decision.
func TestPerCallRuleRequiresEnforced(t *testing.T) {
	rule := func(then map[string]any) func(p map[string]any) {
		return func(p map[string]any) {
			addRule(p, map[string]any{
				"rule_id":    "R_DOCS_TOOL",
				"applies_to": map[string]any{"tool.capability_id": "adp_payments.issue_refund"},
				"if":         map[string]any{">": []any{map[string]any{"var": "tool.args.amount_inr"}, 1000}},
				"then":       then,
				"else":       map[string]any{"allow": true},
				"rationale":  "Refund calls above 1000 need the written refund policy on file.",
			})
		}
	}
	tests := []struct {
		name         string
		amount       int
		then         map[string]any
		wantApproved bool
	}{
		{"requires unsatisfied above threshold", 1500, map[string]any{"allow": true, "requires": []any{docKind}}, false},
		{"below threshold the else branch requires nothing", 500, map[string]any{"allow": true, "requires": []any{docKind}}, true},
		{"then branch without requires", 1500, map[string]any{"allow": true}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := contextostest.New(t, approvePlanner(tc.amount), [][]byte{supportPackWith(t, rule(tc.then))}, &contextostest.Options{
				Runtime: contextos.Options{Evidence: evidence(t), ReplaySampleRate: 1},
				Scopes:  map[string][]string{"adp_payments.issue_refund": {"payments.refund"}},
			})
			scriptDefaults(h, "")
			req, rc := refundRequest(t, tc.amount, true)
			res := h.Invoke(req, rc)
			if res.Record == nil {
				t.Fatal("no record")
			}
			approved := res.Record.Status == decision.Decided && res.Record.Outcome == "approved"
			if approved != tc.wantApproved {
				t.Fatalf("status %s outcome %q, want approved=%v", res.Record.Status, res.Record.Outcome, tc.wantApproved)
			}
			// The refund call's own decision is recorded with the rule
			// that applied to it (not the run's compile-time rules).
			named := slices.ContainsFunc(res.Record.PolicyDecisions, func(p decision.PolicyDecisionRef) bool {
				return slices.Contains(p.RuleIDs, "R_DOCS_TOOL")
			})
			if !named {
				t.Errorf("policy_decisions %+v never name R_DOCS_TOOL, which applied to the refund call", res.Record.PolicyDecisions)
			}
		})
	}
}
