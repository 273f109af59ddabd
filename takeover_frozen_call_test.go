package contextos_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
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
	release := make(chan struct{})
	c := startFrozenInLookup(t, planner, release)
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

// A runtime frozen in a read's attempt that fails retryably and spends
// nothing (so no spend save comes before the retry), whose run was taken
// over and ended, comes back when the attempt answers: it makes no
// further attempt (the run is another's) and stops with ErrRunInProgress.
// Before, it retried the read against a run it no longer had. Found by
// TestBudgetsExactWhenFrozenRuntimesComeBack.
func TestARuntimeFrozenInAnAttemptRetriesNothingOnceTakenOver(t *testing.T) {
	entered, freeze := make(chan struct{}), make(chan struct{})
	a := &attemptsAdapter{lookups: []lookupAttempt{{entered: entered, freeze: freeze}}}
	planner := newTurnPlanner(1200, 0)
	c := sameAdapterCase(t, planner, a, 3, nil)
	c.invoke(refundRequest(t, 1200, true))
	<-entered
	c.clock.Advance(contextos.DefaultHeartbeatTTL)
	res, err := c.h.Runtime.Resume(context.Background(), c.runID, contextos.ResumeInput{Takeover: true})
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	before := len(runEntries(t, c.h, c.runID))
	a.mu.Lock()
	lookups := a.n
	a.mu.Unlock()
	close(freeze)
	if err := <-c.stalled; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the frozen runtime, back after the takeover = %v, want ErrRunInProgress", err)
	}
	a.mu.Lock()
	again := a.n - lookups
	a.mu.Unlock()
	if again != 0 {
		t.Errorf("the runtime that came back made %d more lookup attempts on the run taken over", again)
	}
	if after := len(runEntries(t, c.h, c.runID)); after != before {
		t.Errorf("the runtime that came back added %d entries to the transcript", after-before)
	}
	if a.refunds != 1 {
		t.Errorf("%d refunds, want 1", a.refunds)
	}
	contextostest.AssertReplayEqual(t, c.h.Replay(res))
}
