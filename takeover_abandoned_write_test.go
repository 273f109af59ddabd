package contextos_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// abandonedWriteAdapter serves the support pack's three capabilities. The
// refund's first attempt spends a cent and fails retryably; its second
// waits until freeze is closed (closing entered), as a runtime frozen
// between the write's attempts, and fails retryably too; every later
// attempt succeeds.
type abandonedWriteAdapter struct {
	mu              sync.Mutex
	refunds         int
	lookups         int
	entered, freeze chan struct{}
}

func (a *abandonedWriteAdapter) Call(_ context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	switch call.Capability {
	case "eval":
		return &gateway.Outcome{Output: map[string]any{"eligible": true}}, nil
	case "lookup":
		a.mu.Lock()
		a.lookups++
		a.mu.Unlock()
		return &gateway.Outcome{Output: map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}}, nil
	}
	a.mu.Lock()
	a.refunds++
	n := a.refunds
	a.mu.Unlock()
	switch n {
	case 1:
		return &gateway.Outcome{CostCents: 1}, gateway.NewToolError(gateway.CodeExecutionFailed, true, "try again", nil)
	case 2:
		close(a.entered)
		<-a.freeze
		return &gateway.Outcome{CostCents: 1}, gateway.NewToolError(gateway.CodeExecutionFailed, true, "try again", nil)
	}
	return &gateway.Outcome{Output: map[string]any{"transaction_id": "txn_q9"}, Mutations: []string{"refund:txn_q9"}}, nil
}

func (a *abandonedWriteAdapter) lookupCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lookups
}

// A runtime frozen between a write's attempts holds the write's
// idempotency key. Once it comes back and finds the run taken over (the
// spend save before its retry is refused), it gives the call up: it must
// give the key up too, as a runtime that died would have (its claim
// lapses). Otherwise the takeover, which plans the same refund under the
// same key, waits for that key forever: the run never ends (and a durable
// store's live holder renews the abandoned claim for as long as its
// process lives).
func TestAnAbandonedWriteGivesItsIdempotencyKeyUp(t *testing.T) {
	a := &abandonedWriteAdapter{entered: make(chan struct{}), freeze: make(chan struct{})}
	planner := newTurnPlanner(1200, 0)
	c := sameAdapterCase(t, planner, a, 0, nil)
	c.invoke(refundRequest(t, 1200, true))
	<-a.entered
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := c.h.Runtime.Resume(ctx, c.runID, contextos.ResumeInput{Takeover: true}); !errors.Is(err, contextos.ErrLeaseHeld) {
		t.Fatalf("takeover while the frozen runtime's lease lasts = %v, want ErrLeaseHeld", err)
	}
	c.clock.Advance(contextos.DefaultHeartbeatTTL)
	type answer struct {
		res *contextos.Result
		err error
	}
	took := make(chan answer, 1)
	go func() {
		res, err := c.h.Runtime.Resume(ctx, c.runID, contextos.ResumeInput{Takeover: true})
		took <- answer{res, err}
	}()
	// The takeover has claimed the run once it looks the order up again.
	for deadline := time.Now().Add(10 * time.Second); a.lookupCount() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the takeover never looked the order up")
		}
	}
	close(a.freeze)
	if err := <-c.stalled; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the frozen runtime, back after the takeover = %v, want ErrRunInProgress", err)
	}
	var got answer
	select {
	case got = <-took:
	case <-time.After(10 * time.Second):
		cancel()
		<-took
		t.Fatal("the takeover waits for the refund's idempotency key the runtime that gave the call up still holds")
	}
	if got.err != nil {
		t.Fatalf("takeover: %v", got.err)
	}
	contextostest.AssertStatus(t, got.res, decision.Decided)
	if _, err := gateway.VerifyTranscript(runEntries(t, c.h, c.runID)); err != nil {
		t.Errorf("the transcript does not verify: %v", err)
	}
	contextostest.AssertReplayEqual(t, c.h.Replay(got.res))
}
