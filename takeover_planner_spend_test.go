package contextos_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/runcontext"
)

// costlyTurns is a turnPlanner whose every turn reports usage.
type costlyTurns struct {
	p     *turnPlanner
	usage contextos.PlanUsage
}

func (c costlyTurns) Plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	plan, err := c.p.Plan(ctx, req)
	if plan != nil {
		plan.Usage = c.usage
	}
	return plan, err
}

// A takeover charges the planner turns the dead runtime paid for after
// its last checkpoint. The dead runtime planned turn 0 (5,000 tokens),
// made its calls and froze in turn 1; the takeover plans from the claim
// again: its turns 0 and 1 bring the run to 15,000 tokens, over
// total_tokens 12,000, so it cannot end DECIDED (it did, at 10,000, when
// the dead runtime's turn was not charged).
func TestTakeoverChargesTheDeadRuntimesPlannerTurns(t *testing.T) {
	for _, mode := range []runcontext.Mode{runcontext.ModeBatch, runcontext.ModeStream} {
		t.Run(string(mode), func(t *testing.T) {
			planner := newTurnPlanner(1200, 2)
			req, rc := refundRequest(t, 1200, true)
			req.Mode = mode
			c := startFrozen(t, costlyTurns{planner, contextos.PlanUsage{Tokens: 5000}}, nil, planner.entered, req, rc)
			res := c.takeOver(t)
			close(planner.release)
			if err := <-c.stalled; !errors.Is(err, contextos.ErrRunInProgress) {
				t.Errorf("the frozen runtime, back after the takeover = %v, want ErrRunInProgress", err)
			}
			if res.Status == decision.Decided {
				t.Errorf("taken-over run DECIDED over total_tokens %d (record says %d tokens)", rc.RunBudget.TotalTokens, res.Record.BudgetUsage.Tokens)
			}
			if got := res.Record.BudgetUsage.Tokens; got < 15000 {
				t.Errorf("the taken-over run's record counts %d tokens, want at least 15000 (the dead runtime's turn and the takeover's two)", got)
			}
			contextostest.AssertCalls(t, c.h.Adapter("adp_payments"), "issue_refund", 0)
		})
	}
}

// The same holds for cost: the dead runtime's turn (10 cents) and the
// takeover's two come to 30, over max_cost_cents 25.
func TestTakeoverChargesTheDeadRuntimesPlannerCost(t *testing.T) {
	planner := newTurnPlanner(1200, 2)
	req, rc := refundRequest(t, 1200, true)
	c := startFrozen(t, costlyTurns{planner, contextos.PlanUsage{CostCents: 10}}, nil, planner.entered, req, rc)
	res := c.takeOver(t)
	close(planner.release)
	<-c.stalled
	if res.Status == decision.Decided {
		t.Errorf("taken-over run DECIDED over max_cost_cents %v (record says %v cents)", rc.RunBudget.MaxCostCents, res.Record.BudgetUsage.CostUSDCents)
	}
	if got := res.Record.BudgetUsage.CostUSDCents; got < 30 {
		t.Errorf("the taken-over run's record counts %v cents, want at least 30", got)
	}
}

// A planner that reports no usage costs its run no save for its spend: a
// takeover has nothing of its planner to charge, and the run ends as it
// did before.
func TestTakeoverOfARunWhosePlannerReportsNoUsage(t *testing.T) {
	planner := newTurnPlanner(1200, 2)
	req, rc := refundRequest(t, 1200, true)
	c := startFrozen(t, costlyTurns{planner, contextos.PlanUsage{}}, nil, planner.entered, req, rc)
	cp, err := c.h.Checkpoints.Load(context.Background(), c.runID)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Revision != 1 || cp.Version != 2 {
		t.Errorf("the frozen run's checkpoint is at revision %d, version %d; want its claim alone (1, version 2)", cp.Revision, cp.Version)
	}
	res := c.takeOver(t)
	c.checkWhole(t, res, func() { close(planner.release) }, 1)
}

// stopFreezingStore is a checkpoint store whose first save of a stopped
// (inactive, stopped) checkpoint waits until released, as a runtime that
// died after a failed planner turn and before it saved its stop.
type stopFreezingStore struct {
	*contextos.InMemoryCheckpoints
	frozen           atomic.Bool
	entered, release chan struct{}
}

func (s *stopFreezingStore) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	var st struct {
		Active  bool   `json:"active"`
		Stopped string `json:"stopped"`
	}
	if json.Unmarshal(cp.Data, &st) == nil && !st.Active && st.Stopped != "" {
		if !s.frozen.Swap(true) {
			close(s.entered)
			<-s.release
		}
	}
	return s.InMemoryCheckpoints.Save(ctx, cp)
}

// failingFirstTurn fails its first turn with a PlanUsageError that
// reports 5,000 tokens, then plans as p with 5,000 tokens a turn.
type failingFirstTurn struct{ p *turnPlanner }

func (f failingFirstTurn) Plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	if f.p.calls.Add(1) == 1 {
		return nil, &contextos.PlanUsageError{Usage: contextos.PlanUsage{Tokens: 5000}, Err: errors.New("the reply was cut off")}
	}
	plan, err := f.p.Plan(ctx, req)
	if plan != nil {
		plan.Usage = contextos.PlanUsage{Tokens: 5000}
	}
	return plan, err
}

// A failed turn's usage (a PlanUsageError) is the run's spend as a plan's
// is: the dead runtime's failed turn is charged by the takeover even
// when that runtime died before it saved its stop.
func TestTakeoverChargesTheDeadRuntimesFailedTurn(t *testing.T) {
	planner := newTurnPlanner(1200, 0)
	planner.calls.Store(0)
	store := &stopFreezingStore{entered: make(chan struct{}), release: make(chan struct{})}
	clock := newFakeClock()
	store.InMemoryCheckpoints = contextos.NewInMemoryCheckpoints()
	store.InMemoryCheckpoints.Now = clock.Now
	req, rc := refundRequest(t, 1200, true)
	c := &takeoverCase{clock: clock, runID: rc.RunID, stalled: make(chan error, 1)}
	var o contextostest.Options
	o.Now = clock.Now
	o.Runtime.Checkpoints = store
	c.h = harness(t, failingFirstTurn{planner}, &o)
	c.invoke(req, rc)
	<-store.entered
	res := c.takeOver(t)
	close(store.release)
	<-c.stalled
	if res.Status == decision.Decided {
		t.Errorf("taken-over run DECIDED over total_tokens %d (record says %d tokens)", rc.RunBudget.TotalTokens, res.Record.BudgetUsage.Tokens)
	}
	if got := res.Record.BudgetUsage.Tokens; got < 15000 {
		t.Errorf("the taken-over run's record counts %d tokens, want at least 15000 (the dead runtime's failed turn and the takeover's two)", got)
	}
}
