package engine

import (
	"reflect"
	"slices"
	"testing"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/policy"
)

// TestAppliedRulesOwnTheirRequirements holds appliedRules, whose
// requirement lists are cut from one array, to lists of their own: a
// later edit of the decisions they came from, or an append to one list,
// changes no other; duplicates are listed once, rules without
// requirements not at all.
func TestAppliedRulesOwnTheirRequirements(t *testing.T) {
	run := []policy.Decision{
		{BundleID: "b", RuleID: "r1", Requires: []string{"e1", "e2"}},
		{BundleID: "b", RuleID: "r2"},
		{BundleID: "b", RuleID: "r3", DecisionBinding: "k", Requires: []string{"e3"}},
	}
	call := []policy.Decision{
		{BundleID: "b", RuleID: "r1", Requires: []string{"e1", "e2"}},
		{BundleID: "b", RuleID: "r1", Requires: []string{"e1"}},
	}
	want := []decision.AppliedRule{
		{BundleID: "b", RuleID: "r1", Requires: []string{"e1", "e2"}},
		{BundleID: "b", RuleID: "r3", DecisionBinding: "k", Requires: []string{"e3"}},
		{BundleID: "b", RuleID: "r1", Requires: []string{"e1"}},
	}
	got := appliedRules(run, call)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("appliedRules = %+v, want %+v", got, want)
	}
	run[0].Requires[0], call[1].Requires[0] = "edited", "edited"
	_ = append(got[0].Requires, "appended")
	got[1].Requires = append(got[1].Requires, "appended")
	if !slices.Equal(got[0].Requires, []string{"e1", "e2"}) || !slices.Equal(got[2].Requires, []string{"e1"}) || !slices.Equal(got[1].Requires, []string{"e3", "appended"}) {
		t.Fatalf("lists changed by edits elsewhere: %+v", got)
	}
	if got := appliedRules(run[1:2]); got != nil {
		t.Fatalf("no rule requires: %+v, want nil", got)
	}
}

// TestIsPolicyRefIsTheRefsEquality holds isPolicyRef to the comparison
// it replaces: ref == "policy:" + bundle + "#" + rule, for ids that hold
// the separators themselves.
func TestIsPolicyRefIsTheRefsEquality(t *testing.T) {
	ids := []string{"", "a", "b", "a#b", "b#c", "#", "policy:", "c", "ab"}
	for _, ref := range []string{"policy:a#b", "policy:a#b#c", "policy:#", "policy:##", "policy:ab#c", "policy:a#bc", "polic:a#b", "policy:policy:#a", "a#b", ""} {
		for _, b := range ids {
			for _, r := range ids {
				if got, want := isPolicyRef(ref, b, r), ref == "policy:"+b+"#"+r; got != want {
					t.Errorf("isPolicyRef(%q, %q, %q) = %v, want %v", ref, b, r, got, want)
				}
			}
		}
	}
}

// TestRunDecisionRuleListsAreCapped: the record's run decisions each
// list their one rule id in a list cut from one array, capped at one:
// appending to one cannot write into the next's.
func TestRunDecisionRuleListsAreCapped(t *testing.T) {
	t.Parallel()
	r := refundRun(t)
	refs := r.policyDecisions()
	if len(refs) < 2 {
		t.Fatalf("the refund run's record lists %d run decisions, want several", len(refs))
	}
	want := make([][]string, len(refs))
	for i, p := range refs {
		if len(p.RuleIDs) != 1 || cap(p.RuleIDs) != 1 {
			t.Fatalf("run decision %d lists %d rule ids with room for %d, want one and no room", i, len(p.RuleIDs), cap(p.RuleIDs))
		}
		want[i] = slices.Clone(p.RuleIDs)
	}
	for i := range refs {
		refs[i].RuleIDs = append(refs[i].RuleIDs, "appended")
	}
	for i, p := range refs {
		if !slices.Equal(p.RuleIDs[:1], want[i]) {
			t.Fatalf("run decision %d lists %v after appends to every list, want %v first", i, p.RuleIDs, want[i])
		}
	}
}
