package contextos_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// slowCallAdapter is the support pack's three capabilities on one
// adapter: the call named slow advances the run's clock by more than
// half the lease and fails the checkpoint store's saves while it runs,
// once (a healthy single runtime whose store has a short outage during a
// slow tool call: nobody takes the run over).
type slowCallAdapter struct {
	mu     sync.Mutex
	slow   string
	once   bool
	clock  *fakeClock
	cps    *outageCheckpoints
	counts map[string]int
}

func (a *slowCallAdapter) Call(_ context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	a.mu.Lock()
	a.counts[call.Capability]++
	first := call.Capability == a.slow && !a.once
	a.once = a.once || first
	a.mu.Unlock()
	if first {
		a.clock.Advance(contextos.DefaultHeartbeatTTL * 6 / 10)
		a.cps.down.Store(true)
	}
	switch call.Capability {
	case "eval":
		return &gateway.Outcome{Output: map[string]any{"eligible": true}, Tokens: 300}, nil
	case "issue_refund":
		return &gateway.Outcome{Output: map[string]any{"transaction_id": "txn_q9"}, Mutations: []string{"refund:txn_q9"}}, nil
	}
	return &gateway.Outcome{Output: map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}, Tokens: 700}, nil
}

// errCheckpointOutage is outageCheckpoints' failure.
var errCheckpointOutage = errors.New("checkpoint store unreachable")

// outageCheckpoints is the in-memory checkpoint store whose saves fail
// with errCheckpointOutage while down is set.
type outageCheckpoints struct {
	*contextos.InMemoryCheckpoints
	down atomic.Bool
}

func (s *outageCheckpoints) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	if s.down.Load() {
		return errCheckpointOutage
	}
	return s.InMemoryCheckpoints.Save(ctx, cp)
}

func (a *slowCallAdapter) count(capability string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts[capability]
}

// A healthy runtime that nobody took over, whose checkpoint store fails
// the claim's renewal once during a slow tool call, stops (fail closed:
// it cannot know the run is still its). That stop must leave a run the
// host can tell apart and continue: the error says the run is in
// progress elsewhere (ErrRunInProgress) or, here, matches the store's
// failure (errors.Is), as a failed renewal at a takeover point does; a
// plain resume says to take the run over; a takeover
// once the lease lapsed decides it, a write is paid once, a read is read
// again, and the runs replay equal.
func TestTakeoverFalseStopOnAStoreOutageIsResumable(t *testing.T) {
	for _, slow := range []string{"lookup", "eval", "issue_refund"} {
		t.Run(slow, func(t *testing.T) {
			clock := newFakeClock()
			cps := &outageCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
			cps.Now = clock.Now
			a := &slowCallAdapter{slow: slow, clock: clock, cps: cps, counts: map[string]int{}}
			var o contextostest.Options
			o.Now = clock.Now
			o.Runtime.Checkpoints = cps
			o.Runtime.Adapters = []gateway.Registration{
				{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": {}}},
				{AdapterID: "adp_policy", Adapter: a, Capabilities: map[string]gateway.Capability{"eval": {}}},
				{AdapterID: "adp_payments", Adapter: a, Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
			}
			h := bareHarness(t, newTurnPlanner(1200, 0), &o)
			t.Cleanup(func() { h.ReplayAll() })
			req, rc := refundRequest(t, 1200, true)
			ctx := context.Background()
			_, err := h.Runtime.Invoke(ctx, req, rc)
			cps.down.Store(false)
			if err == nil {
				t.Fatal("the runtime whose claim renewal failed went on")
			}
			if !errors.Is(err, errCheckpointOutage) {
				t.Errorf("the stop's error %q does not match the checkpoint store's failure (documented: ErrRunInProgress, or the store's failure): a host cannot tell why the run stopped", err)
			}
			if _, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{}); !errors.Is(err, contextos.ErrNotResumable) {
				t.Errorf("a resume while the lease lasts: %v, want ErrNotResumable", err)
			}
			clock.Advance(contextos.DefaultHeartbeatTTL)
			if _, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{}); !errors.Is(err, contextos.ErrNotResumable) {
				t.Errorf("a plain resume once the lease lapsed: %v, want ErrNotResumable (take the run over)", err)
			}
			res, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Takeover: true})
			if err != nil {
				t.Fatalf("takeover after the lease lapsed: %v", err)
			}
			contextostest.AssertStatus(t, res, decision.Decided)
			if n := a.count("issue_refund"); n != 1 {
				t.Errorf("%d refunds, want 1", n)
			}
			if slow != "issue_refund" {
				if n := a.count(slow); n != 2 {
					t.Errorf("%d %s calls, want 2 (read again)", n, slow)
				}
			}
			if _, err := gateway.VerifyTranscript(runEntries(t, h, rc.RunID)); err != nil {
				t.Errorf("the transcript does not verify: %v", err)
			}
			contextostest.AssertReplayEqual(t, h.Replay(res))
		})
	}
}

