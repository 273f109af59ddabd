package runcontext

import (
	"fmt"
	"maps"
	"math"
	"sync"
	"time"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/problem"
)

// Budget dimensions named by BudgetError.Dimension. Token buckets are
// "tokens.<bucket>".
const (
	DimTokens    = "tokens"
	DimToolCalls = "tool_calls"
	DimCost      = "cost_cents"
	DimWallClock = "wall_clock_ms"
)

// BudgetError reports a charge refused because it would exceed a budget
// dimension, an incurred cost that took the run over its cost budget
// (Meter.ChargeIncurredCost), or a dimension already over its limit
// (Meter.Exceeded). It matches ErrBudgetExceeded.
type BudgetError struct {
	Dimension string  // "tokens", "tokens.evidence", "tool_calls", "cost_cents", "wall_clock_ms"
	Limit     float64 // the dimension's limit
	Used      float64 // used before the charge (Exceeded: used now)
	Requested float64 // the charge (elapsed time for wall clock; 0 from Exceeded)
}

func (e *BudgetError) Error() string {
	if e.Dimension == DimWallClock {
		return fmt.Sprintf("runcontext: run budget exceeded: %s: elapsed %g ms ≥ limit %g ms", e.Dimension, e.Used, e.Limit)
	}
	if e.Requested == 0 {
		return fmt.Sprintf("runcontext: run budget exceeded: %s: used %g > limit %g", e.Dimension, e.Used, e.Limit)
	}
	return fmt.Sprintf("runcontext: run budget exceeded: %s: used %g + requested %g > limit %g", e.Dimension, e.Used, e.Requested, e.Limit)
}

// Is matches ErrBudgetExceeded.
func (e *BudgetError) Is(target error) bool { return target == ErrBudgetExceeded }

// Usage is what a meter has charged so far.
type Usage struct {
	Tokens         int            `json:"tokens"`
	TokensByBucket map[Bucket]int `json:"tokens_by_bucket,omitempty"`
	ToolCalls      int            `json:"tool_calls"`
	CostCents      float64        `json:"cost_cents"`
	WallClockMS    int64          `json:"wall_clock_ms"`
}

// microCents is the unit cost is kept in, so sums are exact and independent
// of charge order.
const microCents = 1e6

// toMicro converts cents to micro-cents, saturating at the int64 range
// instead of overflowing (a 1e300-cent cost is the largest cost the meter
// can hold, never a negative one). NaN, which callers refuse before
// converting, saturates high: a restored usage that is not a number fails
// closed.
func toMicro(cents float64) int64 {
	mc := math.Round(cents * microCents)
	switch {
	case math.IsNaN(mc) || mc >= math.MaxInt64:
		return math.MaxInt64
	case mc <= math.MinInt64:
		return math.MinInt64
	}
	return int64(mc)
}

