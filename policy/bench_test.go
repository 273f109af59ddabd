package policy_test

import (
	"encoding/json"
	"testing"

	"github.com/contextos/contextos/internal/logic"
	"github.com/contextos/contextos/policy"
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

// BenchmarkPolicyRawLogic is the floor of BenchmarkPolicyEvaluateCanonical:
// the same expressions (the if of every rule the evaluation applies and
// the when of every approval gate) evaluated by the JsonLogic evaluator
// alone on the same data document, without guardrails, operand checks,
// decisions or their provenance.
func BenchmarkPolicyRawLogic(b *testing.B) {
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
	var progs []*logic.Program
	add := func(raw json.RawMessage) {
		prog, err := logic.Compile(raw)
		if err != nil {
			b.Fatal(err)
		}
		progs = append(progs, prog)
	}
	for _, bu := range p.PolicyLayer.PolicyBundles {
		for _, r := range bu.PolicyDSL.Rules {
			if applied[r.RuleID] {
				add(r.If)
			}
		}
	}
	for _, g := range p.PolicyLayer.ApprovalGates {
		add(g.When)
	}
	data := map[string]any(doc)
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
