package contextos_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

// A run paused before issue 15 narrowed request_id, whose request id was
// valid then ("req_acme/4711": the old grammar allowed / and @), resumes
// after it: Resume validates the stored request again and must accept it.
func TestPausedRunWithPreIssue15RequestIDResumes(t *testing.T) {
	ctx := context.Background()
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), nil)
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 4200, true)
	paused := h.Invoke(req, rc)
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	cp, err := loadState(ctx, h.Checkpoints, paused.RunID)
	if err != nil {
		t.Fatal(err)
	}
	cp.Request.RequestID = "req_acme/4711" // as the previous version stored it
	if err := saveState(ctx, h.Checkpoints, cp); err != nil {
		t.Fatal(err)
	}
	a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
	res, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
	if err != nil {
		t.Fatalf("a paused run whose request_id was valid when it paused cannot be resumed: %v", err)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
}

// A request with a pre-issue-15 request id still runs, and its packet
// replays equal.
func TestPreIssue15RequestIDRunsAndReplays(t *testing.T) {
	ctx := context.Background()
	for _, id := range []string{"req_acme/4711", "req_user@acme.example"} {
		h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
		scriptDefaults(h, "")
		req, rc := refundRequest(t, 1200, true)
		req.RequestID = id
		res := h.Invoke(req, rc)
		contextostest.AssertStatus(t, res, decision.Decided)
		p, err := h.Replays.Get(ctx, res.ReplayPacketID)
		if err != nil {
			t.Fatal(err)
		}
		out, err := h.Runtime.Replay(ctx, p)
		if err != nil {
			t.Fatalf("%s: replay: %v", id, err)
		}
		if out.Status != replay.ReplayEqual {
			t.Errorf("%s: replay = %s: %+v", id, out.Status, out.Diffs)
		}
	}
}
