package policy_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/deepcheck"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
)

// TestEvaluationCloneSharesNothing: a clone of an evaluation with every
// member filled is equal to it and shares no list or pointer with it, so
// editing one (a gate switched off, a decision's allow flipped) leaves the
// other as it was.
func TestEvaluationCloneSharesNothing(t *testing.T) {
	var e policy.Evaluation
	deepcheck.Fill(reflect.ValueOf(&e).Elem())
	c := e.Clone()
	if !reflect.DeepEqual(c, &e) {
		t.Fatalf("clone\n%+v\nof\n%+v", c, e)
	}
	if p := deepcheck.Shared("Evaluation", reflect.ValueOf(&e).Elem(), reflect.ValueOf(c).Elem()); p != "" {
		t.Errorf("the clone shares %s", p)
	}
	if (*policy.Evaluation)(nil).Clone() != nil {
		t.Error("a nil evaluation's clone is not nil")
	}
}

// TestEvaluationsShareNothingWithTheEngine: an evaluation is the caller's
// own. Editing everything it reaches (a decision's allow flipped, its
// lists rewritten) changes neither the engine's next evaluation of the
// same input nor the pack the engine was prepared from.
func TestEvaluationsShareNothingWithTheEngine(t *testing.T) {
	p, req, rc := load(t)
	packBefore, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	e, err := policy.Prepare(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc)}
	first, err := e.Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	allows := 0
	for _, d := range first.Decisions {
		if d.Allow != nil {
			allows++
		}
	}
	if allows == 0 {
		t.Fatal("no decision of the canonical bundle sets allow: the test would prove nothing")
	}
	want := first.Clone()
	deepcheck.Vandalize(reflect.ValueOf(first))
	second, err := e.Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(second, want) {
		t.Errorf("after the caller edited its evaluation, the engine evaluates\n%+v\nnot\n%+v", second, want)
	}
	packAfter, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(packAfter) != string(packBefore) {
		t.Error("editing an evaluation edited the pack the engine was prepared from")
	}
}

// TestPackEditsAfterPrepareChangeNoVerdict: an engine enforces the pack
// as it was handed to Prepare. A caller that edits that pack afterwards —
// every rule's branches (allow flipped, approval gate dropped, requires
// and raised labels rewritten) and the lists its applies_to match — changes
// no evaluation of the engine.
func TestPackEditsAfterPrepareChangeNoVerdict(t *testing.T) {
	p, req, rc := load(t)
	for _, b := range p.PolicyLayer.PolicyBundles {
		for _, r := range b.PolicyDSL.Rules {
			if r.AppliesTo != nil {
				r.AppliesTo["intent"] = []any{r.AppliesTo["intent"]} // a list, so an edit can reach it
			}
		}
	}
	e, err := policy.Prepare(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc)}
	want, err := e.Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Decisions) == 0 || len(want.ActiveGates()) == 0 {
		t.Fatalf("the canonical bundle decides nothing or holds no gate (%+v): the test would prove nothing", want)
	}
	yes := true
	for _, b := range p.PolicyLayer.PolicyBundles {
		for _, r := range b.PolicyDSL.Rules {
			for _, eff := range []*pack.Effect{r.Then, r.Else} {
				if eff != nil {
					eff.Allow, eff.RequiresApprovalGate, eff.Requires, eff.Raise = &yes, "", nil, nil
				}
			}
			if list, ok := r.AppliesTo["intent"].([]any); ok {
				list[0] = "another.intent"
			}
		}
	}
	got, err := e.Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("editing the pack after Prepare changed the evaluation:\ngot  %+v\nwant %+v", got, want)
	}
}

// TestEvaluationListsAreCapped: an evaluation's lists share their backing
// arrays (the decisions' requires and raise, the manifest's rule ids and
// the gates' activations one array; decisions, manifest and gates one
// block), so each is capped at its own end: a caller's append to one list
// writes over no other part of the result.
func TestEvaluationListsAreCapped(t *testing.T) {
	p, req, rc := load(t)
	allow := true
	b := p.PolicyLayer.PolicyBundles[0]
	b.BundleID, b.Priority = "POLICY_EXTRA", b.Priority+1
	b.PolicyDSL.Rules = []pack.Rule{{RuleID: "R_EXTRA", If: json.RawMessage(`true`),
		Then: &pack.Effect{Allow: &allow, Requires: []string{"a", "b"}, Raise: []string{"c"}, RequiresApprovalGate: "GATE_FINANCE_APPROVAL"}}}
	p.PolicyLayer.PolicyBundles = append(p.PolicyLayer.PolicyBundles, b)
	e, err := policy.Prepare(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Evaluate(policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc)})
	if err != nil {
		t.Fatal(err)
	}
	before, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	_ = append(res.Decisions, policy.Decision{RuleID: "X"})
	_ = append(res.Manifest, policy.ManifestEntry{BundleID: "X"})
	_ = append(res.Gates, policy.Gate{GateID: "X"})
	for _, d := range res.Decisions {
		_ = append(d.Requires, "X")
		_ = append(d.Raise, "X")
	}
	for _, m := range res.Manifest {
		_ = append(m.RuleIDs, "X")
	}
	for _, g := range res.Gates {
		_ = append(g.ActivatedBy, "X")
	}
	if len(res.Decisions) < 3 || len(res.Manifest) < 2 {
		t.Fatalf("want three decisions over two bundles, got %+v", res)
	}
	after, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Errorf("appending to the lists of an evaluation changed it:\n%s\nnot\n%s", after, before)
	}
}

