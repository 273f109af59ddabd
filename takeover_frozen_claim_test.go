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

// frozenClaim is an idempotency store whose first claim of a key is
// granted and then freezes its caller (closing entered) until freeze is
// closed: a runtime frozen (slow, not dead) in a write's idempotency
// claim, holding the key.
type frozenClaim struct {
	*gateway.MemoryIdempotency
	once            sync.Once
	entered, freeze chan struct{}
}

func (s *frozenClaim) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	prior, claimed, err := s.MemoryIdempotency.Claim(ctx, key)
	s.once.Do(func() {
		close(s.entered)
		<-s.freeze
	})
	return prior, claimed, err
}

// A runtime frozen in a write's idempotency claim (after the claim check
// of the call's takeover point, before the call entry), whose run was
// taken over while it was frozen, comes back: it calls no adapter (the
// run is another's), records nothing, gives the key up and stops with
// ErrRunInProgress; the takeover makes the write, once. Before, it
// recorded the call entry at the position the takeover had not used yet
// and paid the refund against a run it no longer had (the takeover then
// lost the race for that position, and only a third runtime finished
// the run).
func TestARuntimeFrozenInAWritesClaimPaysNothingOnceTakenOver(t *testing.T) {
	a := &attemptsAdapter{}
	// The planner's third call is the takeover's first turn: it waits
	// there until the frozen runtime came back.
	planner := newTurnPlanner(1200, 3)
	c := &takeoverCase{clock: newFakeClock(), stalled: make(chan error, 1)}
	var o contextostest.Options
	o.Now = c.clock.Now
	idem := &frozenClaim{MemoryIdempotency: gateway.NewMemoryIdempotency(), entered: make(chan struct{}), freeze: make(chan struct{})}
	o.Runtime.Gateway.Idempotency = idem
	noWait := func(string, int) time.Duration { return 0 }
	o.Runtime.Adapters = []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": {Backoff: noWait}}},
		{AdapterID: "adp_policy", Adapter: a, Capabilities: map[string]gateway.Capability{"eval": {Backoff: noWait}}},
		{AdapterID: "adp_payments", Adapter: a, Capabilities: map[string]gateway.Capability{"issue_refund": {Backoff: noWait, Scopes: []string{"payments.refund"}}}},
	}
	c.h = bareHarness(t, planner, &o)
	t.Cleanup(func() { c.h.ReplayAll() })
	req, rc := refundRequest(t, 1200, true)
	c.runID = rc.RunID
	go func() {
		_, err := c.h.Runtime.Invoke(context.Background(), req, rc)
		c.stalled <- err
	}()
	<-idem.entered
	c.clock.Advance(contextos.DefaultHeartbeatTTL)
	type outcome struct {
		res *contextos.Result
		err error
	}
	took := make(chan outcome, 1)
	go func() {
		res, err := c.h.Runtime.Resume(context.Background(), c.runID, contextos.ResumeInput{Takeover: true})
		took <- outcome{res, err}
	}()
	<-planner.entered
	close(idem.freeze)
	if err := <-c.stalled; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the frozen runtime, back after the takeover = %v, want ErrRunInProgress", err)
	}
	a.mu.Lock()
	paid := a.refunds
	a.mu.Unlock()
	if paid != 0 {
		t.Errorf("the runtime that came back after its takeover paid %d refunds", paid)
	}
	close(planner.release)
	got := <-took
	if got.err != nil && errors.Is(got.err, contextos.ErrRunInProgress) {
		// The takeover lost the race for the position the frozen
		// runtime recorded at: the next one finishes the run.
		c.clock.Advance(contextos.DefaultHeartbeatTTL)
		got.res, got.err = c.h.Runtime.Resume(context.Background(), c.runID, contextos.ResumeInput{Takeover: true})
		t.Errorf("the takeover lost the race for the transcript position to the runtime it took the run from")
	}
	if got.err != nil {
		t.Fatalf("takeover: %v", got.err)
	}
	contextostest.AssertStatus(t, got.res, decision.Decided)
	if a.refunds != 1 {
		t.Errorf("%d refunds, want 1", a.refunds)
	}
	if _, err := gateway.VerifyTranscript(runEntries(t, c.h, c.runID)); err != nil {
		t.Errorf("the transcript does not verify: %v", err)
	}
	contextostest.AssertReplayEqual(t, c.h.Replay(got.res))
}

