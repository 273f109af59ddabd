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

// errAnswerLost is lostAnswerCheckpoints' failure of a save it kept.
var errAnswerLost = errors.New("checkpoint store: connection reset after commit")

// lostAnswerCheckpoints is the in-memory checkpoint store whose next save
// after lose is set commits and then fails (a commit whose reply was cut
// off), once.
type lostAnswerCheckpoints struct {
	*contextos.InMemoryCheckpoints
	lose atomic.Bool
	lost atomic.Int32
}

func (s *lostAnswerCheckpoints) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	if err := s.InMemoryCheckpoints.Save(ctx, cp); err != nil {
		return err
	}
	if s.lose.CompareAndSwap(true, false) {
		s.lost.Add(1)
		return errAnswerLost
	}
	return nil
}

// lostAnswerAdapter is the support pack's three capabilities on one
// adapter. The lookup's first attempt takes more than half the lease and
// fails retryably having spent tokens (so the gateway saves the spend
// before the retry, which renews the claim); its second attempt arms the
// store to lose the answer of its next save: the claim renewal at the
// policy check's takeover point, a full state save, which the store keeps.
type lostAnswerAdapter struct {
	clock   *fakeClock
	cps     *lostAnswerCheckpoints
	lookups atomic.Int32
	refunds atomic.Int32
}

func (a *lostAnswerAdapter) Call(_ context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	switch call.Capability {
	case "lookup":
		switch a.lookups.Add(1) {
		case 1:
			a.clock.Advance(contextos.DefaultHeartbeatTTL * 6 / 10)
			return &gateway.Outcome{Tokens: 100}, gateway.NewToolError(gateway.CodeExecutionFailed, true, "try again", nil)
		case 2:
			a.cps.lose.Store(true)
		}
		return &gateway.Outcome{Output: map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}, Tokens: 700}, nil
	case "eval":
		return &gateway.Outcome{Output: map[string]any{"eligible": true}, Tokens: 300}, nil
	}
	a.refunds.Add(1)
	return &gateway.Outcome{Output: map[string]any{"transaction_id": "txn_q9"}, Mutations: []string{"refund:txn_q9"}}, nil
}

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

// A takeover-point save the store kept but whose answer it lost (the
// commit's reply cut off), within half a lease of the claim's last
// renewal, must not stop a healthy run that nobody took over: the store
// holds exactly the bytes the runtime sent, at a newer revision, so the
// save is the runtime's own and the run goes on from that revision.
// Before, the runtime went on over the old revision, and its next save
// was refused as a takeover's: the run stopped with ErrRunInProgress,
// "taken over by another runtime", though no other runtime existed. With
// the load that looks for the kept save failing too ("load fails too"),
// the runtime goes on over the old revision, and its next save, refused
// because the store holds the save it sent itself at the very next
// revision, is made again over it. When that save made again loses its
// answer and load too ("twice"), the store holds the runtime's own saves
// one after the other, and nobody else wrote: before, the runtime
// remembered the second as one over its old revision, looked for it at
// the old revision plus one only, and stopped with ErrRunInProgress.
func TestAPointSaveWithALostAnswerDoesNotStopAHealthyRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lost  int32
		store func(*lostAnswerCheckpoints) contextos.CheckpointStore
	}{
		{"load answers", 1, func(l *lostAnswerCheckpoints) contextos.CheckpointStore { return l }},
		{"load fails too", 1, func(l *lostAnswerCheckpoints) contextos.CheckpointStore {
			return &blindCheckpoints{lostAnswerCheckpoints: l}
		}},
		{"twice", 2, func(l *lostAnswerCheckpoints) contextos.CheckpointStore {
			return &twiceBlindCheckpoints{blindCheckpoints: &blindCheckpoints{lostAnswerCheckpoints: l}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost := &lostAnswerCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
			cps := tc.store(lost)
			a := &lostAnswerAdapter{cps: lost}
			c := sameAdapterCase(t, newTurnPlanner(1200, 0), a, 3, func(o *contextostest.Options) { o.Runtime.Checkpoints = cps })
			a.clock, lost.Now = c.clock, c.clock.Now
			h := c.h
			req, rc := refundRequest(t, 1200, true)
			rc.RunBudget.WallClockMS = contextos.DefaultHeartbeatTTL.Milliseconds() * 2
			res, err := h.Runtime.Invoke(context.Background(), req, rc)
			if n := lost.lost.Load(); n != tc.lost {
				t.Fatalf("the store lost %d answers, want %d (the scenario did not happen)", n, tc.lost)
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
		})
	}
}

// The same at a long_running run's heartbeat (a takeover point whose
// save also names the run's new IN_FLIGHT record): the store keeps the
// save and loses its answer, and the run goes on. Before, it stopped
// with the store's error though the store held its save.
func TestAHeartbeatWithALostAnswerDoesNotStopALongRun(t *testing.T) {
	clock := newFakeClock()
	cps := &lostAnswerCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
	cps.Now = clock.Now
	var o contextostest.Options
	o.Runtime.Checkpoints = cps
	o.Now = clock.Now
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &o)
	t.Cleanup(func() { h.ReplayAll() })
	h.Adapter("adp_orders").On("lookup").When(func(map[string]any) bool { cps.lose.Store(true); return false })
	scriptDefaults(h, "")
	req, rc := longRequest(t, 1200, time.Hour)
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	if n := cps.lost.Load(); n != 1 {
		t.Fatalf("the store lost %d answers, want 1 (the scenario did not happen)", n)
	}
	if err != nil {
		t.Fatalf("a long run stopped after a heartbeat whose answer the store lost: %v", err)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	contextostest.AssertReplayEqual(t, h.Replay(res))
}
