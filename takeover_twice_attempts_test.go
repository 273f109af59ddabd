package contextos_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// A takeover of a takeover, each runtime frozen between the attempts of
// the same retried lookup (the takeover plans it again, under the same
// tool call id): each saved attempt is charged once, and only the
// attempts in progress at the takeovers are lost.
func TestATakeoverOfATakeoverChargesEachSavedAttemptOnce(t *testing.T) {
	enteredA, freezeA := make(chan struct{}), make(chan struct{})
	enteredB, freezeB := make(chan struct{}), make(chan struct{})
	a := &attemptsAdapter{lookups: []lookupAttempt{
		{cents: 2, tokens: 1000}, {cents: 1, tokens: 1, entered: enteredA, freeze: freezeA},
		{cents: 3, tokens: 2000}, {cents: 1, tokens: 1, entered: enteredB, freeze: freezeB},
	}}
	planner := newTurnPlanner(1200, 0)
	c := attemptsHarness(t, planner, a)
	req, rc := refundRequest(t, 1200, true)
	c.runID = rc.RunID
	ctx := context.Background()
	c.invoke(req, rc)
	<-enteredA
	c.clock.Advance(contextos.DefaultHeartbeatTTL)
	stalledB := make(chan error, 1)
	go func() {
		_, err := c.h.Runtime.Resume(ctx, c.runID, contextos.ResumeInput{Takeover: true})
		stalledB <- err
	}()
	<-enteredB
	c.clock.Advance(contextos.DefaultHeartbeatTTL)
	res, err := c.h.Runtime.Resume(ctx, c.runID, contextos.ResumeInput{Takeover: true})
	if err != nil {
		t.Fatal(err)
	}
	close(freezeA)
	close(freezeB)
	for _, ch := range []chan error{c.stalled, stalledB} {
		if err := <-ch; !errors.Is(err, contextos.ErrRunInProgress) {
			t.Errorf("a frozen runtime, back after the takeovers = %v, want ErrRunInProgress", err)
		}
	}
	const tokens, cents = 900 + 1000 + 900 + 2000 + 900 + 700, 0.4 + 2 + 0.4 + 3 + 0.4 + 0.3
	if u := res.Record.BudgetUsage; u.Tokens != tokens || math.Abs(u.CostUSDCents-cents) > 1e-9 {
		t.Errorf("the run's record counts %d tokens and %v cents, want %d and %v", u.Tokens, u.CostUSDCents, tokens, cents)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	if _, err := gateway.VerifyTranscript(runEntries(t, c.h, c.runID)); err != nil {
		t.Errorf("the transcript does not verify: %v", err)
	}
	contextostest.AssertReplayEqual(t, c.h.Replay(res))
}
