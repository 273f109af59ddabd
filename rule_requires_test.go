package contextos_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// Tests of docs/evidence.md: a policy rule's requires entries are enforced
// when the rule applied in the run, and admitted evidence satisfies a name
// by its kind in a real run (and in its replay).

// docKind is an evidence name nothing in the support pack designates: only
// admitted evidence of that kind satisfies it.
const docKind = "refund_policy_doc"

// supportPackWith is the support pack with mutate applied to its decoded
// JSON.
func supportPackWith(t testing.TB, mutate func(p map[string]any)) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(readTestdata(t, "ctxpack.support-1.0.0.json"), &p); err != nil {
		t.Fatal(err)
	}
	mutate(p)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// supportRules are the rules of the support pack's only policy bundle.
func supportRules(p map[string]any) []any {
	b := p["policy_layer"].(map[string]any)["policy_bundles"].([]any)[0].(map[string]any)
	return b["policy_dsl"].(map[string]any)["rules"].([]any)
}

// addRule appends a rule to the support pack's policy bundle.
func addRule(p map[string]any, rule map[string]any) {
	b := p["policy_layer"].(map[string]any)["policy_bundles"].([]any)[0].(map[string]any)
	dsl := b["policy_dsl"].(map[string]any)
	dsl["rules"] = append(dsl["rules"].([]any), rule)
}

// docRule is a rule that requires docKind when the refund amount is above
// threshold.
func docRule(id string, threshold int, binding string) map[string]any {
	r := map[string]any{
		"rule_id":    id,
		"applies_to": map[string]any{"intent": "support.refund"},
		"if":         map[string]any{">": []any{map[string]any{"var": "request.context.refund_amount"}, threshold}},
		"then":       map[string]any{"allow": true, "requires": []any{docKind}},
		"rationale":  "Refunds above the threshold need the written refund policy on file.",
	}
	if binding != "" {
		r["decision_binding"] = binding
	}
	return r
}

// docEvidence is the support evidence plus items; an item with docKind
// satisfies the doc rule when it is admitted.
func docEvidence(t testing.TB, items ...compiler.EvidenceItem) compiler.StaticEvidence {
	return append(slices.Clone(evidence(t)), items...)
}

func docItem(ref, kind, trust string) compiler.EvidenceItem {
	return compiler.EvidenceItem{EvidenceRef: ref, Kind: kind, Content: "Refund policy v7: refunds of delivered orders within 30 days.", SourceID: "docs", Hash: "sha256:7a11ce", Trust: trust, Snapshot: "docs_v7"}
}

// approvePlanner looks the order up, evaluates policy and issues the
// refund, proposing approved, then proposes approved again on every replan.
func approvePlanner(amount int) *contextostest.Planner {
	return contextostest.NewPlanner(lookupPlan(), refundPlan(amount)).Then(approveOnly()).RepeatLast()
}

func approveOnly() *contextos.Plan {
	p := refundPlan(0)
	p.Steps = nil
	return p
}

