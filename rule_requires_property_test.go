package contextos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// TestPropertyRequiredEvidence: over generated runs (support packs with
// generated policy rules that require generated evidence names, bound to
// the decision, to another decision or to none, on their then or else
// branch; generated evidence of generated kinds and trust; generated plans
// proposing approved, denied or escalated), no stored DECIDED record with
// an outcome that is neither a refusal nor an escalation lacks a name that
// its decision spec or a rule that applied in the run requires. Whether a
// rule applied and whether a name is satisfied are judged here, from the
// generated scenario, not by the runtime's code. Every run also replays
// equal, so a replay reproduces the facts from the packet.
//
// A failing case is reproduced by its subtest name:
//
//	go test -run 'TestPropertyRequiredEvidence/case_0042' .
func TestPropertyRequiredEvidence(t *testing.T) {
	n := 120
	if testing.Short() {
		n = 40
	}
	var approved, blocked int
	t.Run("cases", func(t *testing.T) {
		for i := range n {
			sc := genReqScenario(uint64(i))
			t.Run(fmt.Sprintf("case_%04d", i), func(t *testing.T) {
				a, b := runReqScenario(t, sc)
				approved += a
				blocked += b
			})
		}
	})
	// The property must not hold vacuously: some runs decided approved,
	// and some proposed approved while a rule's name was unsatisfied.
	t.Logf("generated runs: %d DECIDED approved, %d approvals proposed without a rule's required name", approved, blocked)
	if approved == 0 || blocked == 0 {
		t.Errorf("generated runs: %d DECIDED approved, %d approvals proposed without a rule's required name", approved, blocked)
	}
}

const reqSeed = 0x15_e71d_2026

// reqNames are the names generated rules require: capabilities, request
// context, and evidence kinds (faq is in the support evidence).
var reqNames = []string{"order_lookup", "policy_eval", "identity_verified", "refund_policy_doc", "kyc_doc", "faq"}

type reqRule struct {
	id        string
	threshold int
	binding   string
	elseSide  bool // the requires are on the else branch
	requires  []string
	// perCall rules read the tool call (applies_to tool.capability_id
	// issue_refund, condition on tool.args.amount_inr): the gateway
	// evaluates them per call, so they apply only to a refund call.
	perCall bool
}

// applies says whether the rule's branch with the requires is the one its
// condition (refund_amount > threshold) chooses.
func (r reqRule) applies(amount int) bool { return (amount > r.threshold) != r.elseSide }

type reqScenario struct {
	amount   int
	verified bool
	rules    []reqRule
	extra    []compiler.EvidenceItem
	turns    []*contextos.Plan
}

func (sc *reqScenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "amount=%d verified=%v\n", sc.amount, sc.verified)
	for _, r := range sc.rules {
		fmt.Fprintf(&b, "rule %s: threshold %d binding %q else %v per-call %v requires %v\n", r.id, r.threshold, r.binding, r.elseSide, r.perCall, r.requires)
	}
	for _, e := range sc.extra {
		fmt.Fprintf(&b, "evidence %s kind %s trust %s\n", e.EvidenceRef, e.Kind, e.Trust)
	}
	for i, p := range sc.turns {
		var steps []string
		for _, s := range p.Steps {
			steps = append(steps, s.CapabilityID)
		}
		out := "-"
		if p.Decision != nil {
			out = p.Decision.Outcome
		}
		fmt.Fprintf(&b, "turn %d: %v → %s\n", i, steps, out)
	}
	return b.String()
}

