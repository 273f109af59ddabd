package temporalrun_test

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/temporalrun"
)

// The update's validator refuses an approval that does not answer the
// pending request, naming the field, so it never enters the history:
// the run goes on waiting, and the valid approval sent after it finishes
// the run DECIDED with one refund.
func TestValidatorRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*temporalrun.Approval)
		after time.Duration // when the refused approval is sent
		field string
	}{
		{"another action digest", func(a *temporalrun.Approval) { a.ActionDigest = "sha256:" + strings.Repeat("0", 64) }, time.Hour, "action_digest"},
		{"wrong role", func(a *temporalrun.Approval) { a.ApproverRole = "support_agent" }, time.Hour, "approver_role"},
		{"wrong tenant", func(a *temporalrun.Approval) { a.TenantID = "tenant_other" }, time.Hour, "tenant_id"},
		{"wrong gate", func(a *temporalrun.Approval) { a.GateID = "GATE_OTHER" }, time.Hour, "gate_id"},
		{"no approval id", func(a *temporalrun.Approval) { a.ApprovalID = " " }, time.Hour, "approval_id"},
		{"no approver", func(a *temporalrun.Approval) { a.Approver = "" }, time.Hour, "approver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w := newWorld(t, dir, 0)
			env := skipEnv(t, w)
			var refused, valid error
			approveAt(t, env, tc.after, "apr_bad", tc.edit, &refused)
			approveAt(t, env, tc.after+time.Minute, "apr_good", nil, &valid)
			env.ExecuteWorkflow(temporalrun.WorkflowName, input(t, "val", 4200, start))
			out := result(t, env)
			if refused == nil || !strings.Contains(refused.Error(), "approval refused: "+tc.field+":") {
				t.Fatalf("validator = %v, want a refusal naming %s", refused, tc.field)
			}
			if valid != nil {
				t.Fatalf("the valid approval was refused: %v", valid)
			}
			if out.Status != decision.Decided || out.Record.Outcome != "approved" || len(refunds(t, dir)) != 1 {
				t.Fatalf("run = %s %s, refunds %d; want DECIDED approved, 1", out.Status, out.Record.Outcome, len(refunds(t, dir)))
			}
			// The approval the record names is the valid one.
			if s := approvalIDs(out.Record); s != "apr_good" {
				t.Errorf("record approvals = %q, want apr_good", s)
			}
		})
	}
}

func approvalIDs(r *decision.Record) string {
	var ids []string
	for _, a := range r.Approvals {
		ids = append(ids, a.ApprovalID)
	}
	return strings.Join(ids, ",")
}

// An approval arriving after the gate's TTL finds the run gone on: the
// timer ended the wait, the refund was refused approval_timeout, and the
// late approval is refused, so it never enters the history.
func TestLateApprovalRefused(t *testing.T) {
	dir := t.TempDir()
	w := newWorld(t, dir, 0)
	env := skipEnv(t, w)
	accepted := false
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(temporalrun.UpdateApprove, "late", &testsuite.TestUpdateCallback{OnAccept: func() { accepted = true }, OnReject: func(error) {}, OnComplete: func(any, error) {}},
			temporalrun.Approval{ApprovalID: "apr_late", GateID: financeGate, ApproverRole: financeRole, Approver: "user_finance_lead_77", TenantID: tenant})
	}, 2*time.Hour+time.Second)
	env.ExecuteWorkflow(temporalrun.WorkflowName, input(t, "late", 4200, start))
	out := result(t, env)
	if !refundRefused(out, gateway.CodeApprovalTimeout) {
		t.Fatalf("no refund refused approval_timeout")
	}
	if len(refunds(t, dir)) != 0 {
		t.Fatal("a refund was issued")
	}
	if accepted {
		t.Fatal("the late approval was accepted")
	}
	assertReplayEqual(t, w, out)
}

// An approver who denies: the update is accepted, the refund is refused
// approval_denied and never issued, and the run decides without it.
func TestDeniedApproval(t *testing.T) {
	dir := t.TempDir()
	w := newWorld(t, dir, 0)
	env := skipEnv(t, w)
	var rejected error
	approveAt(t, env, time.Hour, "apr_no", func(a *temporalrun.Approval) { a.Denied = true }, &rejected)
	env.ExecuteWorkflow(temporalrun.WorkflowName, input(t, "deny", 4200, start))
	out := result(t, env)
	if rejected != nil {
		t.Fatalf("a denial was refused by the validator: %v", rejected)
	}
	if !refundRefused(out, gateway.CodeApprovalDenied) {
		t.Fatalf("no refund refused approval_denied in the run's results")
	}
	if n := len(refunds(t, dir)); n != 0 {
		t.Errorf("refunds = %d, want 0", n)
	}
	if out.Status == decision.Decided && out.Record.Outcome == "approved" {
		t.Errorf("run = DECIDED approved after a denial")
	}
	assertReplayEqual(t, w, out)
}

func refundRefused(out *temporalrun.Output, code string) bool {
	for _, r := range out.ToolResults {
		if r.CapabilityID == "adp_payments.issue_refund" && r.Error != nil && r.Error.Code == code {
			return true
		}
	}
	return false
}

// Cancelling the workflow while the run awaits its approval ends the run
// ESCALATED with its record in the host's store; nothing is refunded.
func TestCancelWhilePaused(t *testing.T) {
	dir := t.TempDir()
	w := newWorld(t, dir, 0)
	env := skipEnv(t, w)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Hour)
	env.ExecuteWorkflow(temporalrun.WorkflowName, input(t, "cancel", 4200, start))
	out := result(t, env)
	if out.Status != decision.Escalated {
		t.Fatalf("run = %s %s, want ESCALATED", out.Status, out.Record.Outcome)
	}
	if !strings.Contains(out.Record.Rationale.Summary, "cancel") {
		t.Errorf("record rationale = %q, want the cancellation", out.Record.Rationale.Summary)
	}
	recs, err := w.decisions.List(t.Context(), decision.Filter{RunID: out.RunID, Status: decision.Escalated})
	if err != nil || len(recs) != 1 {
		t.Fatalf("host's ESCALATED records = %d, %v; want 1", len(recs), err)
	}
	if n := len(refunds(t, dir)); n != 0 {
		t.Errorf("refunds = %d, want 0", n)
	}
}
