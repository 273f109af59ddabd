package compiler_test

import (
	"reflect"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/compilehook"
	"github.com/contextos/contextos/policy"
)

// compilehook.CompileWithPolicy compiles what Compile compiles and returns the
// compile's policy evaluation, which is a fresh evaluation's and shares no
// slice with the compiled context: what is done to the ledger's policy
// results, gates and guardrails leaves it as it was.
func TestCompileWithPolicyReturnsTheEvaluationApart(t *testing.T) {
	s := canonicalScenario(t)
	prepared, err := compiler.Prepare(s.inputs(), &s.opts)
	if err != nil {
		t.Fatal(err)
	}
	want := s.compile(t)
	c, eval, err := compilehook.CompileWithPolicy(prepared, ctx, s.req, s.rc)
	if err != nil {
		t.Fatal(err)
	}
	cc := c.(*compiler.CompiledContext)
	if !reflect.DeepEqual(cc, want) {
		t.Fatal("CompileWithPolicy compiled another context than Compile")
	}
	fresh := func() *policy.Evaluation {
		e, err := prepared.Engine().Evaluate(policy.Input{RunID: s.rc.RunID, Data: policy.NewDocument(s.req.Input, s.rc)})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if !reflect.DeepEqual(eval, fresh()) {
		t.Fatalf("the compile's evaluation\n%+v\nis not a fresh one\n%+v", eval, fresh())
	}
	l := &cc.ContextLedger
	if len(l.PolicyResults) == 0 || len(l.ApprovalGates) == 0 || len(cc.Manifests.PolicyManifest) == 0 {
		t.Fatal("the scenario has no decisions, gates or manifest to change")
	}
	changed := 0
	for i := range l.PolicyResults {
		d := &l.PolicyResults[i]
		d.PolicyDecisionID, d.Outcome = "pol_changed", policy.Deny
		for j := range d.Requires {
			d.Requires[j], changed = "changed", changed+1
		}
		for j := range d.Raise {
			d.Raise[j], changed = "changed", changed+1
		}
	}
	for i := range l.ApprovalGates {
		g := &l.ApprovalGates[i]
		g.Active = !g.Active
		for j := range g.ActivatedBy {
			g.ActivatedBy[j], changed = "changed", changed+1
		}
	}
	for i := range l.GuardrailsRaised.MustRefuse {
		l.GuardrailsRaised.MustRefuse[i] = "changed"
	}
	for i := range l.GuardrailsRaised.MustEscalate {
		l.GuardrailsRaised.MustEscalate[i] = "changed"
	}
	if changed == 0 {
		t.Fatal("the scenario's decisions and gates have no lists to change")
	}
	if !reflect.DeepEqual(eval, fresh()) {
		t.Fatalf("changing the compiled context changed the evaluation:\n%+v", eval)
	}
}
