package contextos_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// A resume budget replaces the run budget, but an optional limit it leaves
// unset (0) keeps the run's value: a 1 h long_running session resumed 90 min
// in, with a budget that raises only max_tool_calls, is over (ESCALATED, no
// refund issued), not lifted to the 4 h default. Raising the session limit
// is explicit. The checkpoint's run context and the session_expired stop
// show the limit in force.
func TestResumeBudgetKeepsUnsetLimits(t *testing.T) {
	tests := []struct {
		name        string
		session     int64 // the resume budget's max_session_duration_ms
		wantStatus  decision.Status
		wantSession int64
		wantRefunds int
	}{
		{"session limit unset keeps the run's 1h", 0, decision.Escalated, time.Hour.Milliseconds(), 0},
		{"session limit raised explicitly", (3 * time.Hour).Milliseconds(), decision.Decided, (3 * time.Hour).Milliseconds(), 1},
		{"session limit lowered explicitly", (30 * time.Minute).Milliseconds(), decision.Escalated, (30 * time.Minute).Milliseconds(), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clock := newFakeClock()
			h, saves := longHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), clock, nil)
			scriptDefaults(h, "")
			req, rc := longRequest(t, 4200, time.Hour)
			rc.RunBudget.PlanTimeoutMS = 5000
			rc.RunBudget.MaxPayloadBytes = 64 << 10
			paused := h.Invoke(req, rc)
			contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
			clock.Advance(90 * time.Minute) // within the approval request's two-hour TTL
			budget := rc.RunBudget
			budget.MaxToolCalls += 5
			budget.MaxSessionDurationMS = tc.session
			budget.PlanTimeoutMS, budget.MaxPayloadBytes = 0, 0 // unset: keep the run's
			a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, clock.Now())
			res, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}, Budget: &budget})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.wantStatus {
				t.Errorf("resumed 90 minutes into a session ended %s, want %s", res.Status, tc.wantStatus)
			}
			if n := len(h.Adapter("adp_payments").Calls()); n != tc.wantRefunds {
				t.Errorf("issue_refund calls = %d, want %d", n, tc.wantRefunds)
			}
			if tc.wantStatus == decision.Escalated {
				if want := "max_session_duration_ms " + strconv.FormatInt(tc.wantSession, 10); !strings.Contains(res.Record.Rationale.Summary, "session_expired") || !strings.Contains(res.Record.Rationale.Summary, want) {
					t.Errorf("record does not name the session limit in force (%s): %q", want, res.Record.Rationale.Summary)
				}
			}
			cp, err := loadState(ctx, saves, paused.RunID)
			if err != nil {
				t.Fatal(err)
			}
			got := cp.Run.RunBudget
			if got.MaxSessionDurationMS != tc.wantSession || got.PlanTimeoutMS != 5000 || got.MaxPayloadBytes != 64<<10 || got.MaxToolCalls != budget.MaxToolCalls {
				t.Errorf("checkpoint budget = session %d, plan timeout %d, payload %d, tool calls %d; want %d, 5000, %d, %d",
					got.MaxSessionDurationMS, got.PlanTimeoutMS, got.MaxPayloadBytes, got.MaxToolCalls, tc.wantSession, 64<<10, budget.MaxToolCalls)
			}
		})
	}
}

// A run that never set a session limit keeps the default one when a
// resume budget leaves it unset too.
func TestResumeBudgetUnsetSessionKeepsDefault(t *testing.T) {
	clock := newFakeClock()
	h, _ := longHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), clock, nil)
	scriptDefaults(h, "")
	req, rc := longRequest(t, 4200, 0)
	paused := h.Invoke(req, rc)
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	clock.Advance(time.Duration(runcontext.DefaultRunBudget().MaxSessionDurationMS)*time.Millisecond + time.Minute)
	budget := rc.RunBudget
	budget.MaxToolCalls += 5
	a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, clock.Now())
	res, err := h.Runtime.Resume(context.Background(), paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}, Budget: &budget})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != decision.Escalated || len(h.Adapter("adp_payments").Calls()) != 0 {
		t.Errorf("a session past the default limit ended %s with %d refunds", res.Status, len(h.Adapter("adp_payments").Calls()))
	}
}
