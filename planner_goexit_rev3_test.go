package contextos_test

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"

	"github.com/contextos/contextos"
)

// TestPlannerThatEndsItsGoroutine: a planner that ends its goroutine
// (runtime.Goexit, as a test planner's t.Fatal does) on its first turn
// answers nothing; the run goes on to its next turn and ends, rather than
// waiting for ever to hand that turn to the goroutine the planner ended.
func TestPlannerThatEndsItsGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		p := contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
			calls++
			if calls == 1 {
				runtime.Goexit()
			}
			return refundPlan(1200), nil
		})
		h := harness(t, p, nil)
		req, rc := refundRequest(t, 1200, true)
		res := h.Invoke(req, rc)
		if res == nil || res.Record == nil {
			t.Fatalf("no record: %+v", res)
		}
		if calls < 2 {
			t.Fatalf("the planner was asked %d times; the run never handed off a second turn, so this test shows nothing", calls)
		}
		t.Logf("status %s after %d planner turns", res.Record.Status, calls)
	})
}
