package contextos_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/gateway"
)

// stopPlanner plans the lookup at its first call, fails its second (the
// takeover's first turn: the takeover stops the run, resumable, having
// recorded no call) and plans the refund after.
type stopPlanner struct{ calls atomic.Int32 }

func (p *stopPlanner) Plan(_ context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	switch p.calls.Add(1) {
	case 1:
		return lookupPlan(), nil
	case 2:
		return nil, errors.New("the model is unavailable")
	}
	if req.Turn == 0 {
		return lookupPlan(), nil
	}
	return refundPlan(1200), nil
}

// A runtime frozen in a tool call (slow, not dead) whose run was taken
// over, and stopped by the takeover before it recorded any call, comes
// back when the tool answers: it finds the run another's before it
// records the call's result, and stops (ErrRunInProgress) writing
// nothing. Before, it recorded the result at the position the takeover
// had not used, past the stopped run's checkpoint, and no resume would
// continue the run (ErrNotResumable: entries past its checkpoint that no
// runtime of the run recorded). Found by
// TestBudgetsExactWhenFrozenRuntimesComeBack.
func TestARuntimeFrozenInACallWritesNothingIntoARunTakenOverAndStopped(t *testing.T) {
	planner := &stopPlanner{}
	req, rc := refundRequest(t, 1200, true)
	release := make(chan struct{})
	c := &takeoverCase{clock: newFakeClock(), runID: rc.RunID, stalled: make(chan error, 1)}
	var o contextostest.Options
	o.Now = c.clock.Now
	c.h = bareHarness(t, planner, &o)
	scriptDefaults(c.h, "adp_orders")
	t.Cleanup(func() { c.h.ReplayAll() })
	lookup := c.h.Adapter("adp_orders")
	order := map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}
	lookup.On("lookup").ReturnOutput(order).IgnoreContext(release).ReturnOutput(order)
	go func() {
		_, err := c.h.Runtime.Invoke(context.Background(), req, rc)
		c.stalled <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); lookup.CallCount("lookup") == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first runtime never called the lookup")
		}
	}
	ctx := context.Background()
	c.clock.Advance(contextos.DefaultHeartbeatTTL)
	stopped, err := c.h.Runtime.Resume(ctx, c.runID, contextos.ResumeInput{Takeover: true})
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	before := len(runEntries(t, c.h, c.runID))
	close(release)
	if err := <-c.stalled; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the frozen runtime, back after the takeover = %v, want ErrRunInProgress", err)
	}
	if after := len(runEntries(t, c.h, c.runID)); after != before {
		t.Errorf("the runtime that came back added %d entries to the transcript of the run taken over (%s)", after-before, stopped.Status)
	}
	res, err := c.h.Runtime.Resume(ctx, c.runID, contextos.ResumeInput{})
	if err != nil {
		t.Fatalf("the resume of the run taken over and stopped: %v", err)
	}
	if _, err := gateway.VerifyTranscript(runEntries(t, c.h, c.runID)); err != nil {
		t.Errorf("the transcript does not verify: %v", err)
	}
	contextostest.AssertReplayEqual(t, c.h.Replay(res))
}
