package contextos_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// errLoadFailed is blindCheckpoints' failure of the load after a save
// whose answer it lost.
var errLoadFailed = errors.New("checkpoint store: connection refused")

// blindCheckpoints is lostAnswerCheckpoints whose next load after a lost
// answer fails too, once (the store still unreachable when the runtime
// looks for the save it sent): the runtime cannot tell at once that the
// save was its own.
type blindCheckpoints struct {
	*lostAnswerCheckpoints
	blind atomic.Bool
}

func (s *blindCheckpoints) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	err := s.lostAnswerCheckpoints.Save(ctx, cp)
	if errors.Is(err, errAnswerLost) {
		s.blind.Store(true)
	}
	return err
}

func (s *blindCheckpoints) Load(ctx context.Context, runID string) (*contextos.Checkpoint, error) {
	if s.blind.CompareAndSwap(true, false) {
		return nil, errLoadFailed
	}
	return s.lostAnswerCheckpoints.Load(ctx, runID)
}

// TestAPointSaveWithALostAnswerAndALostLoad is
// TestAPointSaveWithALostAnswerDoesNotStopAHealthyRun with the load that
// looks for the kept save failing too: the runtime goes on over the old
// revision (a spend save renewed its claim less than half a lease ago),
// and its next save is refused because the store holds the save it sent
// itself. That refusal must not be reported as a takeover
// (ErrRunInProgress, "taken over by another runtime") when nobody took
// the run over: the store holds, at the very next revision, exactly the
// bytes of the runtime's own save whose answer it lost.
func TestAPointSaveWithALostAnswerAndALostLoad(t *testing.T) {
	clock := newFakeClock()
	lost := &lostAnswerCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
	lost.Now = clock.Now
	cps := &blindCheckpoints{lostAnswerCheckpoints: lost}
	a := &lostAnswerAdapter{clock: clock, cps: lost}
	var o contextostest.Options
	o.Now = clock.Now
	o.Runtime.Checkpoints = cps
	noWait := func(string, int) time.Duration { return 0 }
	o.Runtime.Adapters = []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": {Backoff: noWait, MaxAttempts: 3}}},
		{AdapterID: "adp_policy", Adapter: a, Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: a, Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
	}
	h := bareHarness(t, newTurnPlanner(1200, 0), &o)
	t.Cleanup(func() { h.ReplayAll() })
	req, rc := refundRequest(t, 1200, true)
	rc.RunBudget.WallClockMS = contextos.DefaultHeartbeatTTL.Milliseconds() * 2
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	if n := lost.lost.Load(); n != 1 {
		t.Fatalf("the store lost %d answers, want 1 (the scenario did not happen)", n)
	}
	if errors.Is(err, contextos.ErrRunInProgress) {
		t.Fatalf("a healthy run that nobody took over stopped as taken over: %v", err)
	}
	if err != nil {
		t.Fatalf("a healthy run stopped after a save whose answer the store lost: %v", err)
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
