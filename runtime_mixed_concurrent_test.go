package contextos_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/runcontext"
)

// mixedCase is one of the requests TestMixedRunsThroughOneRuntimeConcurrently
// runs: an amount (above the finance gate's threshold or not), whether the
// identity is verified (policy decisions differ) and the safety mode (the
// tool surface differs).
type mixedCase struct {
	amount   int
	verified bool
	safety   runcontext.ApprovalMode
}

func (c mixedCase) request(t *testing.T, i int) (*runcontext.InvokeRequest, *runcontext.RunContext) {
	req, rc := refundRequest(t, c.amount, c.verified)
	rc.RunID = fmt.Sprintf("run_mixed_%02d_%d_%t_%s", i, c.amount, c.verified, c.safety)
	if c.safety != "" {
		rc.SafetyMode = c.safety
	}
	return req, rc
}

// mixedPlanner refunds the request's amount.
var mixedPlanner = contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	amount := 0
	switch v := req.Request.Input.Context["refund_amount"].(type) {
	case int:
		amount = v
	case float64:
		amount = int(v)
	}
	return refundPlan(amount), nil
})

// summary is what a run of a mixedCase must give however many other runs
// go through its runtime at once: its compiled context and ledger hashes,
// its status and the ids and statuses of its tool results.
func summary(res *contextos.Result) string {
	s := fmt.Sprintf("%s %s %s", res.Status, res.Compiled.Hash(), res.Compiled.ContextLedger.LedgerHash)
	for _, r := range res.ToolResults {
		s += fmt.Sprintf(" [%s %s %s %s]", r.Status, r.ToolCallID, r.Metadata.IdempotencyKey, r.Metadata.ToolTranscriptID)
	}
	if p := res.Pending; p != nil {
		s += " pending " + p.GateID
	}
	return s
}

// TestMixedRunsThroughOneRuntimeConcurrently: requests that compile to
// different tool surfaces, policy blocks and gates (the compiler's memos
// and the gateway's bindings are shared by every run of the runtime) run
// at once through one runtime and each gives what it gives run alone on a
// runtime of its own. Run it with -race.
func TestMixedRunsThroughOneRuntimeConcurrently(t *testing.T) {
	cases := []mixedCase{
		{500, true, ""}, {150000, true, ""}, {1200, false, ""}, {500, true, runcontext.ReadOnly},
		{150000, false, runcontext.Network}, {1200, true, runcontext.Delegated},
	}
	const rounds = 3
	want := map[string]string{}
	for i := range rounds * len(cases) {
		c := cases[i%len(cases)]
		h := harness(t, mixedPlanner, nil)
		req, rc := c.request(t, i)
		res, err := h.Runtime.Invoke(context.Background(), req, rc)
		if err != nil {
			t.Fatalf("case %+v alone: %v", c, err)
		}
		want[rc.RunID] = summary(res)
	}
	h := harness(t, mixedPlanner, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]string{}
	for i := range rounds * len(cases) {
		c := cases[i%len(cases)]
		req, rc := c.request(t, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.Runtime.Invoke(context.Background(), req, rc)
			if err != nil {
				t.Errorf("case %+v: %v", c, err)
				return
			}
			mu.Lock()
			got[rc.RunID] = summary(res)
			mu.Unlock()
		}()
	}
	wg.Wait()
	distinct := map[string]bool{}
	for id, w := range want {
		distinct[w[:40]] = true
		if got[id] != w {
			t.Errorf("%s:\n got %s\nwant %s (run alone)", id, got[id], w)
		}
	}
	t.Logf("%d runs, %d distinct outcomes", len(want), len(distinct))
}
