package gateway_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// A tool whose outcome costs more than the run's budget has still been
// called: its cost is charged, and the meter reports the run over its
// cost budget (the runtime stops the run). The result stands.
func TestIncurredCostOverBudgetIsCharged(t *testing.T) {
	f := newFixture(t)
	budget := f.rc.RunBudget.MaxCostCents
	for _, cost := range []float64{budget + 1, 1e300, math.MaxFloat64} {
		run, meter := meteredRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
			return &gateway.Outcome{Output: map[string]any{"status": "delivered"}, CostCents: cost}, nil
		}), gateway.Capability{ArgsSchema: lookupSchema, CostCents: 0.5}, nil)
		res, err := run.Call(ctx, lookupCall())
		if err != nil || res.Status != gateway.StatusOK {
			t.Fatalf("cost %g: %+v, %v", cost, res, err)
		}
		var be *runcontext.BudgetError
		if err := meter.Exceeded(); !errors.As(err, &be) || be.Dimension != runcontext.DimCost {
			t.Errorf("cost %g: meter.Exceeded() = %v, want a BudgetError on %s", cost, err, runcontext.DimCost)
		}
		if used := meter.Usage().CostCents; used <= budget {
			t.Errorf("cost %g: %v cents charged, want more than the budget %v", cost, used, budget)
		}
	}
}

// A capability's cost model is a finite number of cents ≥ 0.
func TestNewRefusesInvalidCostModel(t *testing.T) {
	for _, cost := range []float64{-1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := gateway.New([]gateway.Registration{{AdapterID: "a", Adapter: noop, Capabilities: map[string]gateway.Capability{"x": {CostCents: cost}}}}, nil)
		if !errors.Is(err, gateway.ErrConfig) {
			t.Errorf("New with cost %g = %v, want ErrConfig", cost, err)
		}
	}
}