// retrySaveAdapter's lookup fails its first attempt retryably after more
// than half the lease, spending something (so the gateway saves the
// spend before the retry, which renews the run's claim); the store goes
// down during the second attempt, which succeeds at once.
type retrySaveAdapter struct {
	slowCallAdapter
}

func (a *retrySaveAdapter) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	if call.Capability == "lookup" {
		a.mu.Lock()
		a.counts["lookup"]++
		n := a.counts["lookup"]
		a.mu.Unlock()
		switch n {
		case 1:
			a.clock.Advance(contextos.DefaultHeartbeatTTL * 6 / 10)
			return &gateway.Outcome{Tokens: 100}, gateway.NewToolError(gateway.CodeExecutionFailed, true, "try again", nil)
		case 2:
			a.cps.down.Store(true)
		}
		return &gateway.Outcome{Output: map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}, Tokens: 700}, nil
	}
	a.cps.down.Store(false)
	return a.slowCallAdapter.Call(ctx, call)
}

// The spend save before a retry renews the run's claim (its lease is
// saved with it): a store outage right after it, before the lease is
// half spent again, does not stop a healthy runtime. Before, the runtime
// counted its claim from its last checkpoint save, not the spend's: the
// claim check after the retry saved again, the store failed it, and the
// run stopped though its lease had just been renewed.
func TestTakeoverSpendSaveRenewsTheClaimForTheClaimCheck(t *testing.T) {
	cps := &outageCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
	a := &retrySaveAdapter{slowCallAdapter{slow: "none", cps: cps, counts: map[string]int{}}}
	c := sameAdapterCase(t, newTurnPlanner(1200, 0), a, 3, func(o *contextostest.Options) { o.Runtime.Checkpoints = cps })
	a.clock, cps.Now = c.clock, c.clock.Now
	h := c.h
	req, rc := refundRequest(t, 1200, true)
	rc.RunBudget.WallClockMS = contextos.DefaultHeartbeatTTL.Milliseconds() * 2
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	if err != nil {
		t.Fatalf("a runtime whose claim was renewed by its spend save stopped on a store outage right after: %v", err)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	if n := a.count("lookup"); n != 2 {
		t.Errorf("%d lookup attempts, want 2", n)
	}
	contextostest.AssertReplayEqual(t, h.Replay(res))
}

// dyingEvalAdapter is retrySaveAdapter whose first policy check freezes
// until released (closing entered): the runtime dies there, after a
// point whose state save the store failed while the claim held.
type dyingEvalAdapter struct {
	retrySaveAdapter
	entered, release chan struct{}
	evals            int
}

func (a *dyingEvalAdapter) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	if call.Capability == "eval" {
		a.mu.Lock()
		a.evals++
		first := a.evals == 1
		a.mu.Unlock()
		if first {
			close(a.entered)
			<-a.release
		}
	}
	return a.retrySaveAdapter.Call(ctx, call)
}

// A point whose state save the store failed while a spend save had
// renewed the claim less than half a lease before goes on; when the
// runtime then dies, its takeover charges what it spent (nothing that
// save's snapshot took is lost): the planner's turn and the lookup's two
// attempts, once each, and the takeover's own.
func TestTakeoverAfterAFailedPointSaveChargesTheSpend(t *testing.T) {
	clock := newFakeClock()
	cps := &outageCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
	cps.Now = clock.Now
	a := &dyingEvalAdapter{retrySaveAdapter: retrySaveAdapter{slowCallAdapter{slow: "none", clock: clock, cps: cps, counts: map[string]int{}}},
		entered: make(chan struct{}), release: make(chan struct{})}
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
	rc.RunBudget.WallClockMS = contextos.DefaultHeartbeatTTL.Milliseconds() * 4
	stalled := make(chan error, 1)
	go func() {
		_, err := h.Runtime.Invoke(context.Background(), req, rc)
		stalled <- err
	}()
	<-a.entered
	cps.down.Store(false)
	clock.Advance(contextos.DefaultHeartbeatTTL)
	res, err := h.Runtime.Resume(context.Background(), rc.RunID, contextos.ResumeInput{Takeover: true})
	close(a.release)
	if serr := <-stalled; serr == nil {
		t.Error("the runtime taken over went on")
	}
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	// Spent for real: the dead runtime's turn (900), lookup attempts (100,
	// 700); the takeover's turns (900, 700), lookup (700), check (300).
	// The dead runtime's policy check, in progress, is lost.
	if got, want := res.Record.BudgetUsage.Tokens, 900+100+700+900+700+700+300; got != want {
		t.Errorf("tokens %d, want %d", got, want)
	}
	contextostest.AssertReplayEqual(t, h.Replay(res))
}
