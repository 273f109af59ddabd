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
	// The total saturates at 2^53−1, the largest count a record holds
	// exactly, however it is reached.
	if err := m.ChargeIncurredTokens(math.MaxInt); err == nil || m.Usage().Tokens != 1<<53-1 {
		t.Fatalf("saturation: %v, usage %d", err, m.Usage().Tokens)
	}
	if err := m.ChargeIncurredTokens(1 << 52); err == nil || m.Usage().Tokens != 1<<53-1 {
		t.Fatalf("saturation: %v, usage %d", err, m.Usage().Tokens)
	}
	if err := m.ChargeIncurredTokens(-1); !errors.Is(err, runcontext.ErrInvalid) {
		t.Fatalf("negative: %v", err)
	}
	if !errors.Is(m.Exceeded(), runcontext.ErrBudgetExceeded) {
		t.Fatal("Exceeded does not report the tokens")
	}
}

// A restored usage above 2^53−1 (a checkpoint written before the meter
// saturated there) is restored at 2^53−1, and a charge that would wrap a
// total is refused, not wrapped.
func TestMeterTokenTotalsStayExact(t *testing.T) {
	b := runcontext.RunBudget{TotalTokens: 1000, BucketTokens: map[runcontext.Bucket]int{runcontext.BucketTool: 500}, MaxToolCalls: 1, WallClockMS: 1000, MaxCostCents: 1}
	m := runcontext.RestoreMeter(b, time.Unix(0, 0), runcontext.Usage{Tokens: math.MaxInt})
	if got := m.Usage().Tokens; got != 1<<53-1 {
		t.Errorf("restored %d tokens, want 2^53−1", got)
	}
	m = runcontext.NewMeter(b, time.Unix(0, 0))
	if err := m.ChargeTokens(runcontext.BucketTool, 10); err != nil {
		t.Fatal(err)
	}
	for _, bucket := range []runcontext.Bucket{"", runcontext.BucketTool} {
		var be *runcontext.BudgetError
		if err := m.ChargeTokens(bucket, math.MaxInt); !errors.As(err, &be) {
			t.Errorf("ChargeTokens(%q, MaxInt) = %v, want a BudgetError", bucket, err)
		}
	}
	if got := m.Usage().Tokens; got != 10 {
		t.Errorf("usage %d after refused charges, want 10", got)
	}
}