func TestRuleRequiresEnforced(t *testing.T) {
	const amount = 1500 // below the finance gate
	unbound := func(p map[string]any) { addRule(p, docRule("R_DOCS_UNBOUND", 1000, "")) }
	bound := func(p map[string]any) { addRule(p, docRule("R_DOCS", 1000, "support.refund.execute")) }
	idvRequiresDoc := func(p map[string]any) {
		then := supportRules(p)[0].(map[string]any)["then"].(map[string]any)
		then["requires"] = append(then["requires"].([]any), docKind)
	}
	cases := []struct {
		name     string
		mutate   func(p map[string]any)
		evidence compiler.StaticEvidence
		want     decision.Status
		outcome  string
		// reason is a substring of the critic's replan reason, when the
		// decision is sent back.
		reason string
	}{
		{name: "seed rule requires a name nothing satisfies", mutate: idvRequiresDoc, evidence: evidence(t),
			want: decision.Escalated, reason: "missing_evidence: " + docKind + " is required by policy rule POLICY_RETURNS_V4#R_REFUND_REQUIRES_IDV before support.refund.execute"},
		{name: "bound rule, no evidence of the kind", mutate: bound, evidence: evidence(t),
			want: decision.Escalated, reason: "required by policy rule POLICY_RETURNS_V4#R_DOCS"},
		{name: "unbound rule applies to every decision", mutate: unbound, evidence: evidence(t),
			want: decision.Escalated, reason: "required by policy rule POLICY_RETURNS_V4#R_DOCS_UNBOUND"},
		{name: "rule whose condition does not hold does not apply", mutate: func(p map[string]any) { addRule(p, docRule("R_DOCS", 5000, "support.refund.execute")) },
			evidence: evidence(t), want: decision.Decided, outcome: "approved"},
		{name: "rule bound to another decision does not apply", mutate: func(p map[string]any) {
			addRule(p, docRule("R_DOCS", 1000, "support.refund.review"))
			specs := p["decision_layer"].(map[string]any)["decision_specs"].([]any)
			other := map[string]any{}
			for k, v := range specs[0].(map[string]any) {
				other[k] = v
			}
			other["decision_key"] = "support.refund.review"
			p["decision_layer"].(map[string]any)["decision_specs"] = append(specs, other)
		}, evidence: evidence(t), want: decision.Decided, outcome: "approved"},
		{name: "satisfied by admitted evidence of the kind", mutate: idvRequiresDoc,
			evidence: docEvidence(t, docItem("doc:refund-policy#v7", docKind, "trusted")), want: decision.Decided, outcome: "approved"},
		{name: "unbound rule satisfied by admitted evidence of the kind", mutate: unbound,
			evidence: docEvidence(t, docItem("doc:refund-policy#v7", docKind, "trusted")), want: decision.Decided, outcome: "approved"},
		{name: "untrusted evidence of the kind is not admitted", mutate: bound,
			evidence: docEvidence(t, docItem("doc:refund-policy#v7", docKind, "untrusted")), want: decision.Escalated, reason: "R_DOCS"},
		{name: "a duplicate ref's kind is not the admitted item's", mutate: bound,
			evidence: docEvidence(t, docItem("doc:refund-policy#v7", "faq", "trusted"), docItem("doc:refund-policy#v7", docKind, "trusted")),
			want:     decision.Escalated, reason: "R_DOCS"},
		{name: "expired evidence of the kind is not admitted", mutate: bound,
			evidence: docEvidence(t, func() compiler.EvidenceItem {
				it := docItem("doc:refund-policy#v7", docKind, "trusted")
				it.ExpiresAt = "2026-01-01T00:00:00Z"
				return it
			}()), want: decision.Escalated, reason: "R_DOCS"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			planner := approvePlanner(amount)
			h := contextostest.New(t, planner, [][]byte{supportPackWith(t, tc.mutate)}, &contextostest.Options{
				Runtime: contextos.Options{Evidence: tc.evidence, ReplaySampleRate: 1},
				Scopes:  map[string][]string{"adp_payments.issue_refund": {"payments.refund"}},
			})
			scriptDefaults(h, "")
			t.Cleanup(func() {
				if n := h.ReplayAll(); n == 0 {
					t.Error("no packet was captured")
				}
			})
			req, rc := refundRequest(t, amount, true)
			res := h.Invoke(req, rc)
			contextostest.AssertStatus(t, res, tc.want)
			if tc.outcome != "" {
				contextostest.AssertOutcome(t, res, tc.outcome)
			}
			var reasons []string
			for _, r := range planner.Requests() {
				if r.ReplanReason != "" {
					reasons = append(reasons, r.ReplanReason)
				}
			}
			if tc.reason != "" && !slices.ContainsFunc(reasons, func(s string) bool { return strings.Contains(s, tc.reason) }) {
				t.Errorf("no replan reason contains %q; reasons: %q", tc.reason, reasons)
			}
			if tc.reason == "" && slices.ContainsFunc(reasons, func(s string) bool { return strings.Contains(s, "missing_evidence") }) {
				t.Errorf("the decision was sent back for missing evidence: %q", reasons)
			}
		})
	}
}

// TestAdmittedEvidenceKinds: the run's facts map each admitted ref to the
// kind of the item the evidence source returned, so a decision spec's
// required_evidence is satisfied by admitted evidence of that kind too.
func TestAdmittedEvidenceKinds(t *testing.T) {
	const amount = 1500
	mutate := func(p map[string]any) {
		spec := p["decision_layer"].(map[string]any)["decision_specs"].([]any)[0].(map[string]any)
		spec["required_evidence"] = append(spec["required_evidence"].([]any), "customer_record", docKind)
	}
	for _, tc := range []struct {
		name     string
		evidence compiler.StaticEvidence
		want     decision.Status
	}{
		{"both kinds admitted", docEvidence(t, docItem("doc:refund-policy#v7", docKind, "trusted")), decision.Decided},
		{"one kind missing", evidence(t), decision.Escalated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			planner := approvePlanner(amount)
			h := contextostest.New(t, planner, [][]byte{supportPackWith(t, mutate)}, &contextostest.Options{
				Runtime: contextos.Options{Evidence: tc.evidence, ReplaySampleRate: 1},
				Scopes:  map[string][]string{"adp_payments.issue_refund": {"payments.refund"}},
			})
			scriptDefaults(h, "")
			t.Cleanup(func() { h.ReplayAll() })
			req, rc := refundRequest(t, amount, true)
			res := h.Invoke(req, rc)
			contextostest.AssertStatus(t, res, tc.want)
		})
	}
}