// addMicro adds two non-negative micro-cent amounts, saturating at
// math.MaxInt64.
func addMicro(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Meter charges a run's consumption against its RunBudget. It is safe for
// concurrent use. A charge that would exceed any dimension is refused whole
// (nothing is applied) with a *BudgetError, except an incurred cost
// (ChargeIncurredCost), which is always applied: Exceeded then reports the
// run over its budget.
type Meter struct {
	mu      sync.Mutex
	budget  RunBudget
	start   time.Time
	tokens  int
	buckets map[Bucket]int
	// bucketsUnder records that Exceeded found no bucket over its limit
	// since the buckets last changed (the limits never do): a meter's
	// buckets change only when tokens are charged to one, while Exceeded
	// is asked before every call.
	bucketsUnder bool
	calls        int
	cost         int64 // micro-cents
	elapsed      int64 // last observed wall clock, ms
}

// NewMeter returns a meter for b whose wall clock starts at start (from the
// runtime's injected clock).
func NewMeter(b RunBudget, start time.Time) *Meter {
	b.BucketTokens = maps.Clone(b.BucketTokens)
	return &Meter{budget: b, start: start, buckets: map[Bucket]int{}}
}

// RestoreMeter returns a meter for b that starts at start and has already
// charged u (a resumed run's usage from its checkpoint).
func RestoreMeter(b RunBudget, start time.Time, u Usage) *Meter {
	m := NewMeter(b, start)
	// A usage saved above 2^53−1 is held at it, as charges are.
	m.tokens, m.calls, m.elapsed = min(u.Tokens, canon.MaxSafeInteger), u.ToolCalls, u.WallClockMS
	m.cost = max(toMicro(u.CostCents), 0)
	for k, v := range u.TokensByBucket {
		m.buckets[k] = v
	}
	return m
}

// Budget returns the budget the meter charges against.
func (m *Meter) Budget() RunBudget {
	b := m.budget
	b.BucketTokens = maps.Clone(b.BucketTokens)
	return b
}

// ChargeTokens charges n tokens to bucket and to the total. bucket "" charges
// the total only (planner usage, say); a bucket without an allocation in
// the budget is limited by the total only. n must be ≥ 0.
func (m *Meter) ChargeTokens(bucket Bucket, n int) error {
	if n < 0 {
		return fmt.Errorf("%w: negative token charge %d", ErrInvalid, n)
	}
	if bucket != "" && !bucket.Valid() {
		return fmt.Errorf("%w: unknown token bucket %q", ErrInvalid, problem.Clip(string(bucket)))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Compared without adding, so a huge n cannot wrap to a small total.
	if n > m.budget.TotalTokens-m.tokens {
		return &BudgetError{Dimension: DimTokens, Limit: float64(m.budget.TotalTokens), Used: float64(m.tokens), Requested: float64(n)}
	}
	if bucket != "" {
		if limit, ok := m.budget.BucketTokens[bucket]; ok && n > limit-m.buckets[bucket] {
			return &BudgetError{Dimension: DimTokens + "." + string(bucket), Limit: float64(limit), Used: float64(m.buckets[bucket]), Requested: float64(n)}
		}
		m.buckets[bucket] += n
		m.bucketsUnder = false
	}
	m.tokens += n
	return nil
}

// ChargeIncurredTokens charges n tokens (≥ 0) to the total that were
// already used (a planner turn that happened, a delegated agent's run,
// a tool attempt that reported them): they are applied whatever
// the budget says, the total saturating at 2^53−1 (the largest count a
// record holds exactly) instead of growing past it or overflowing, and a
// *BudgetError (DimTokens) says when the total is now over the limit.
func (m *Meter) ChargeIncurredTokens(n int) error {
	if n < 0 {
		return fmt.Errorf("%w: negative token charge %d", ErrInvalid, n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	used := m.tokens
	if n > canon.MaxSafeInteger-m.tokens {
		m.tokens = canon.MaxSafeInteger
	} else {
		m.tokens += n
	}
	if m.tokens > m.budget.TotalTokens {
		return &BudgetError{Dimension: DimTokens, Limit: float64(m.budget.TotalTokens), Used: float64(used), Requested: float64(n)}
	}
	return nil
}

// ChargeToolCall charges one tool call.
func (m *Meter) ChargeToolCall() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls+1 > m.budget.MaxToolCalls {
		return &BudgetError{Dimension: DimToolCalls, Limit: float64(m.budget.MaxToolCalls), Used: float64(m.calls), Requested: 1}
	}
	m.calls++
	return nil
}

// ChargeCost charges cents (finite, ≥ 0) before they are spent: a charge
// that would take the cost over its limit is refused whole with a
// *BudgetError, however large it is.
func (m *Meter) ChargeCost(cents float64) error {
	if err := checkCost(cents); err != nil {
		return err
	}
	mc, limit := toMicro(cents), toMicro(m.budget.MaxCostCents)
	m.mu.Lock()
	defer m.mu.Unlock()
	if mc > limit || m.cost > limit-mc {
		return &BudgetError{Dimension: DimCost, Limit: m.budget.MaxCostCents, Used: float64(m.cost) / microCents, Requested: cents}
	}
	m.cost += mc
	return nil
}

// ChargeIncurredCost charges cents (finite, ≥ 0) that were already spent:
// a tool's side effect happened, so its cost is applied whatever the
// budget says, the total saturating at the largest cost the meter holds
// instead of overflowing. It returns a *BudgetError (DimCost) when the
// total is now over the limit; the run must then stop (see Exceeded). A
// cost that is negative, NaN or infinite is ErrInvalid and applies
// nothing.
func (m *Meter) ChargeIncurredCost(cents float64) error {
	if err := checkCost(cents); err != nil {
		return err
	}
	mc, limit := toMicro(cents), toMicro(m.budget.MaxCostCents)
	m.mu.Lock()
	defer m.mu.Unlock()
	used := m.cost
	m.cost = addMicro(m.cost, mc)
	if m.cost > limit {
		return &BudgetError{Dimension: DimCost, Limit: m.budget.MaxCostCents, Used: float64(used) / microCents, Requested: cents}
	}
	return nil
}

func checkCost(cents float64) error {
	if cents < 0 || math.IsNaN(cents) || math.IsInf(cents, 0) {
		return fmt.Errorf("%w: cost charge must be a finite number ≥ 0", ErrInvalid)
	}
	return nil
}

// Exceeded returns a *BudgetError naming the first dimension that has gone
// over its limit, checked in the order tokens, token buckets (by name),
// tool calls, cost; else nil. Charges made through ChargeTokens,
// ChargeToolCall and ChargeCost never go over; an incurred cost or a
// usage restored under a smaller budget can. The wall clock is
// CheckWallClock's.
func (m *Meter) Exceeded() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tokens > m.budget.TotalTokens {
		return &BudgetError{Dimension: DimTokens, Limit: float64(m.budget.TotalTokens), Used: float64(m.tokens)}
	}
	if !m.bucketsUnder {
		var over Bucket // the first by name, so the answer does not depend on map order
		for b, limit := range m.budget.BucketTokens {
			if m.buckets[b] > limit && (over == "" || b < over) {
				over = b
			}
		}
		if over != "" {
			return &BudgetError{Dimension: DimTokens + "." + string(over), Limit: float64(m.budget.BucketTokens[over]), Used: float64(m.buckets[over])}
		}
		m.bucketsUnder = true
	}
	if m.calls > m.budget.MaxToolCalls {
		return &BudgetError{Dimension: DimToolCalls, Limit: float64(m.budget.MaxToolCalls), Used: float64(m.calls)}
	}
	if m.cost > toMicro(m.budget.MaxCostCents) {
		return &BudgetError{Dimension: DimCost, Limit: m.budget.MaxCostCents, Used: float64(m.cost) / microCents}
	}
	return nil
}

// CheckWallClock records the time now (from the injected clock) and
// returns a *BudgetError once the run has used wall_clock_ms or more.
func (m *Meter) CheckWallClock(now time.Time) error {
	el := now.Sub(m.start).Milliseconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	if el > m.elapsed {
		m.elapsed = el
	}
	if m.elapsed >= m.budget.WallClockMS {
		return &BudgetError{Dimension: DimWallClock, Limit: float64(m.budget.WallClockMS), Used: float64(m.elapsed), Requested: 0}
	}
	return nil
}

// Remaining returns the wall-clock time left as of now (zero when spent);
// use it as a context deadline for a stage.
func (m *Meter) Remaining(now time.Time) time.Duration {
	left := time.Duration(m.budget.WallClockMS)*time.Millisecond - now.Sub(m.start)
	return max(left, 0)
}

// Left returns the tool calls and cost (cents) still available.
func (m *Meter) Left() (toolCalls int, costCents float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.budget.MaxToolCalls - m.calls, m.budget.MaxCostCents - float64(m.cost)/microCents
}

// Usage returns a snapshot of what has been charged.
func (m *Meter) Usage() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := Usage{Tokens: m.tokens, ToolCalls: m.calls, CostCents: float64(m.cost) / microCents, WallClockMS: m.elapsed}
	if len(m.buckets) > 0 {
		u.TokensByBucket = maps.Clone(m.buckets)
	}
	return u
}
