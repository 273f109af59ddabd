package contextostest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/runcontext"
)

// recT records what the assertions report.
type recT struct{ errs []string }

func (r *recT) Helper()                        {}
func (r *recT) Errorf(format string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(format, a...)) }
func (r *recT) Fatalf(format string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(format, a...)) }

func TestPlannerTurns(t *testing.T) {
	ctx := context.Background()
	p := contextostest.NewPlanner(&contextos.Plan{Decision: &contextos.DecisionProposal{Outcome: "a"}})
	got, err := p.Plan(ctx, &contextos.PlanRequest{Turn: 0})
	if err != nil || got.Decision.Outcome != "a" {
		t.Fatalf("turn 0 = %+v, %v", got, err)
	}
	got.Decision.Outcome = "mutated"
	if again, _ := p.Plan(ctx, &contextos.PlanRequest{Turn: 0}); again.Decision.Outcome != "a" {
		t.Error("the runtime can mutate the script")
	}
	if _, err := p.Plan(ctx, &contextos.PlanRequest{Turn: 1}); err == nil || !strings.Contains(err.Error(), "no turn 2") {
		t.Errorf("unscripted turn = %v", err)
	}
	p.RepeatLast()
	if got, err := p.Plan(ctx, &contextos.PlanRequest{Turn: 5}); err != nil || got.Decision.Outcome != "a" {
		t.Errorf("repeated turn = %+v, %v", got, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Plan(cctx, &contextos.PlanRequest{}); err == nil {
		t.Error("a cancelled planner answered")
	}
	if n := len(p.Requests()); n != 4 {
		t.Errorf("requests = %d", n)
	}
}

// A scripted turn answers as a model's decoded JSON would (Go ints become
// float64), a fresh copy each time: neither the runtime's changes to one
// answer (nested arguments included) nor the caller's to its plan after
// Then reach another answer.
func TestPlannerTurnsAreDecodedCopies(t *testing.T) {
	ctx := context.Background()
	plan := &contextos.Plan{Steps: []contextos.Step{{CapabilityID: "adp_orders.lookup",
		Args: map[string]any{"order_id": "ord_881", "amount": 1200, "lines": []any{map[string]any{"sku": "a"}}}, EvidenceRefs: []string{"kg:order:ord_881"}}}}
	p := contextostest.NewPlanner(plan).RepeatLast()
	plan.Steps[0].Args["order_id"] = "changed by the caller"
	first, err := p.Plan(ctx, &contextos.PlanRequest{Turn: 0})
	if err != nil {
		t.Fatal(err)
	}
	args := first.Steps[0].Args
	if args["order_id"] != "ord_881" || args["amount"] != float64(1200) {
		t.Fatalf("the answer's args = %#v, want the plan as decoded when Then was called", args)
	}
	args["amount"] = 99.0
	args["lines"].([]any)[0].(map[string]any)["sku"] = "b"
	first.Steps[0].EvidenceRefs[0] = "changed"
	second, err := p.Plan(ctx, &contextos.PlanRequest{Turn: 1})
	if err != nil {
		t.Fatal(err)
	}
	if a := second.Steps[0].Args; a["amount"] != float64(1200) || a["lines"].([]any)[0].(map[string]any)["sku"] != "a" || second.Steps[0].EvidenceRefs[0] != "kg:order:ord_881" {
		t.Errorf("a change to one answer reached the next: %#v %v", a, second.Steps[0].EvidenceRefs)
	}
	bad := contextostest.NewPlanner(&contextos.Plan{Steps: []contextos.Step{{Args: map[string]any{"f": func() {}}}}})
	if _, err := bad.Plan(ctx, &contextos.PlanRequest{}); err == nil || !strings.Contains(err.Error(), "scripted plan") {
		t.Errorf("a plan with no JSON form = %v", err)
	}
}

func TestAssertionsFail(t *testing.T) {
	h := contextostest.New(t, contextostest.NewPlanner(), [][]byte{fixture.SupportPack()}, &contextostest.Options{
		Runtime: contextos.Options{Evidence: evidence()}})
	req, _ := runcontext.DecodeInvokeRequest(fixture.Invoke())
	rc, _ := runcontext.DecodeRunContext(fixture.RunContext())
	res := h.Invoke(req, rc) // the planner has no turn: a hard stop
	var r recT
	contextostest.AssertStatus(&r, res, decision.Decided)
	contextostest.AssertOutcome(&r, res, "approved")
	contextostest.AssertPending(&r, res, "GATE_FINANCE_APPROVAL")
	contextostest.AssertCalls(&r, h.Adapter("adp_orders"), "lookup", 1)
	h2 := contextostest.New(&r, contextostest.NewPlanner(), [][]byte{fixture.SupportPack()}, nil)
	h2.Adapter("adp_nope")
	h2.Approve(res, contextostest.Approver{UserID: "x", Role: "y"})
	if len(r.errs) != 6 {
		t.Errorf("assertions reported %d failures, want 6: %q", len(r.errs), r.errs)
	}
	contextostest.AssertStatus(t, res, decision.Escalated)
}