// TestEvaluationBeyondTheStack: more decisions, gates and allows than an
// evaluation keeps on its stack or in its result's block are built the
// same way: every gate activated by the rules that name it, in order.
func TestEvaluationBeyondTheStack(t *testing.T) {
	p, req, rc := load(t)
	allow := true
	var rules []pack.Rule
	for i := range 12 {
		rules = append(rules, pack.Rule{RuleID: fmt.Sprintf("R%02d", i), If: json.RawMessage(`{"==":[{"var":"user.role"},"support_agent"]}`),
			Then: &pack.Effect{Allow: &allow, Requires: []string{"idv"}, RequiresApprovalGate: fmt.Sprintf("G%d", i%10)}})
	}
	p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules = rules
	p.PolicyLayer.ApprovalGates = nil
	for i := range 10 {
		p.PolicyLayer.ApprovalGates = append(p.PolicyLayer.ApprovalGates, pack.ApprovalGate{GateID: fmt.Sprintf("G%d", i), RequiredApproverRole: "lead", TTLSeconds: 60, When: json.RawMessage(`{"==":[{"var":"user.role"},"nobody"]}`)})
	}
	e, err := policy.Prepare(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Evaluate(policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Decisions) != 12 || len(res.Gates) != 10 || len(res.Manifest) != 1 || len(res.Manifest[0].RuleIDs) != 12 {
		t.Fatalf("got %d decisions, %d gates, manifest %+v", len(res.Decisions), len(res.Gates), res.Manifest)
	}
	for i, d := range res.Decisions {
		want, err := canon.IDOf(canon.PrefixPolicy, canon.StringPart(rc.RunID), canon.StringPart(d.BundleID), canon.StringPart(d.RuleID), canon.StringPart(d.DataDigest))
		if err != nil || d.PolicyDecisionID != want || d.RuleID != rules[i].RuleID || d.Allow == nil || !*d.Allow || len(d.Requires) != 1 {
			t.Errorf("decision %d = %+v; want rule %s, id %s", i, d, rules[i].RuleID, want)
		}
	}
	for k, g := range res.Gates {
		want := []string{fmt.Sprintf("R%02d", k)}
		if k < 2 {
			want = append(want, fmt.Sprintf("R%02d", k+10))
		}
		if !g.Active || !reflect.DeepEqual(g.ActivatedBy, want) {
			t.Errorf("gate %s: active %v, activated by %v; want %v", g.GateID, g.Active, g.ActivatedBy, want)
		}
	}
}

// TestSharedBundleIDManifestEntriesOwnTheirLists: two bundles sharing an
// id are listed once each in the manifest, with the same rule ids; a caller
// that edits one entry's list (its elements, or an append within its
// capacity) changes no other entry.
func TestSharedBundleIDManifestEntriesOwnTheirLists(t *testing.T) {
	p, req, rc := load(t)
	p.PolicyLayer.PolicyBundles = append(p.PolicyLayer.PolicyBundles, p.PolicyLayer.PolicyBundles[0])
	e, err := policy.Prepare(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Evaluate(policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Manifest) != 2 || !reflect.DeepEqual(res.Manifest[0], res.Manifest[1]) {
		t.Fatalf("manifest = %+v; want the shared id's entry twice", res.Manifest)
	}
	want := slices.Clone(res.Manifest[1].RuleIDs)
	res.Manifest[0].RuleIDs[0] = "EDITED"
	_ = append(res.Manifest[0].RuleIDs[:1], "EDITED")
	if !reflect.DeepEqual(res.Manifest[1].RuleIDs, want) {
		t.Errorf("editing the first entry's rule ids changed the second's: %v, want %v", res.Manifest[1].RuleIDs, want)
	}
}
