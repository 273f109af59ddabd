package runcontext

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"
)

func testBudget() RunBudget {
	return RunBudget{TotalTokens: 1000, BucketTokens: map[Bucket]int{BucketEvidence: 300}, MaxToolCalls: 3, WallClockMS: 1000, MaxCostCents: 1.0}
}

func TestMeterDimensions(t *testing.T) {
	start := time.Unix(1000, 0)
	m := NewMeter(testBudget(), start)
	tests := []struct {
		name   string
		charge func() error
		dim    string
	}{
		{"bucket", func() error { return m.ChargeTokens(BucketEvidence, 301) }, "tokens.evidence"},
		{"total", func() error { return m.ChargeTokens("", 1001) }, DimTokens},
		{"cost", func() error { return m.ChargeCost(1.01) }, DimCost},
		{"wall clock", func() error { return m.CheckWallClock(start.Add(time.Second)) }, DimWallClock},
	}
	for _, tc := range tests {
		err := tc.charge()
		var be *BudgetError
		if !errors.As(err, &be) || !errors.Is(err, ErrBudgetExceeded) || be.Dimension != tc.dim {
			t.Errorf("%s: err = %v, want BudgetError on %s", tc.name, err, tc.dim)
		}
	}
	// Refused charges applied nothing.
	if u := m.Usage(); u.Tokens != 0 || u.CostCents != 0 || u.ToolCalls != 0 {
		t.Errorf("refused charges were applied: %+v", u)
	}
	for i := 0; i < 3; i++ {
		if err := m.ChargeToolCall(); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.ChargeToolCall(); !errors.Is(err, ErrBudgetExceeded) {
		t.Errorf("4th tool call: %v", err)
	}
	if err := m.ChargeTokens(BucketEvidence, 300); err != nil {
		t.Errorf("charge at the limit: %v", err)
	}
	if err := m.ChargeTokens(BucketPolicy, 700); err != nil { // no bucket limit: total only
		t.Errorf("unlimited bucket: %v", err)
	}
	if err := m.ChargeTokens(BucketPolicy, 1); !errors.Is(err, ErrBudgetExceeded) {
		t.Errorf("total exhausted: %v", err)
	}
	if err := m.ChargeTokens("bogus", 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown bucket: %v", err)
	}
	if err := m.ChargeTokens("", -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative: %v", err)
	}
	if err := m.ChargeCost(-1); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative cost: %v", err)
	}
	fresh := NewMeter(testBudget(), start)
	if err := fresh.CheckWallClock(start.Add(999 * time.Millisecond)); err != nil {
		t.Errorf("within wall clock: %v", err)
	}
	// Wall clock is monotonic: an earlier reading after a spent one stays spent.
	if err := m.CheckWallClock(start.Add(10 * time.Millisecond)); !errors.Is(err, ErrBudgetExceeded) {
		t.Errorf("spent wall clock forgotten: %v", err)
	}
	if got := m.Remaining(start.Add(400 * time.Millisecond)); got != 600*time.Millisecond {
		t.Errorf("Remaining = %v", got)
	}
	if got := m.Remaining(start.Add(time.Hour)); got != 0 {
		t.Errorf("Remaining after = %v", got)
	}
	if calls, cost := m.Left(); calls != 0 || cost != 1.0 {
		t.Errorf("Left = %d, %v", calls, cost)
	}
	u := m.Usage()
	if u.Tokens != 1000 || u.TokensByBucket[BucketEvidence] != 300 || u.ToolCalls != 3 || u.WallClockMS != 1000 {
		t.Errorf("Usage = %+v", u)
	}
}

// Cost sums exactly whatever the order; concurrent charges never overshoot.
func TestMeterConcurrentSafe(t *testing.T) {
	b := testBudget()
	b.MaxToolCalls = 50
	b.MaxCostCents = 0.5
	m := NewMeter(b, time.Unix(0, 0))
	var wg sync.WaitGroup
	var mu sync.Mutex
	okCalls, okCost := 0, 0
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if m.ChargeToolCall() == nil {
				mu.Lock()
				okCalls++
				mu.Unlock()
			}
			if m.ChargeCost(0.01) == nil {
				mu.Lock()
				okCost++
				mu.Unlock()
			}
			_ = m.ChargeTokens(BucketEvidence, 1)
		}()
	}
	wg.Wait()
	u := m.Usage()
	if okCalls != 50 || u.ToolCalls != 50 {
		t.Errorf("tool calls granted %d, recorded %d, want 50", okCalls, u.ToolCalls)
	}
	if okCost != 50 || u.CostCents != 0.5 {
		t.Errorf("cost charges granted %d, total %v, want 50 and 0.5", okCost, u.CostCents)
	}
	if u.TokensByBucket[BucketEvidence] != 200 {
		t.Errorf("tokens = %d", u.TokensByBucket[BucketEvidence])
	}
}

