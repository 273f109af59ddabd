package contextos_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// freezingTurns plans the lookup at turn 0 and the refund after, each turn
// reporting 5,000 tokens, and freezes its calls 2 and 4 (a runtime that
// dies in a planner turn) until released.
type freezingTurns struct {
	calls   atomic.Int32
	entered chan int32
	release chan struct{}
}

func (f *freezingTurns) Plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	n := f.calls.Add(1)
	if n == 2 || n == 4 {
		f.entered <- n
		<-f.release
		return nil, errors.New("back from the dead")
	}
	p := lookupPlan()
	if req.Turn > 0 {
		p = refundPlan(1200)
	}
	p.Usage = contextos.PlanUsage{Tokens: 5000}
	return p, nil
}

// A takeover of a takeover charges each dead runtime's planner turns once:
// the first runtime's turn (5,000), the first takeover's (5,000) and the
// second takeover's two (10,000) come to 20,000 tokens exactly.
func TestTakeoverOfATakeoverChargesEachDeadRuntimeOnce(t *testing.T) {
	p := &freezingTurns{entered: make(chan int32, 2), release: make(chan struct{})}
	clock := newFakeClock()
	var o contextostest.Options
	o.Now = clock.Now
	h := harness(t, p, &o)
	req, rc := refundRequest(t, 1200, true)
	rc.RunBudget.TotalTokens = 1_000_000
	rc.RunBudget.WallClockMS = 3_600_000
	errs := make(chan error, 2)
	go func() {
		_, err := h.Runtime.Invoke(context.Background(), req, rc)
		errs <- err
	}()
	<-p.entered
	clock.Advance(contextos.DefaultHeartbeatTTL)
	go func() {
		_, err := h.Runtime.Resume(context.Background(), rc.RunID, contextos.ResumeInput{Takeover: true})
		errs <- err
	}()
	<-p.entered
	clock.Advance(contextos.DefaultHeartbeatTTL)
	res, err := h.Runtime.Resume(context.Background(), rc.RunID, contextos.ResumeInput{Takeover: true})
	close(p.release)
	for range 2 {
		if e := <-errs; !errors.Is(e, contextos.ErrRunInProgress) {
			t.Errorf("a frozen runtime, back = %v, want ErrRunInProgress", e)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != decision.Decided {
		t.Fatalf("status %s (%s)", res.Status, res.Record.Rationale)
	}
	if got := res.Record.BudgetUsage.Tokens; got != 20000 {
		t.Errorf("the run's record counts %d tokens, want 20000 (5,000 for each dead runtime's turn, 10,000 for the takeover's two)", got)
	}
}
