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

// twiceBlindCheckpoints is blindCheckpoints that loses the answer of the
// next save it keeps after the first lost one too (and fails the load
// after it): the save the runtime makes again over the store's revision
// (its earlier save kept there, putOwn) meets the same outage.
type twiceBlindCheckpoints struct {
	*blindCheckpoints
	rearmed atomic.Bool
}

func (s *twiceBlindCheckpoints) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	err := s.blindCheckpoints.Save(ctx, cp)
	if errors.Is(err, errAnswerLost) && s.rearmed.CompareAndSwap(false, true) {
		s.lose.Store(true)
	}
	return err
}

// A save made again over the store's revision (the store kept the
// runtime's earlier save there, whose answer and load it lost) whose
// answer and load are lost too must not stop a healthy run as taken
// over either: the store then holds the runtime's own saves, one after
// the other, and nobody else wrote. Before, the runtime remembered the
// second save as one over its old revision, though it was made over the
// next one, and its next save, refused, looked for it at the old
// revision plus one only: the run stopped with ErrRunInProgress.
func TestASaveMadeAgainWithALostAnswerAndALostLoad(t *testing.T) {
	lost := &lostAnswerCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
	cps := &twiceBlindCheckpoints{blindCheckpoints: &blindCheckpoints{lostAnswerCheckpoints: lost}}
	a := &lostAnswerAdapter{cps: lost}
	c := sameAdapterCase(t, newTurnPlanner(1200, 0), a, 3, func(o *contextostest.Options) { o.Runtime.Checkpoints = cps })
	a.clock, lost.Now = c.clock, c.clock.Now
	h := c.h
	req, rc := refundRequest(t, 1200, true)
	rc.RunBudget.WallClockMS = contextos.DefaultHeartbeatTTL.Milliseconds() * 2
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	if n := lost.lost.Load(); n != 2 {
		t.Fatalf("the store lost %d answers, want 2 (the scenario did not happen)", n)
	}
	if err != nil {
		t.Fatalf("a healthy run stopped after saves whose answers the store lost: %v", err)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	if n := a.refunds.Load(); n != 1 {
		t.Errorf("%d refunds, want 1", n)
	}
	if _, err := gateway.VerifyTranscript(runEntries(t, h, rc.RunID)); err != nil {
		t.Errorf("the transcript does not verify: %v", err)
	}
	contextostest.AssertReplayEqual(t, h.Replay(res))
}