// savesDown is the in-memory checkpoint store whose saves fail while
// down is set (its loads go on): a store the runtime cannot reach for a
// while.
type savesDown struct {
	*contextos.InMemoryCheckpoints
	down atomic.Bool
}

func (s *savesDown) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	if s.down.Load() {
		return errors.New("checkpoint store down: secret-dsn")
	}
	return s.InMemoryCheckpoints.Save(ctx, cp)
}

// A runtime frozen in a tool call whose run was taken over (and stopped
// by the takeover) comes back when its checkpoint store fails: it cannot
// renew its claim, so it cannot know the run is still its, and records
// nothing. Before, the failed renewal was logged and taken for a renewed
// claim: the runtime recorded the call's result past the stopped run's
// checkpoint, and no resume would continue the run again
// (ErrNotResumable).
func TestARuntimeThatCannotRenewItsClaimRecordsNothing(t *testing.T) {
	planner := &stopPlanner{}
	req, rc := refundRequest(t, 1200, true)
	release := make(chan struct{})
	c := &takeoverCase{clock: newFakeClock(), runID: rc.RunID, stalled: make(chan error, 1)}
	var o contextostest.Options
	o.Now = c.clock.Now
	cps := &savesDown{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
	cps.Now = c.clock.Now
	o.Runtime.Checkpoints = cps
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
	if _, err := c.h.Runtime.Resume(ctx, c.runID, contextos.ResumeInput{Takeover: true}); err != nil {
		t.Fatalf("takeover: %v", err)
	}
	before := len(runEntries(t, c.h, c.runID))
	cps.down.Store(true)
	close(release)
	if err := <-c.stalled; err == nil {
		t.Errorf("the frozen runtime, back after the takeover with its checkpoint store down, succeeded")
	}
	cps.down.Store(false)
	if after := len(runEntries(t, c.h, c.runID)); after != before {
		t.Errorf("the runtime that could not renew its claim added %d entries to the transcript of the run taken over", after-before)
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

// The same over a retry whose attempts spent something (the spend save
// before the retry is the claim's renewal): a runtime frozen in such an
// attempt, whose run was taken over and ended, comes back when its
// checkpoint store fails the save, and makes no further attempt. Before,
// the failed save was logged and the runtime retried the read against a
// run it no longer had.
func TestARuntimeThatCannotSaveItsSpendRetriesNothing(t *testing.T) {
	entered, freeze := make(chan struct{}), make(chan struct{})
	a := &attemptsAdapter{lookups: []lookupAttempt{{cents: 2, tokens: 5000, entered: entered, freeze: freeze}}}
	planner := newTurnPlanner(1200, 0)
	c := &takeoverCase{clock: newFakeClock(), stalled: make(chan error, 1)}
	var o contextostest.Options
	o.Now = c.clock.Now
	cps := &savesDown{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
	cps.Now = c.clock.Now
	o.Runtime.Checkpoints = cps
	noWait := func(string, int) time.Duration { return 0 }
	o.Runtime.Adapters = []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": {Backoff: noWait, MaxAttempts: 3}}},
		{AdapterID: "adp_policy", Adapter: a, Capabilities: map[string]gateway.Capability{"eval": {Backoff: noWait}}},
		{AdapterID: "adp_payments", Adapter: a, Capabilities: map[string]gateway.Capability{"issue_refund": {Backoff: noWait, Scopes: []string{"payments.refund"}}}},
	}
	c.h = bareHarness(t, planner, &o)
	t.Cleanup(func() { c.h.ReplayAll() })
	req, rc := refundRequest(t, 1200, true)
	c.runID = rc.RunID
	go func() {
		_, err := c.h.Runtime.Invoke(context.Background(), req, rc)
		c.stalled <- err
	}()
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
	cps.down.Store(true)
	close(freeze)
	if err := <-c.stalled; err == nil {
		t.Errorf("the frozen runtime, back after the takeover with its checkpoint store down, succeeded")
	}
	cps.down.Store(false)
	a.mu.Lock()
	again := a.n - lookups
	a.mu.Unlock()
	if again != 0 {
		t.Errorf("the runtime that could not save its spend made %d more lookup attempts on the run taken over", again)
	}
	if after := len(runEntries(t, c.h, c.runID)); after != before {
		t.Errorf("the runtime that came back added %d entries to the transcript", after-before)
	}
	contextostest.AssertReplayEqual(t, c.h.Replay(res))
}
