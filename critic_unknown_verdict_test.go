package contextos_test

import (
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// A host critic's verdict the runtime does not know ("REJECT", "deny",
// "block", none) fails closed: it is taken as a replan (as the verify
// loop takes a verdict it does not know), so a plan it did not pass never
// runs and results it did not accept are never decided on; the run ends
// escalated once replans are exhausted. Such a verdict was ignored as
// looser than the built-in critic's: the refund ran and the run decided.
// Found by review.
func TestHostCriticUnknownVerdictFailsClosed(t *testing.T) {
	for _, v := range []contextos.CriticVerdict{"REJECT", "deny", "block", ""} {
		t.Run("verify "+string(v), func(t *testing.T) {
			h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)).RepeatLast(),
				&contextostest.Options{Runtime: contextos.Options{Critic: verdictCritic{verify: v, score: contextos.VerdictAccept}}})
			req, rc := refundRequest(t, 1200, true)
			res := h.Invoke(req, rc)
			contextostest.AssertStatus(t, res, decision.Escalated)
			for _, a := range []string{"adp_orders", "adp_policy", "adp_payments"} {
				if n := len(h.Adapter(a).Calls()); n != 0 {
					t.Errorf("%s called %d times on plans the critic did not pass", a, n)
				}
			}
		})
		t.Run("score "+string(v), func(t *testing.T) {
			h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)).RepeatLast(),
				&contextostest.Options{Runtime: contextos.Options{Critic: verdictCritic{verify: contextos.VerdictOK, score: v}}})
			req, rc := refundRequest(t, 1200, true)
			res := h.Invoke(req, rc)
			contextostest.AssertStatus(t, res, decision.Escalated)
		})
	}
}
