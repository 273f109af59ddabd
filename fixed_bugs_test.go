package contextos_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// Minimal reproductions of the runtime bugs TestPropertyRandomRuns found
// (issue 13), kept as regression tests now that they are fixed.

// B1: a NaN adapter output is refused at the boundary and the run ends
// with its record (the replay recorder could not encode it).
func TestFixedBugNaNOutcomeIsRecorded(t *testing.T) {
	for _, write := range []bool{false, true} {
		h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
		if write {
			scriptDefaults(h, "adp_payments")
			h.Adapter("adp_payments").On("issue_refund").ReturnOutput(map[string]any{"score": math.NaN()}, "refund:txn_nan")
		} else {
			scriptDefaults(h, "adp_orders")
			h.Adapter("adp_orders").On("lookup").ReturnOutput(map[string]any{"score": math.NaN()})
		}
		req, rc := refundRequest(t, 1200, true)
		res, err := h.Runtime.Invoke(context.Background(), req, rc)
		if err != nil {
			t.Errorf("write=%v: Invoke = %v (want a result: the output is refused at the boundary)", write, err)
			continue
		}
		if recs, _ := h.Decisions.List(context.Background(), decision.Filter{RunID: res.RunID}); len(recs) == 0 {
			t.Errorf("write=%v: no stored record", write)
		}
	}
}

// B2: a caller that goes away during a tool's retries: the run replays
// equal (playback stops retrying where the run did).
func TestFixedBugCancelDuringRetriesReplays(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
	scriptDefaults(h, "adp_orders")
	calls := 0
	// The second attempt of the lookup: the caller goes away, the attempt
	// fails (retryable) and the gateway does not make a third.
	h.Adapter("adp_orders").On("lookup").When(func(map[string]any) bool {
		if calls++; calls == 2 {
			cancel()
		}
		return false
	})
	h.Adapter("adp_orders").On("lookup").FailRetryable("busy")
	req, rc := refundRequest(t, 1200, true)
	res, err := h.Runtime.Invoke(ctx, req, rc)
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_orders"), "lookup", 2)
	out, err := h.Runtime.Replay(context.Background(), packetOf(t, h, res))
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertReplayEqual(t, out)
}

// B4: a cancellation between a plan and its write stops the run before the
// write, as a cancellation, and replays equal.
func TestFixedBugCancelBeforeWriteIsACancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	// The second plan (the refund) is verified, then the caller goes away.
	critic := verifyHook(func() {
		if n++; n == 2 {
			cancel()
		}
	})
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Critic: critic}})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 1200, true)
	res, err := h.Runtime.Invoke(ctx, req, rc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Record.Rationale.Summary, "canceled") {
		t.Errorf("rationale %q, want a cancellation", res.Record.Rationale.Summary)
	}
	out, err := h.Runtime.Replay(context.Background(), packetOf(t, h, res))
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertReplayEqual(t, out)
}
