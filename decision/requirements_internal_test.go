package decision

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/contextos/contextos/internal/packrules"
	"github.com/contextos/contextos/pack"
)

// TestUnsatisfiedPathsAsFormatted holds Unsatisfied, which writes a path
// only for an unsatisfied requirement, to the requirements it returned
// when every path was formatted with fmt.Sprintf first: the same
// requirements, in the same order, with the same paths (ids that fmt
// would treat specially among them).
func TestUnsatisfiedPathsAsFormatted(t *testing.T) {
	spec := pack.DecisionSpec{DecisionKey: "refund", RequiredEvidence: []string{"orders_lookup", "policy_eval", "customer_id", "kyc", "order_lookup"}}
	pk := &pack.Pack{}
	pk.ToolingLayer.AdapterRegistry = []pack.Adapter{{AdapterID: "adp_orders", Capabilities: []string{"lookup", "cancel"}}, {AdapterID: "adp_kyc", Capabilities: []string{"check"}}}
	f := &Facts{
		Pack:            pk,
		ToolResults:     []ToolFact{{CapabilityID: "adp_orders.lookup", ToolCallID: "tc_1"}},
		PolicyEvaluated: false,
		RequestContext:  map[string]any{"customer_id": "cus_1", "kyc": false},
		Admitted:        map[string]string{"kg:1": "kyc_doc"},
		AppliedRules: []AppliedRule{
			{BundleID: "b%d", RuleID: "r#1 é", Requires: []string{"kyc_doc", "adp_kyc.check", "orders_cancel", "x"}},
			{BundleID: "other", RuleID: "bound", DecisionBinding: "other", Requires: []string{"never"}},
			{BundleID: "b2", RuleID: "r2", DecisionBinding: "refund", Requires: []string{"policy_eval", "adp_orders.lookup"}},
		},
	}
	// The reference: every requirement with its formatted path, then the
	// unsatisfied ones.
	var all []Requirement
	for i, name := range spec.RequiredEvidence {
		all = append(all, Requirement{Name: name, Path: fmt.Sprintf("required_evidence[%d]", i)})
	}
	for _, r := range f.AppliedRules {
		if r.DecisionBinding != "" && r.DecisionBinding != spec.DecisionKey {
			continue
		}
		for i, name := range r.Requires {
			all = append(all, Requirement{Name: name, Path: fmt.Sprintf("policy_rules[%s#%s].requires[%d]", r.BundleID, r.RuleID, i), BundleID: r.BundleID, RuleID: r.RuleID})
		}
	}
	var want []Requirement
	for _, q := range all {
		if !satisfiedByConcat(q.Name, f) {
			want = append(want, q)
		}
	}
	got := Unsatisfied(spec, f)
	if len(want) == 0 || len(want) == len(all) {
		t.Fatalf("the facts satisfy %d of %d requirements: the test needs some of each", len(all)-len(want), len(all))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Unsatisfied gave\n%#v\nnot\n%#v", got, want)
	}
	for r := range requirements(spec, f) {
		if q := r.withPath(); !slicesContainsReq(all, q) {
			t.Fatalf("requirement %#v has no formatted twin", q)
		}
	}
}

func slicesContainsReq(all []Requirement, q Requirement) bool {
	for _, a := range all {
		if a == q {
			return true
		}
	}
	return false
}

// satisfiedByConcat is satisfied's tool-result test as it was written,
// with the concatenated names; the rest is satisfied's.
func satisfiedByConcat(name string, f *Facts) bool {
	for _, a := range f.Pack.ToolingLayer.AdapterRegistry {
		for _, c := range a.Capabilities {
			if name == packrules.AdapterNoun(a.AdapterID)+"_"+c || name == a.AdapterID+"."+c {
				for _, t := range f.ToolResults {
					if t.CapabilityID == a.AdapterID+"."+c {
						return true
					}
				}
				return false
			}
		}
	}
	return satisfied(name, &Facts{PolicyEvaluated: f.PolicyEvaluated, RequestContext: f.RequestContext, Admitted: f.Admitted})
}

// TestJoined holds joined to the comparison with the concatenation it
// stands for.
func TestJoined(t *testing.T) {
	parts := []string{"", "a", "ab", "a.b", "a_b", ".", "_", "adp_orders", "lookup", "é"}
	for _, s := range []string{"", ".", "a.", ".b", "a.b", "a_b", "ab.", "a.b.c", "adp_orders.lookup", "order_lookup", "é.é", "é_a"} {
		for _, a := range parts {
			for _, b := range parts {
				for _, sep := range []byte{'.', '_'} {
					if got, want := joined(s, a, sep, b), s == a+string(sep)+b; got != want {
						t.Fatalf("joined(%q, %q, %q, %q) = %v, want %v", s, a, sep, b, got, want)
					}
				}
			}
		}
	}
}
