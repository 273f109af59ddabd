package gateway_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/gatewayhook"
	"github.com/contextos/contextos/runcontext"
)

// losingHolder is a spend saver and claim holder whose claim is lost once
// lost is set (the run was taken over).
type losingHolder struct{ lost atomic.Bool }

func (h *losingHolder) SaveAttemptsSpent(context.Context, string, int, float64, int) error {
	if h.lost.Load() {
		return errTakenOver
	}
	return nil
}

func (h *losingHolder) HoldClaim(context.Context) error {
	if h.lost.Load() {
		return errTakenOver
	}
	return nil
}

// slowClaimStore is a memory idempotency store whose Claim, once granted,
// runs during (a runtime frozen in the claim): another call on the run
// spends the budget, and the run is taken over.
type slowClaimStore struct {
	*gateway.MemoryIdempotency
	during func()
	key    string
}

func (s *slowClaimStore) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	prior, claimed, err := s.MemoryIdempotency.Claim(ctx, key)
	if claimed && s.during != nil {
		s.key = key
		s.during()
		s.during = nil
	}
	return prior, claimed, err
}

// A write whose key was claimed and whose execution is refused for budget
// (no adapter call) after the run was taken over is abandoned (not
// recorded): its key must be given up, not kept with the unrecorded
// refusal (the runtime that has the run would meet it as a duplicate and
// never make the write, nor record any outcome of the call).
func TestAnAbandonedBudgetRefusalOfAClaimedWriteGivesTheKeyUp(t *testing.T) {
	f := newFixture(t, lowValue)
	store := &slowClaimStore{MemoryIdempotency: gateway.NewMemoryIdempotency()}
	opts := f.opts
	opts.Idempotency = store
	regs := []gateway.Registration{
		{AdapterID: "adp_payments", Adapter: f.payments, Capabilities: map[string]gateway.Capability{"issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}, CostCents: 0.31}}},
	}
	gw, err := gateway.New(regs, &opts)
	if err != nil {
		t.Fatal(err)
	}
	holder := &losingHolder{}
	ro := &gateway.RunOptions{}
	gatewayhook.SaveSpent(ro, holder)
	meter := runcontext.NewMeter(f.rc.RunBudget, f.now)
	run, err := gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: meter}, ro)
	if err != nil {
		t.Fatal(err)
	}
	store.during = func() {
		_, left := meter.Left()
		_ = meter.ChargeCost(left) // another call on the run spends what is left
		holder.lost.Store(true)    // and the run is taken over
	}
	res, err := run.Call(ctx, refundCall(1200))
	if !errors.Is(err, errTakenOver) {
		t.Fatalf("Call = %v (%s %+v), want the claim's error", err, res.Status, res.Error)
	}
	if n := len(f.recorder.Entries()); n != 0 {
		t.Errorf("%d transcript entries, want none (the run is another's)", n)
	}
	t.Logf("status %s error %+v key %q", res.Status, res.Error, res.Metadata.IdempotencyKey)
	prior, claimed, err := store.MemoryIdempotency.Claim(ctx, store.key)
	if err != nil {
		t.Fatal(err)
	}
	if !claimed {
		t.Errorf("the key of the abandoned write is kept with its unrecorded refusal (%s: %v): the runtime that has the run meets it as a duplicate and never makes the write", prior.Status, prior.Error)
	}
}