func TestMeterCopiesBudget(t *testing.T) {
	b := testBudget()
	m := NewMeter(b, time.Unix(0, 0))
	b.BucketTokens[BucketEvidence] = 1
	if m.Budget().BucketTokens[BucketEvidence] != 300 {
		t.Error("meter aliases the caller's budget")
	}
}

func TestRestoreMeter(t *testing.T) {
	m := NewMeter(testBudget(), time.Unix(0, 0))
	m.ChargeToolCall()
	m.ChargeCost(0.25)
	m.ChargeTokens(BucketEvidence, 100)
	r := RestoreMeter(testBudget(), time.Unix(0, 0), m.Usage())
	if r.Usage().ToolCalls != 1 || r.Usage().CostCents != 0.25 || r.Usage().TokensByBucket[BucketEvidence] != 100 {
		t.Errorf("restored usage = %+v", r.Usage())
	}
	r.ChargeToolCall()
	r.ChargeToolCall()
	if err := r.ChargeToolCall(); !errors.Is(err, ErrBudgetExceeded) {
		t.Errorf("restored meter forgot earlier calls: %v", err)
	}
}

// A cost charged before it is spent is refused whole when it would go over
// the limit, however large: a huge finite cost never wraps the counter.
func TestMeterChargeCostHuge(t *testing.T) {
	for _, cents := range []float64{1e300, math.MaxFloat64, 9.3e12, 1e13} {
		m := NewMeter(testBudget(), time.Unix(0, 0))
		if err := m.ChargeCost(0.5); err != nil {
			t.Fatal(err)
		}
		var be *BudgetError
		if err := m.ChargeCost(cents); !errors.As(err, &be) || be.Dimension != DimCost {
			t.Errorf("ChargeCost(%g) = %v, want a BudgetError on %s", cents, err, DimCost)
		}
		if u := m.Usage(); u.CostCents != 0.5 {
			t.Errorf("after a refused ChargeCost(%g), usage = %v, want 0.5", cents, u.CostCents)
		}
	}
}

// An incurred cost is always applied (saturating, never wrapping to a
// negative usage) and reports the run over its budget; a cost that is not
// a finite number ≥ 0 is invalid and applies nothing.
func TestMeterChargeIncurredCost(t *testing.T) {
	t.Parallel()
	const saturated = float64(math.MaxInt64) / 1e6
	tests := []struct {
		name     string
		charges  []float64
		wantErr  error // of the last charge
		wantUsed float64
		exceeded bool
	}{
		{"within the budget", []float64{0.25, 0.5}, nil, 0.75, false},
		{"at the limit", []float64{0.5, 0.5}, nil, 1.0, false},
		{"over the limit is applied", []float64{0.5, 0.75}, ErrBudgetExceeded, 1.25, true},
		{"already over", []float64{2, 0.01}, ErrBudgetExceeded, 2.01, true},
		{"1e300 saturates", []float64{0.5, 1e300}, ErrBudgetExceeded, saturated, true},
		{"MaxFloat64 saturates", []float64{math.MaxFloat64}, ErrBudgetExceeded, saturated, true},
		{"saturated stays saturated", []float64{1e300, 1e300, 1}, ErrBudgetExceeded, saturated, true},
		{"NaN", []float64{0.25, math.NaN()}, ErrInvalid, 0.25, false},
		{"-1", []float64{0.25, -1}, ErrInvalid, 0.25, false},
		{"+Inf", []float64{0.25, math.Inf(1)}, ErrInvalid, 0.25, false},
		{"-Inf", []float64{0.25, math.Inf(-1)}, ErrInvalid, 0.25, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := NewMeter(testBudget(), time.Unix(0, 0))
			var err error
			for _, c := range tc.charges {
				err = m.ChargeIncurredCost(c)
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("ChargeIncurredCost(%v) = %v, want %v", tc.charges[len(tc.charges)-1], err, tc.wantErr)
			}
			var be *BudgetError
			if errors.As(err, &be) && be.Dimension != DimCost {
				t.Errorf("BudgetError dimension = %s, want %s", be.Dimension, DimCost)
			}
			if u := m.Usage(); u.CostCents != tc.wantUsed || u.CostCents < 0 {
				t.Errorf("usage = %v cents, want %v", u.CostCents, tc.wantUsed)
			}
			ex := m.Exceeded()
			if got := ex != nil; got != tc.exceeded {
				t.Errorf("Exceeded() = %v, want exceeded %v", ex, tc.exceeded)
			}
			if tc.exceeded && (!errors.As(ex, &be) || !errors.Is(ex, ErrBudgetExceeded) || be.Dimension != DimCost) {
				t.Errorf("Exceeded() = %v, want a BudgetError on %s", ex, DimCost)
			}
			// Nothing more can be charged before it is spent.
			if tc.exceeded {
				if err := m.ChargeCost(0.01); !errors.Is(err, ErrBudgetExceeded) {
					t.Errorf("ChargeCost(0.01) over the budget = %v, want ErrBudgetExceeded", err)
				}
			}
		})
	}
}

