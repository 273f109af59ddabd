package contextos_test

import (
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/gateway"
)

// A runtime that was taken over while one of its tool calls was still
// running (slow, not dead) comes back when the adapter answers, after the
// takeover has recorded calls of its own: its result is refused by the
// transcript (the position is the takeover's), so the run's chain does
// not fork, the taken-over run is whole and replays equal, and the
// runtime that came back stops without recording anything.
func TestARuntimeTakenOverMidCallCannotForkTheTranscript(t *testing.T) {
	planner := newTurnPlanner(1200, 0)
	release := make(chan struct{})
	c := startFrozenInLookup(t, planner, release)
	res := c.takeOver(t)
	before := len(runEntries(t, c.h, c.runID))
	c.checkWhole(t, res, func() { close(release) }, 1)
	if after := runEntries(t, c.h, c.runID); len(after) != before {
		t.Errorf("the runtime that came back added %d entries to the taken-over run's transcript", len(after)-before)
	}
	if _, err := gateway.VerifyTranscript(runEntries(t, c.h, c.runID)); err != nil {
		t.Errorf("the transcript forked: %v", err)
	}
}

// startFrozenInLookup invokes the 1200 refund on a bare harness with
// planner, on a fake clock, every run captured and replayed, and returns
// once its runtime is in the order lookup, which ignores its context and
// answers only once release is closed (the takeover's lookup answers at
// once).
func startFrozenInLookup(t *testing.T, planner contextos.Planner, release chan struct{}) *takeoverCase {
	t.Helper()
	c := &takeoverCase{clock: newFakeClock(), stalled: make(chan error, 1)}
	var o contextostest.Options
	o.Now = c.clock.Now
	c.h = bareHarness(t, planner, &o)
	scriptDefaults(c.h, "adp_orders")
	t.Cleanup(func() { c.h.ReplayAll() })
	lookup := c.h.Adapter("adp_orders")
	order := map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}
	lookup.On("lookup").ReturnOutput(order).IgnoreContext(release).ReturnOutput(order)
	c.invoke(refundRequest(t, 1200, true))
	for deadline := time.Now().Add(10 * time.Second); lookup.CallCount("lookup") == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first runtime never called the lookup")
		}
	}
	return c
}