func genReqScenario(idx uint64) *reqScenario {
	r := rand.New(rand.NewPCG(reqSeed, idx))
	sc := &reqScenario{amount: pick(r, 500, 1500, 2500), verified: r.IntN(5) > 0}
	for i := range r.IntN(4) {
		rule := reqRule{id: fmt.Sprintf("R_GEN_%d", i), threshold: pick(r, 0, 1000, 2000, 4000),
			binding: pick(r, "support.refund.execute", "support.refund.execute", "", "support.refund.review"), elseSide: r.IntN(4) == 0}
		for range 1 + r.IntN(2) {
			if name := pick(r, reqNames...); !slices.Contains(rule.requires, name) {
				rule.requires = append(rule.requires, name)
			}
		}
		// Two cases in three have their first rule evaluated per call; chosen
		// from the case index so the generator's draws stay as they were.
		rule.perCall = i == 0 && idx%3 != 0
		sc.rules = append(sc.rules, rule)
	}
	for _, kind := range []string{"refund_policy_doc", "kyc_doc"} {
		ref := "doc:" + kind + "#v1"
		switch r.IntN(4) {
		case 0: // absent
		case 1:
			sc.extra = append(sc.extra, docItem(ref, kind, "untrusted"))
		case 2: // a duplicate: the first item of the ref is admitted, with another kind
			sc.extra = append(sc.extra, docItem(ref, "faq_copy", "trusted"), docItem(ref, kind, "trusted"))
		default:
			sc.extra = append(sc.extra, docItem(ref, kind, "trusted"))
		}
	}
	steps := map[string]contextos.Step{
		"lookup": {CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_881"}},
		"eval":   {CapabilityID: "adp_policy.eval", Args: map[string]any{"order_id": "ord_881"}},
		"refund": {CapabilityID: "adp_payments.issue_refund", Args: map[string]any{"order_id": "ord_881", "amount_inr": sc.amount, "currency": "INR"}},
	}
	turns := 1 + r.IntN(3)
	for i := range turns {
		p := &contextos.Plan{Usage: contextos.PlanUsage{Tokens: 300, CostCents: 0.1}}
		for _, name := range []string{"lookup", "eval", "refund"} {
			if r.IntN(2) == 0 {
				p.Steps = append(p.Steps, steps[name])
			}
		}
		outcome := weighted(r, map[string]int{"approved": 6, "denied": 1, "escalated": 1, "": 2})
		if i == turns-1 && outcome == "" {
			outcome = "approved"
		}
		if outcome != "" {
			p.Decision = &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: outcome, Rationale: "generated",
				Confidence: 0.9, SubjectIDs: []string{"customer:cus_77"}, Outputs: map[string]any{"refund_amount_inr": sc.amount, "currency": "INR"}}
		}
		if len(p.Steps) == 0 && p.Decision == nil {
			p.Steps = append(p.Steps, steps["lookup"])
		}
		sc.turns = append(sc.turns, p)
	}
	return sc
}

func (sc *reqScenario) pack(t testing.TB) []byte {
	return supportPackWith(t, func(p map[string]any) {
		specs := p["decision_layer"].(map[string]any)["decision_specs"].([]any)
		other := map[string]any{}
		for k, v := range specs[0].(map[string]any) {
			other[k] = v
		}
		other["decision_key"] = "support.refund.review"
		p["decision_layer"].(map[string]any)["decision_specs"] = append(specs, other)
		for _, r := range sc.rules {
			cond := map[string]any{">": []any{map[string]any{"var": "request.context.refund_amount"}, r.threshold}}
			rule := map[string]any{"rule_id": r.id, "applies_to": map[string]any{"intent": "support.refund"}, "if": cond, "rationale": "generated"}
			if r.perCall {
				rule["applies_to"] = map[string]any{"tool.capability_id": "adp_payments.issue_refund"}
				rule["if"] = map[string]any{">": []any{map[string]any{"var": "tool.args.amount_inr"}, r.threshold}}
			}
			branch := map[string]any{"allow": true, "requires": r.requires}
			if r.elseSide {
				rule["else"] = branch
			} else {
				rule["then"] = branch
			}
			if r.binding != "" {
				rule["decision_binding"] = r.binding
			}
			addRule(p, rule)
		}
	})
}

