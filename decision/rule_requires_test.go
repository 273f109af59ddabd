package decision_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// A policy rule that applied in the run adds its requires entries to what
// a DECIDED record with a non-refusal, non-escalation outcome must satisfy
// (docs/evidence.md); Build makes a record that lacks one ESCALATED with a
// problem naming the rule and the name.
func TestBuildEnforcesAppliedRuleRequires(t *testing.T) {
	t.Parallel()
	rr := runRefund(t, true)
	done := rr.results[len(rr.results)-1]
	approvals := func() []decision.Approval {
		return []decision.Approval{{GateID: "GATE_FINANCE_APPROVAL", Approver: done.Metadata.Approver, ApproverRole: "finance_lead",
			ApprovalModeEffective: runcontext.Destructive, EvidenceSnapshotHash: done.Metadata.ApprovalEvidenceSnapshotHash, DecidedAt: rr.now.Format(time.RFC3339), ToolCallID: done.ToolCallID}}
	}
	rule := func(binding string, names ...string) decision.AppliedRule {
		return decision.AppliedRule{BundleID: "POLICY_RETURNS_V4", RuleID: "R_DOCS", DecisionBinding: binding, Requires: names}
	}
	const path = "policy_rules[POLICY_RETURNS_V4#R_DOCS].requires[1]"
	tests := []struct {
		name    string
		rules   []decision.AppliedRule
		admit   map[string]string // ref → kind added to the admitted evidence
		outcome string
		// problem is the path of the required_evidence_missing problem
		// Build must report, "" for none.
		problem string
	}{
		{"bound rule, name unsatisfied", []decision.AppliedRule{rule("support.refund.execute", "order_lookup", "refund_policy_doc")}, nil, "approved", path},
		{"unbound rule, name unsatisfied", []decision.AppliedRule{rule("", "order_lookup", "refund_policy_doc")}, nil, "approved", path},
		{"rule bound to another decision", []decision.AppliedRule{rule("support.refund.review", "order_lookup", "refund_policy_doc")}, nil, "approved", ""},
		{"satisfied by admitted evidence of the kind", []decision.AppliedRule{rule("support.refund.execute", "order_lookup", "refund_policy_doc")},
			map[string]string{"doc:refund-policy#v7": "refund_policy_doc"}, "approved", ""},
		{"admitted evidence of another kind", []decision.AppliedRule{rule("", "order_lookup", "refund_policy_doc")},
			map[string]string{"doc:refund-policy#v7": "faq"}, "approved", path},
		{"admitted evidence without its kind", []decision.AppliedRule{rule("", "order_lookup", "refund_policy_doc")},
			map[string]string{"doc:refund-policy#v7": ""}, "approved", path},
		{"refusal outcome needs none", []decision.AppliedRule{rule("", "order_lookup", "refund_policy_doc")}, nil, "denied", ""},
		{"escalation outcome needs none", []decision.AppliedRule{rule("", "order_lookup", "refund_policy_doc")}, nil, "escalated", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := rr.facts()
			f.AppliedRules = tc.rules
			for ref, kind := range tc.admit {
				f.Admitted[ref] = kind
			}
			in := rr.input(f, approvals())
			in.Outcome = tc.outcome
			rec, err := decision.Build(in)
			if tc.problem == "" {
				if err != nil || rec.Status != decision.Decided {
					t.Fatalf("Build = %s, %v; want DECIDED", rec.Status, err)
				}
				return
			}
			if rec.Status != decision.Escalated {
				t.Fatalf("status %s, want ESCALATED", rec.Status)
			}
			i := slices.IndexFunc(rec.Problems, func(p decision.Problem) bool { return p.Code == decision.CodeEvidenceMissing })
			if i < 0 || rec.Problems[i].Path != tc.problem || !strings.Contains(rec.Problems[i].Message, "refund_policy_doc") ||
				!strings.Contains(rec.Problems[i].Message, "POLICY_RETURNS_V4#R_DOCS") {
				t.Fatalf("problems %+v, want %s naming the rule and the name", rec.Problems, tc.problem)
			}
			if ve, ok := err.(*decision.ValidationError); !ok || !ve.Has(decision.CodeEvidenceMissing) {
				t.Errorf("Build error = %v", err)
			}
			// Forced to DECIDED, Validate refuses it the same way.
			rec.Status = decision.Decided
			if ve, ok := decision.Validate(rec, f).(*decision.ValidationError); !ok || !slices.ContainsFunc(ve.Problems, func(p decision.Problem) bool { return p.Path == tc.problem }) {
				t.Errorf("Validate = %v", ve)
			}
		})
	}
}

// A decision requires the spec's names, then each applicable rule's, in
// order (all of them are unsatisfied without facts); Unsatisfied keeps the
// ones the facts do not satisfy.
func TestRequirements(t *testing.T) {
	rr := runRefund(t, true)
	f := rr.facts()
	f.AppliedRules = []decision.AppliedRule{
		{BundleID: "B", RuleID: "R1", DecisionBinding: "support.refund.execute", Requires: []string{"order_lookup", "doc_a"}},
		{BundleID: "B", RuleID: "R2", DecisionBinding: "other.decision", Requires: []string{"doc_b"}},
		{BundleID: "B", RuleID: "R3", Requires: []string{"doc_c"}},
	}
	spec := rr.pack.DecisionLayer.DecisionSpecs[slices.IndexFunc(rr.pack.DecisionLayer.DecisionSpecs, func(s pack.DecisionSpec) bool { return s.DecisionKey == "support.refund.execute" })]
	var got []string
	for _, q := range decision.Unsatisfied(spec, &decision.Facts{Pack: rr.pack, AppliedRules: f.AppliedRules}) {
		got = append(got, q.Path+"="+q.Name)
	}
	want := []string{"required_evidence[0]=identity_verified", "required_evidence[1]=order_lookup", "required_evidence[2]=policy_eval",
		"policy_rules[B#R1].requires[0]=order_lookup", "policy_rules[B#R1].requires[1]=doc_a", "policy_rules[B#R3].requires[0]=doc_c"}
	if !slices.Equal(got, want) {
		t.Errorf("requirements = %q, want %q", got, want)
	}
	got = got[:0]
	for _, q := range decision.Unsatisfied(spec, f) {
		got = append(got, q.Path)
	}
	if want := []string{"policy_rules[B#R1].requires[1]", "policy_rules[B#R3].requires[0]"}; !slices.Equal(got, want) {
		t.Errorf("Unsatisfied = %q, want %q", got, want)
	}
}
