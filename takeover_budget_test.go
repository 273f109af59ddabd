package contextos_test

import (
	"testing"
)

// A takeover charges the calls the dead runtime made after its last
// checkpoint (they are in the run's transcript): the run's tool-call
// budget counts them, so a taken-over run makes no more calls than
// max_tool_calls allows. Here the dead runtime made the lookup and the
// policy check (2 of 4) and froze planning; the takeover plans from the
// claim again, and its lookup, policy check and refund would be calls
// 3 to 5.
func TestTakeoverChargesTheDeadRuntimesCalls(t *testing.T) {
	planner := newTurnPlanner(1200, 2)
	req, rc := refundRequest(t, 1200, true)
	rc.RunBudget.MaxToolCalls = 4
	c := startFrozen(t, planner, nil, planner.entered, req, rc)
	res := c.takeOver(t)
	close(planner.release)
	<-c.stalled
	made := len(c.h.Adapter("adp_orders").Calls()) + len(c.h.Adapter("adp_policy").Calls()) + len(c.h.Adapter("adp_payments").Calls())
	if made > rc.RunBudget.MaxToolCalls {
		t.Errorf("the taken-over run (%s) made %d adapter calls under max_tool_calls %d", res.Status, made, rc.RunBudget.MaxToolCalls)
	}
}