// required are the names a non-refusal decision of the run needs, judged
// from the scenario: the spec's, R_REFUND_REQUIRES_IDV's when identity is
// verified, and each generated rule's that applied and is bound to the
// decision or to none. A per-call rule applied when the run called the
// refund adapter (refunded); a refund call refused after the gateway
// evaluated policy applied it too, but is not counted here, so this set
// is never larger than the runtime's.
func (sc *reqScenario) required(refunded bool) []string {
	names := []string{"identity_verified", "order_lookup", "policy_eval"}
	if sc.verified {
		names = append(names, "order_lookup")
	}
	for _, r := range sc.rules {
		if r.applies(sc.amount) && (!r.perCall || refunded) && (r.binding == "" || r.binding == "support.refund.execute") {
			names = append(names, r.requires...)
		}
	}
	return names
}

// satisfied judges a name from the scenario and what the run did: a
// capability name by a successful result the record cites, identity by
// the request, a kind by an item of that kind that is the first of its
// ref in the evidence and trusted, and in the compiled manifest (which
// leaves out what the budgets have no room for).
func (sc *reqScenario) satisfied(name string, rec *decision.Record, manifest []string, ev compiler.StaticEvidence) bool {
	cites := func(capability string) bool {
		return slices.ContainsFunc(rec.EvidenceRefs, func(ref string) bool { return strings.HasPrefix(ref, "tool:"+capability+":") })
	}
	switch name {
	case "order_lookup":
		return cites("adp_orders.lookup")
	case "policy_eval":
		return cites("adp_policy.eval")
	case "identity_verified":
		return sc.verified
	}
	for i, it := range ev {
		first := slices.IndexFunc(ev, func(o compiler.EvidenceItem) bool { return o.EvidenceRef == it.EvidenceRef }) == i
		if it.Kind == name && first && it.Trust == compiler.Trusted && slices.Contains(manifest, it.EvidenceRef) {
			return true
		}
	}
	return false
}

func runReqScenario(t *testing.T, sc *reqScenario) (approved, blocked int) {
	planner := contextostest.NewPlanner(sc.turns...).RepeatLast()
	ev := docEvidence(t, sc.extra...)
	h := contextostest.New(t, planner, [][]byte{sc.pack(t)}, &contextostest.Options{
		Runtime: contextos.Options{Evidence: ev, ReplaySampleRate: 1},
		Scopes:  map[string][]string{"adp_payments.issue_refund": {"payments.refund"}},
	})
	scriptDefaults(h, "")
	t.Cleanup(func() { h.ReplayAll() })
	req, rc := refundRequest(t, sc.amount, sc.verified)
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	if err != nil {
		t.Fatalf("Invoke: %v\n%s", err, sc)
	}
	var manifest []string
	for _, e := range res.Compiled.Manifests.EvidenceManifest {
		manifest = append(manifest, e.EvidenceRef)
	}
	recs, err := h.Decisions.List(context.Background(), decision.Filter{RunID: res.RunID})
	if err != nil || len(recs) == 0 {
		t.Fatalf("stored records %v (%v)", recs, err)
	}
	for _, rec := range recs {
		if rec.Status != decision.Decided || rec.Outcome != "approved" {
			continue
		}
		approved++
		for _, name := range sc.required(h.Adapter("adp_payments").CallCount("issue_refund") > 0) {
			if !sc.satisfied(name, rec, manifest, ev) {
				t.Errorf("record %s is DECIDED approved without %q\n%s", rec.RecordID, name, sc)
			}
		}
	}
	// Count the runs where an approval was proposed while a generated
	// rule's name was unsatisfied (judged against the run's results).
	proposed := slices.ContainsFunc(sc.turns, func(p *contextos.Plan) bool { return p.Decision != nil && p.Decision.Outcome == "approved" })
	last := res.Record
	for _, r := range sc.rules {
		if !proposed || !r.applies(sc.amount) || r.perCall && h.Adapter("adp_payments").CallCount("issue_refund") == 0 || (r.binding != "" && r.binding != "support.refund.execute") {
			continue
		}
		if slices.ContainsFunc(r.requires, func(name string) bool { return !sc.satisfied(name, last, manifest, ev) }) {
			blocked++
			break
		}
	}
	return approved, blocked
}
