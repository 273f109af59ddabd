package policy_test

import (
	"fmt"
	"log"

	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// Prepare once, evaluate per request; deny beats allow, and every outcome
// carries a deterministic policy decision id.
func ExampleEngine_Evaluate() {
	data := fixture.SupportPack()
	p, err := pack.Decode(data)
	if err != nil {
		log.Fatal(err)
	}
	engine, err := policy.Prepare(p, nil)
	if err != nil {
		log.Fatal(err)
	}
	rc := &runcontext.RunContext{RunID: "run_a1b2c3d4e5f60718", TenantID: "tenant_acme_prod", Intent: "support.refund",
		SafetyMode: runcontext.Destructive, User: runcontext.UserClaims{UserID: "usr_771", Role: "support_agent"}}
	in := runcontext.Input{Intent: "support.refund", Message: "Refund order ord_881",
		Context: map[string]any{"identity_verified": false, "refund_amount": 4200}}

	res, err := engine.Evaluate(policy.Input{RunID: rc.RunID, Data: policy.NewDocument(in, rc)})
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range res.Decisions {
		fmt.Printf("%s %s %q\n", d.RuleID, d.Outcome, d.Reason)
	}
	fmt.Println("verdict:", res.Verdict, "gates:", res.ActiveGates())
	// Output:
	// R_REFUND_REQUIRES_IDV deny "Identity not verified; refund path blocked."
	// R_HIGH_VALUE_REQUIRES_APPROVAL allow ""
	// verdict: deny gates: [GATE_FINANCE_APPROVAL]
}