// Exceeded names the dimension that has gone over its limit: charges
// refused before they are spent never take a meter over; a usage restored
// under a smaller budget can.
func TestMeterExceeded(t *testing.T) {
	t.Parallel()
	m := NewMeter(testBudget(), time.Unix(0, 0))
	for i := 0; i < 3; i++ {
		m.ChargeToolCall()
	}
	m.ChargeTokens(BucketEvidence, 300)
	m.ChargeTokens("", 700)
	m.ChargeCost(1.0)
	m.CheckWallClock(time.Unix(5, 0))
	if err := m.Exceeded(); err != nil {
		t.Fatalf("a meter at its limits: Exceeded() = %v, want nil", err)
	}
	used := m.Usage()
	tests := []struct {
		name   string
		budget func(*RunBudget)
		dim    string
	}{
		{"tokens", func(b *RunBudget) { b.TotalTokens = 999 }, DimTokens},
		{"bucket", func(b *RunBudget) { b.BucketTokens[BucketEvidence] = 299 }, DimTokens + "." + string(BucketEvidence)},
		{"tool calls", func(b *RunBudget) { b.MaxToolCalls = 2 }, DimToolCalls},
		{"cost", func(b *RunBudget) { b.MaxCostCents = 0.99 }, DimCost},
		{"first in order", func(b *RunBudget) { b.MaxToolCalls, b.MaxCostCents = 2, 0.5 }, DimToolCalls},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := testBudget()
			tc.budget(&b)
			err := RestoreMeter(b, time.Unix(0, 0), used).Exceeded()
			var be *BudgetError
			if !errors.As(err, &be) || !errors.Is(err, ErrBudgetExceeded) || be.Dimension != tc.dim {
				t.Errorf("Exceeded() = %v, want a BudgetError on %s", err, tc.dim)
			}
		})
	}
}

// Exceeded remembers only that no bucket is over (until a bucket is
// charged): asked again, it answers as it did, over or not.
func TestMeterExceededAskedAgain(t *testing.T) {
	t.Parallel()
	b := testBudget()
	b.BucketTokens[BucketEvidence] = 299
	over := RestoreMeter(b, time.Unix(0, 0), Usage{Tokens: 300, TokensByBucket: map[Bucket]int{BucketEvidence: 300}})
	for i := range 3 {
		var be *BudgetError
		if err := over.Exceeded(); !errors.As(err, &be) || be.Dimension != DimTokens+"."+string(BucketEvidence) {
			t.Fatalf("asked %d times: Exceeded() = %v, want the evidence bucket over", i+1, err)
		}
	}
	under := NewMeter(testBudget(), time.Unix(0, 0))
	for i := range 3 {
		if err := under.Exceeded(); err != nil {
			t.Fatalf("asked %d times: Exceeded() = %v, want nil", i+1, err)
		}
		if err := under.ChargeTokens(BucketEvidence, 100); err != nil {
			t.Fatal(err)
		}
	}
	if err := under.ChargeTokens(BucketEvidence, 1); err == nil {
		t.Fatal("a charge past the bucket's limit was taken")
	}
	if err := under.Exceeded(); err != nil {
		t.Fatalf("a meter at its bucket's limit: Exceeded() = %v, want nil", err)
	}
}
