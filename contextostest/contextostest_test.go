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
