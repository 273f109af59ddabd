package policy_test

import (
	"encoding/json"
	"testing"

	"github.com/contextos/contextos/internal/logic"
	"github.com/contextos/contextos/policy"
	"github.com/diegoholiveira/jsonlogic/v3"
)

func BenchmarkPolicyEvaluateCanonical(b *testing.B) {
	p, req, rc := load(b)
	e, err := policy.Prepare(p, nil)
	if err != nil {
		b.Fatal(err)
	}
	in := policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Evaluate(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPolicyPrepareCanonical(b *testing.B) {
	p, _, _ := load(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := policy.Prepare(p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// canonicalExpressions are the expressions a policy evaluation of the
// canonical bundle evaluates (the if of every rule it applies and the
// when of every approval gate) and its data document.
func canonicalExpressions(b *testing.B) ([]json.RawMessage, map[string]any) {
	p, req, rc := load(b)
	e, err := policy.Prepare(p, nil)
	if err != nil {
		b.Fatal(err)
	}
	doc := policy.NewDocument(req.Input, rc)
	res, err := e.Evaluate(policy.Input{RunID: rc.RunID, Data: doc})
	if err != nil {
		b.Fatal(err)
	}
	applied := map[string]bool{}
	for _, d := range res.Decisions {
		applied[d.RuleID] = true
	}
	var exprs []json.RawMessage
	for _, bu := range p.PolicyLayer.PolicyBundles {
		for _, r := range bu.PolicyDSL.Rules {
			if applied[r.RuleID] {
				exprs = append(exprs, r.If)
			}
		}
	}
	for _, g := range p.PolicyLayer.ApprovalGates {
		exprs = append(exprs, g.When)
	}
	return exprs, map[string]any(doc)
}

// BenchmarkPolicyRawLogic is a floor of BenchmarkPolicyEvaluateCanonical:
// the same expressions evaluated by the module's JsonLogic evaluator
// (internal/logic) alone on the same data document, without guardrails,
// operand checks, decisions or their provenance.
func BenchmarkPolicyRawLogic(b *testing.B) {
	exprs, data := canonicalExpressions(b)
	var progs []*logic.Program
	for _, raw := range exprs {
		prog, err := logic.Compile(raw)
		if err != nil {
			b.Fatal(err)
		}
		progs = append(progs, prog)
	}
	b.ReportMetric(float64(len(progs)), "expressions")
	b.ReportAllocs()
	for b.Loop() {
		for _, prog := range progs {
			if _, err := prog.Eval(data, logic.Limits{}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkPolicyJsonLogicLibrary is the other floor: the same
// expressions evaluated by a widely used Go JsonLogic library,
// github.com/diegoholiveira/jsonlogic/v3 (rules decoded once, the same
// data document), each result checked against internal/logic's first.
func BenchmarkPolicyJsonLogicLibrary(b *testing.B) {
	exprs, data := canonicalExpressions(b)
	rules := make([]any, len(exprs))
	for i, raw := range exprs {
		if err := json.Unmarshal(raw, &rules[i]); err != nil {
			b.Fatal(err)
		}
		prog, err := logic.Compile(raw)
		if err != nil {
			b.Fatal(err)
		}
		want, err := prog.Eval(data, logic.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		//lint:ignore SA1019 the library's one entry that takes decoded rules: Apply decodes them at every call, which would flatter the comparison
		got, err := jsonlogic.ApplyInterface(rules[i], data)
		if err != nil {
			b.Fatal(err)
		}
		if logic.Truthy(got) != logic.Truthy(want) {
			b.Fatalf("%s: the library answers %v, internal/logic %v", raw, got, want)
		}
	}
	b.ReportMetric(float64(len(rules)), "expressions")
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range rules {
			//lint:ignore SA1019 as above
			if _, err := jsonlogic.ApplyInterface(r, data); err != nil {
				b.Fatal(err)
			}
		}
	}
}
