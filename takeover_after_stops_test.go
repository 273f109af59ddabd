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

// stopsThenFreezes fails its first two calls (each stops the run
// ESCALATED, resumable), freezes its third until released (a runtime
// that dies planning), then plans the lookup at turn 0 and the refund
// after, each turn reporting 1,000 tokens.
type stopsThenFreezes struct {
	calls            atomic.Int32
	entered, release chan struct{}
}

func (p *stopsThenFreezes) Plan(_ context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	switch p.calls.Add(1) {
	case 1, 2:
		return nil, &contextos.PlanUsageError{Usage: contextos.PlanUsage{Tokens: 1000}, Err: errors.New("the reply was cut off")}
	case 3:
		close(p.entered)
		<-p.release
		return nil, errors.New("back from the dead")
	}
	plan := lookupPlan()
	if req.Turn > 0 {
		plan = refundPlan(1200)
	}
	plan.Usage = contextos.PlanUsage{Tokens: 1000}
	return plan, nil
}

// A takeover of a run that had stopped twice before (found by
// TestBudgetsExactGeneratedRuns): the first stop's ESCALATED record,
// closed by the second stop's, was taken for a decision the dead
// runtime stored and did not save in its checkpoint, so the takeover
// ended the run with that stale record (the dead runtime's spend
// uncharged), or refused the run as corrupt when the record's id was
// not the one due. The takeover continues the run instead.
func TestTakeoverAfterTwoStopsContinuesTheRun(t *testing.T) {
	p := &stopsThenFreezes{entered: make(chan struct{}), release: make(chan struct{})}
	clock := newFakeClock()
	var o contextostest.Options
	o.Now = clock.Now
	h := harness(t, p, &o)
	ctx := context.Background()
	req, rc := refundRequest(t, 1200, true)
	first := h.Invoke(req, rc)
	contextostest.AssertStatus(t, first, decision.Escalated)
	second, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, second, decision.Escalated)
	stalled := make(chan error, 1)
	go func() {
		_, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{})
		stalled <- err
	}()
	<-p.entered
	clock.Advance(contextos.DefaultHeartbeatTTL)
	res, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Takeover: true})
	close(p.release)
	if e := <-stalled; !errors.Is(e, contextos.ErrRunInProgress) {
		t.Errorf("the frozen runtime, back after the takeover = %v, want ErrRunInProgress", e)
	}
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if res.Record.RecordID == first.Record.RecordID || res.Record.RecordID == second.Record.RecordID {
		t.Fatalf("the takeover ended the run with an earlier stop's record %s (%s)", res.Record.RecordID, res.Record.Rationale.Summary)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	if got := res.Record.BudgetUsage.Tokens; got != 4000 {
		t.Errorf("the run's record counts %d tokens, want 4000 (two failed turns and the takeover's two)", got)
	}
}
