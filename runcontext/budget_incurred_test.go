package runcontext_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/contextos/contextos/runcontext"
)

func TestChargeIncurredTokensAppliesAndSaturates(t *testing.T) {
	m := runcontext.NewMeter(runcontext.RunBudget{TotalTokens: 100, MaxToolCalls: 1, WallClockMS: 1000, MaxCostCents: 1}, time.Unix(0, 0))
	if err := m.ChargeIncurredTokens(60); err != nil {
		t.Fatal(err)
	}
	err := m.ChargeIncurredTokens(60)
	var be *runcontext.BudgetError
	if !errors.As(err, &be) || be.Dimension != runcontext.DimTokens || m.Usage().Tokens != 120 {
		t.Fatalf("over the limit: %v, usage %d", err, m.Usage().Tokens)
	}
	if err := m.ChargeIncurredTokens(math.MaxInt); err == nil || m.Usage().Tokens != math.MaxInt {
		t.Fatalf("saturation: %v, usage %d", err, m.Usage().Tokens)
	}
	if err := m.ChargeIncurredTokens(-1); !errors.Is(err, runcontext.ErrInvalid) {
		t.Fatalf("negative: %v", err)
	}
	if !errors.Is(m.Exceeded(), runcontext.ErrBudgetExceeded) {
		t.Fatal("Exceeded does not report the tokens")
	}
}
