package contextos_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

// escalatingPlanner looks the order up, refunds the request's amount,
// and escalates once the refund was refused.
func escalatingPlanner() contextos.Planner {
	return contextos.PlannerFunc(func(_ context.Context, r *contextos.PlanRequest) (*contextos.Plan, error) {
		switch r.Turn {
		case 0:
			return lookupPlan(), nil
		case 1:
			amount, _ := r.Request.Input.Context["refund_amount"].(int)
			return refundPlan(amount), nil
		}
		return &contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "escalated",
			Rationale: "The refund was not approved.", Confidence: 0.9}}, nil
	})
}

// An approver's refusal through the Go API is in the run's record as an
// approval is: the gate, the approver and role, the paused call, the
// evidence snapshot, the time, decision "denied" and the reason with its
// card number redacted. It is not the gate's approval (the refund is not
// made; the run ends as its planner decides), it is in the stored
// record, and the run replays equal.
func TestDenialIsInTheRecord(t *testing.T) {
	ctx := context.Background()
	h := bareHarness(t, escalatingPlanner(), nil)
	scriptDefaults(h, "")
	paused := h.Invoke(requestFor(t, "req_denied_a", 4200))
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	if len(paused.Record.Approvals) != 0 {
		t.Fatalf("the paused run's record lists approvals: %+v", paused.Record.Approvals)
	}
	at := contextostest.FixedTime().Add(10 * time.Minute)
	a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, at)
	a.Denied, a.Reason = true, "  card "+cardNumber+" is not the customer's  "
	res, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != decision.Escalated {
		t.Fatalf("denied refund ended %s, want ESCALATED", res.Status)
	}
	want := decision.Approval{GateID: "GATE_FINANCE_APPROVAL", Approver: "user_finance_lead_77", ApproverRole: "finance_lead", ApprovalModeEffective: "destructive",
		EvidenceSnapshotHash: paused.Pending.EvidenceSnapshotHash, DecidedAt: "2026-05-04T09:41:00Z", ToolCallID: paused.Pending.ToolCallID, ApprovalID: a.ApprovalID,
		Decision: decision.ApprovalDenied, Reason: "card [REDACTED] is not the customer's"}
	if len(res.Record.Approvals) != 1 || !jsonEqual(t, res.Record.Approvals[0], want) {
		t.Fatalf("record approvals %+v\nwant [%+v]", res.Record.Approvals, want)
	}
	for _, r := range res.ToolResults {
		if r.CapabilityID == "adp_payments.issue_refund" && r.Status != gateway.StatusBlocked {
			t.Errorf("the denied refund's call is %s, want blocked", r.Status)
		}
	}
	stored, err := h.Decisions.Get(ctx, res.Record.RecordID)
	if err != nil || len(stored.Approvals) != 1 || !stored.Approvals[0].Denied() {
		t.Fatalf("stored record approvals %+v, %v", stored, err)
	}
	p, err := h.Runtime.Capture(ctx, res.RunID, replay.SourceOperatorCorrection)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := h.Runtime.Replay(ctx, p)
	if err != nil || rep.Status != replay.ReplayEqual {
		t.Fatalf("replay of the denied run: %+v, %v", rep, err)
	}
	if b, _ := json.Marshal(p); strings.Contains(string(b), cardNumber) {
		t.Errorf("the replay packet holds the card number")
	}
}
