package contextos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/contextos/contextos"
)

// TestPlannerEditingDecisionsConcurrentRuns: the runs of a runtime share
// one list of the pack's decision options; planners of concurrent runs
// that edit every option PlanRequest.Decisions hands them (and the list
// itself) each see the pack's options, and no run sees another's edit
// (run with -race: the shared list is only read).
func TestPlannerEditingDecisionsConcurrentRuns(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	planner := contextos.PlannerFunc(func(_ context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
		ds := req.Decisions()
		b, _ := json.Marshal(ds)
		mu.Lock()
		seen = append(seen, string(b))
		mu.Unlock()
		for i := range ds {
			ds[i].DecisionKey += "~edited"
			for _, l := range [][]string{ds[i].AllowedOutcomes, ds[i].RefusalOutcomes, ds[i].EscalationOutcomes, ds[i].RequiredEvidence} {
				for j := range l {
					l[j] = "edited"
				}
			}
		}
		if len(ds) > 0 {
			ds[0] = contextos.DecisionOption{}
		}
		return deniedPlan(), nil
	})
	h := harness(t, planner, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, rc := refundRequest(t, 1200, false)
			rc.RunID = fmt.Sprintf("run_a1b2c3d4e5f607%02d", i)
			if _, err := h.Runtime.Invoke(context.Background(), req, rc); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	want := `[{"decision_key":"support.refund.execute","allowed_outcomes":["approved","denied","escalated"],"refusal_outcomes":["denied"],"escalation_outcomes":["escalated"],` +
		`"required_evidence":["identity_verified","order_lookup","policy_eval"]}]`
	if len(seen) < 8 {
		t.Fatalf("the planner was asked %d times", len(seen))
	}
	for i, s := range seen {
		if s != want {
			t.Errorf("planner turn %d was handed %s", i, s)
		}
	}
}
