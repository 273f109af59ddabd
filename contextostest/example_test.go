package contextostest_test

import (
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/runcontext"
)

// A host unit-tests its refund agent: script the planner and the tools,
// invoke, approve, assert. In a test, pass t instead of printT.
func Example() {
	t := printT{}
	planner := contextostest.NewPlanner(
		&contextos.Plan{Steps: []contextos.Step{
			{CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_881"}},
			{CapabilityID: "adp_policy.eval", Args: map[string]any{"order_id": "ord_881"}},
		}},
		&contextos.Plan{
			Steps: []contextos.Step{{CapabilityID: "adp_payments.issue_refund", Args: map[string]any{"order_id": "ord_881", "amount_inr": 4200, "currency": "INR"}}},
			Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "approved", Confidence: 0.9,
				SubjectIDs: []string{"order:ord_881"}, EvidenceRefs: []string{"kg:order:ord_881#snapshot_kg_2026_05_03_T0930"}},
		})
	h := contextostest.New(t, planner, [][]byte{fixture.SupportPack()}, &contextostest.Options{
		Runtime: contextos.Options{Evidence: evidence(), ReplaySampleRate: 1},
		Scopes:  map[string][]string{"adp_payments.issue_refund": {"payments.refund"}},
	})
	h.Adapter("adp_orders").On("lookup").ReturnOutput(map[string]any{"status": "delivered"})
	h.Adapter("adp_policy").On("eval").ReturnOutput(map[string]any{"eligible": true})
	// A completed write names its side effects (mutations).
	h.Adapter("adp_payments").On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_1"}, "refund:txn_1")

	req, err := runcontext.DecodeInvokeRequest(fixture.Invoke())
	if err != nil {
		log.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(fixture.RunContext())
	if err != nil {
		log.Fatal(err)
	}
	res := h.Invoke(req, rc)
	contextostest.AssertPending(t, res, "GATE_FINANCE_APPROVAL")
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)

	done := h.Approve(res, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
	contextostest.AssertStatus(t, done, decision.Decided)
	contextostest.AssertOutcome(t, done, "approved")
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	contextostest.AssertReplayEqual(t, h.Replay(done))
	fmt.Println(res.Status, "→", done.Status, done.Record.Outcome)
	// Output: DEFERRED → DECIDED approved
}

// printT prints what a test would report.
type printT struct{}

func (printT) Helper()                        {}
func (printT) Errorf(format string, a ...any) { fmt.Printf("FAIL: "+format+"\n", a...) }
func (printT) Fatalf(format string, a ...any) { fmt.Printf("FATAL: "+format+"\n", a...); os.Exit(1) }

func evidence() compiler.StaticEvidence {
	var ev compiler.StaticEvidence
	if err := json.Unmarshal(fixture.Evidence(), &ev); err != nil {
		panic(err)
	}
	return ev
}
