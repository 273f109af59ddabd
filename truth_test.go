package contextos_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// approvedAgain proposes the approved outcome with no further steps: what a
// planner does after its refund failed, hoping the critic looks away.
func approvedAgain() *contextos.Plan {
	p := refundPlan(1200)
	p.Steps = nil
	return p
}

// assertNotDecidedOnFailedWrite is the invariant: a run whose refund did not
// complete is never DECIDED with an outcome other than a refusal or an
// escalation.
func assertNotDecidedOnFailedWrite(t *testing.T, res *contextos.Result) {
	t.Helper()
	completed := slices.ContainsFunc(res.ToolResults, func(r *gateway.ToolResultEnvelope) bool {
		return r.CapabilityID == "adp_payments.issue_refund" && r.Status.Succeeded()
	})
	if !completed && res.Status == decision.Decided && res.Record.Outcome == "approved" {
		t.Fatalf("the refund did not complete and the run is DECIDED approved: %s", res.Record.Rationale.Summary)
	}
	if res.Status == decision.Deferred && (res.Pending == nil || res.Record.Awaiting == nil) {
		t.Fatalf("a DEFERRED result does not say what it awaits: pending %v, awaiting %v", res.Pending, res.Record.Awaiting)
	}
}

func TestFailedWriteIsNeverDecided(t *testing.T) {
	refund := func(amount int) *contextos.Plan { return refundPlan(amount) }
	for _, tc := range []struct {
		name   string
		amount int
		script func(h *contextostest.Harness)
		rc     func(rc *runcontext.RunContext)
		deny   bool // the pause is answered with a refusal
		status gateway.Status
	}{
		{name: "failed", amount: 1200, status: gateway.StatusFailed,
			script: func(h *contextostest.Harness) { h.Adapter("adp_payments").On("issue_refund").Fail("bank unavailable") }},
		{name: "failed retryable", amount: 1200, status: gateway.StatusFailed,
			script: func(h *contextostest.Harness) {
				h.Adapter("adp_payments").On("issue_refund").FailRetryable("bank busy")
			}},
		{name: "error", amount: 1200, status: gateway.StatusError,
			script: func(h *contextostest.Harness) {
				h.Adapter("adp_payments").On("issue_refund").FailWith(gateway.NewToolError(gateway.CodeInvalidInput, false, "account closed", nil))
			}},
		{name: "completed without mutations", amount: 1200, status: gateway.StatusError,
			script: func(h *contextostest.Harness) {
				h.Adapter("adp_payments").On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9"})
			}},
		{name: "rejected arguments", amount: 0, status: gateway.StatusRejected},
		{name: "blocked without delegation", amount: 1200, status: gateway.StatusBlocked,
			rc: func(rc *runcontext.RunContext) { rc.User.Delegation.Scopes = []string{"orders.read"} }},
		{name: "gate refused", amount: 4200, status: gateway.StatusBlocked, deny: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			planner := contextostest.NewPlanner(lookupPlan(), refund(tc.amount), approvedAgain()).RepeatLast()
			h := bareHarness(t, planner, nil)
			skip := ""
			if tc.script != nil {
				skip = "adp_payments"
				tc.script(h)
			}
			scriptDefaults(h, skip)
			t.Cleanup(func() { h.ReplayAll() })
			req, rc := refundRequest(t, max(tc.amount, 1), true)
			if tc.rc != nil {
				tc.rc(rc)
			}
			res := h.Invoke(req, rc)
			if tc.deny {
				contextostest.AssertPending(t, res, "GATE_FINANCE_APPROVAL")
				a := contextostest.Approval(res.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
				a.Denied = true
				var err error
				if res, err = h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}}); err != nil {
					t.Fatal(err)
				}
				if res.Status == decision.Deferred {
					t.Fatalf("a refused approval paused the run again: %+v", res.Record.Awaiting)
				}
			}
			assertNotDecidedOnFailedWrite(t, res)
			if res.Status == decision.Decided {
				t.Fatalf("status DECIDED %s after the refund ended %s", res.Record.Outcome, tc.status)
			}
			if !slices.ContainsFunc(res.ToolResults, func(r *gateway.ToolResultEnvelope) bool {
				return r.CapabilityID == "adp_payments.issue_refund" && r.Status == tc.status
			}) {
				t.Errorf("no refund result with status %s: %v", tc.status, resultStatuses(res))
			}
			stored, err := h.Decisions.List(context.Background(), decision.Filter{RunID: res.RunID})
			if err != nil || len(stored) == 0 || stored[len(stored)-1].Status == decision.Decided {
				t.Errorf("stored records %v (%v)", stored, err)
			}
		})
	}
}

// A planner told the refund failed may still refuse: that is decidable.
func TestRefusalAfterAFailedWriteIsDecided(t *testing.T) {
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), approvedAgain(), deniedPlan()), nil)
	scriptDefaults(h, "adp_payments")
	h.Adapter("adp_payments").On("issue_refund").Fail("bank unavailable")
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	contextostest.AssertOutcome(t, res, "denied")
	h.ReplayAll()
}

// A write refused before it ran (its arguments broke a constraint) is made
// good by a later successful call; a write that ran and failed is not: the
// same refund proposed again gets its stored failure (it is the same
// action, under the same idempotency key), and the run is not decided.
func TestOnlyARefusedWriteIsMadeGoodByALaterCall(t *testing.T) {
	t.Run("refused, then corrected", func(t *testing.T) {
		h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(0), refundPlan(1200)), nil)
		req, rc := refundRequest(t, 1200, true)
		res := h.Invoke(req, rc)
		contextostest.AssertStatus(t, res, decision.Decided)
		contextostest.AssertOutcome(t, res, "approved")
		contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	})
	t.Run("failed, then proposed again", func(t *testing.T) {
		h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), refundPlan(1200)).RepeatLast(), nil)
		scriptDefaults(h, "adp_payments")
		h.Adapter("adp_payments").On("issue_refund").Fail("bank unavailable").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
		req, rc := refundRequest(t, 1200, true)
		res := h.Invoke(req, rc)
		assertNotDecidedOnFailedWrite(t, res)
		contextostest.AssertStatus(t, res, decision.Escalated)
		contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
		h.ReplayAll()
	})
	t.Run("failed, then a different refund", func(t *testing.T) {
		small := refundPlan(1)
		small.Decision = nil
		h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), small, approvedAgain()).RepeatLast(), nil)
		scriptDefaults(h, "adp_payments")
		h.Adapter("adp_payments").On("issue_refund").Fail("bank unavailable").ReturnOutput(map[string]any{"transaction_id": "txn_small"}, "refund:txn_small")
		req, rc := refundRequest(t, 1200, true)
		res := h.Invoke(req, rc)
		if res.Status == decision.Decided && res.Record.Outcome == "approved" {
			t.Fatal("a 1 INR refund made good a failed 1200 refund")
		}
		h.ReplayAll()
	})
}

// The same refund proposed in two turns runs once; a caller key reused
// with other arguments names another refund.
func TestTheSameWriteRunsOnceAcrossTurns(t *testing.T) {
	again := refundPlan(1200)
	again.Decision = nil
	h := harness(t, contextostest.NewPlanner(lookupPlan(), again, refundPlan(1200)), nil)
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)

	small := keyedRefundPlan("k")
	small.Steps[0].Args["amount_inr"] = 1
	small.Decision = nil
	h2 := harness(t, contextostest.NewPlanner(lookupPlan(), small, keyedRefundPlan("k")), nil)
	res2 := h2.Invoke(refundRequest(t, 1200, true))
	contextostest.AssertCalls(t, h2.Adapter("adp_payments"), "issue_refund", 2)
	for _, r := range res2.ToolResults {
		if r.Metadata.Duplicate {
			t.Errorf("%s answered with another refund's result", r.ToolCallID)
		}
	}
}

func resultStatuses(res *contextos.Result) []string {
	var out []string
	for _, r := range res.ToolResults {
		out = append(out, r.CapabilityID+"="+string(r.Status))
	}
	return out
}

// The turn a planner sees and the turn its steps' results carry are the
// same: results of the plan made at turn n carry Turn n.
func TestStepResultsCarryTheirPlansTurn(t *testing.T) {
	planner := contextostest.NewPlanner(lookupPlan(), refundPlan(1200))
	h := harness(t, planner, nil)
	req, rc := refundRequest(t, 1200, true)
	h.Invoke(req, rc)
	reqs := planner.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d planner turns", len(reqs))
	}
	for _, r := range reqs[1].Results {
		if r.Turn != 0 {
			t.Errorf("the lookup plan was made at turn 0; its result %s carries turn %d", r.Step.CapabilityID, r.Turn)
		}
	}
}

func TestDeferredAlwaysSaysWhatItAwaits(t *testing.T) {
	t.Run("decided without the gated write", func(t *testing.T) {
		// The gate is active (4200) and the planner skips the refund: the
		// record cannot be DECIDED, and it is not a pause either.
		p := refundPlan(4200)
		p.Steps = nil
		h := harness(t, contextostest.NewPlanner(lookupPlan(), p).RepeatLast(), nil)
		req, rc := refundRequest(t, 4200, true)
		res := h.Invoke(req, rc)
		assertNotDecidedOnFailedWrite(t, res)
		if res.Status != decision.Escalated {
			t.Fatalf("status %s, want ESCALATED", res.Status)
		}
		if !slices.ContainsFunc(res.Record.Problems, func(p decision.Problem) bool { return p.Code == decision.CodeApprovalMissing }) {
			t.Errorf("the record does not name the missing approval: %+v", res.Record.Problems)
		}
	})
	t.Run("rejected call under an active gate", func(t *testing.T) {
		h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(0)).RepeatLast(), nil)
		req, rc := refundRequest(t, 4200, true)
		res := h.Invoke(req, rc)
		assertNotDecidedOnFailedWrite(t, res)
		if res.Status == decision.Deferred {
			t.Fatal("a rejected call paused the run")
		}
	})
	t.Run("paused run resumes", func(t *testing.T) {
		h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), nil)
		req, rc := refundRequest(t, 4200, true)
		res := h.Invoke(req, rc)
		contextostest.AssertPending(t, res, "GATE_FINANCE_APPROVAL")
		if res.Record.Awaiting == nil || res.Record.Awaiting.GateID != res.Pending.GateID {
			t.Fatalf("awaiting %+v", res.Record.Awaiting)
		}
		contextostest.AssertStatus(t, h.Approve(res, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}), decision.Decided)
	})
}

func TestRecordThatFailsItsSpecIsNeverDecided(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(d *contextos.DecisionProposal)
		problem decision.Code
	}{
		{"unresolvable evidence ref", func(d *contextos.DecisionProposal) {
			d.EvidenceRefs = append(d.EvidenceRefs, "kg:order:ord_999#made_up")
		}, decision.CodeEvidenceUnknown},
		{"subject outside the CEID namespaces", func(d *contextos.DecisionProposal) { d.SubjectIDs = append(d.SubjectIDs, "employee:e_1") }, decision.CodeSubjectNamespace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := refundPlan(1200)
			tc.mutate(bad.Decision)
			again := approvedAgain()
			tc.mutate(again.Decision)
			planner := contextostest.NewPlanner(lookupPlan(), bad, again).RepeatLast()
			h := harness(t, planner, nil)
			req, rc := refundRequest(t, 1200, true)
			res := h.Invoke(req, rc)
			contextostest.AssertStatus(t, res, decision.Escalated)
			if !slices.ContainsFunc(res.Record.Problems, func(p decision.Problem) bool { return p.Code == tc.problem }) {
				t.Errorf("problems %+v do not name %s", res.Record.Problems, tc.problem)
			}
			reqs := planner.Requests()
			if len(reqs) != 2+rc.RunBudget.MaxReplanAttempts || !strings.Contains(reqs[2].ReplanReason, string(tc.problem)) {
				t.Errorf("the planner was not asked to fix the record: %d turns", len(reqs))
			}
		})
		t.Run(tc.name+" fixed on replan", func(t *testing.T) {
			bad := refundPlan(1200)
			tc.mutate(bad.Decision)
			h := harness(t, contextostest.NewPlanner(lookupPlan(), bad, approvedAgain()), nil)
			req, rc := refundRequest(t, 1200, true)
			res := h.Invoke(req, rc)
			contextostest.AssertStatus(t, res, decision.Decided)
			if len(res.Record.Problems) != 0 {
				t.Errorf("a decided record has problems %+v", res.Record.Problems)
			}
		})
	}
}

// Every policy decision a tool call is bound to, read-only calls included,
// is in the record.
func TestToolCallsPolicyDecisionsAreRecorded(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	for _, tr := range res.ToolResults {
		if tr.PolicyDecisionID == nil {
			t.Errorf("%s is bound to no policy decision", tr.CapabilityID)
			continue
		}
		if !slices.ContainsFunc(res.Record.PolicyDecisions, func(p decision.PolicyDecisionRef) bool { return p.PolicyDecisionID == *tr.PolicyDecisionID }) {
			t.Errorf("%s's %s is not in the record's policy decisions", tr.CapabilityID, *tr.PolicyDecisionID)
		}
	}
}

// The refund runs, and then the caller's context is cancelled or its
// deadline passes: the run still ends with a stored record and a resumable
// checkpoint.
//
// Each case runs in a synctest bubble: the 50 ms deadline is virtual time,
// which passes only once the run is blocked in the refund waiting for it,
// so the refund always runs before the deadline, however loaded the
// machine.
func TestSideEffectThenCancellationIsRecorded(t *testing.T) {
	for _, deadline := range []bool{false, true} {
		name := "canceled"
		if deadline {
			name = "deadline"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				after := func() { cancel() }
				if deadline {
					var dcancel context.CancelFunc
					ctx, dcancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
					defer dcancel()
					after = func() { <-ctx.Done() }
				}
				h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), approvedAgain()), nil)
				scriptDefaults(h, "adp_payments")
				h.Adapter("adp_payments").On("issue_refund").When(func(map[string]any) bool { after(); return true }).
					ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
				req, rc := refundRequest(t, 1200, true)
				res, err := h.Runtime.Invoke(ctx, req, rc)
				if err != nil {
					t.Fatalf("Invoke after the refund ran: %v (the refund is left without a record)", err)
				}
				contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
				if res.Status != decision.Escalated {
					t.Errorf("status %s, want ESCALATED", res.Status)
				}
				recs, _ := h.Decisions.List(context.Background(), decision.Filter{RunID: res.RunID})
				if len(recs) == 0 || !slices.ContainsFunc(recs[len(recs)-1].EvidenceRefs, func(ref string) bool { return strings.HasPrefix(ref, "tool:adp_payments.issue_refund:") }) {
					t.Errorf("the stored record does not carry the refund: %+v", recs)
				}
				assertResumesWithoutRefundingAgain(t, h, res.RunID)
				h.ReplayAll()
			})
		})
	}
}

func TestInvalidPlannerUsageStopsTheRun(t *testing.T) {
	for _, u := range []contextos.PlanUsage{{Tokens: -5}, {CostCents: -1}, {CostCents: nan()}, {CostCents: inf()}, {CostCents: 1e300}, {Tokens: 1 << 40}} {
		p := lookupPlan()
		p.Usage = u
		// A PlannerFunc: NaN has no JSON form for the scripted planner.
		h := harness(t, contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) { return p, nil }), nil)
		req, rc := refundRequest(t, 1200, true)
		res := h.Invoke(req, rc)
		if res.Status != decision.Escalated || len(h.Transcript.Results()) != 0 {
			t.Errorf("usage %+v: status %s, %d tool results", u, res.Status, len(h.Transcript.Results()))
		}
		if !strings.Contains(res.Record.Rationale.Summary, "invalid_usage") && !strings.Contains(res.Record.Rationale.Summary, "budget_exceeded") {
			t.Errorf("usage %+v: rationale %q", u, res.Record.Rationale.Summary)
		}
		if res.Record.BudgetUsage.CostUSDCents < 0 || res.Record.BudgetUsage.Tokens < 0 {
			t.Errorf("usage %+v: recorded usage %+v", u, res.Record.BudgetUsage)
		}
	}
}

// The planner runs in a synctest bubble: time is virtual, so the cut-off
// is exact and holds on a loaded machine.
func TestPlannerIgnoringItsContextIsCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		slow := contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
			<-release // ignores ctx
			return refundPlan(1200), nil
		})
		h := harness(t, slow, nil)
		req, rc := refundRequest(t, 1200, true)
		const planTimeout = 20 * time.Millisecond
		rc.RunBudget.PlanTimeoutMS = planTimeout.Milliseconds()
		start := time.Now()
		res := h.Invoke(req, rc)
		// The run waits LateTurnGrace more for the abandoned turn's usage.
		if elapsed := time.Since(start); elapsed != planTimeout+contextos.LateTurnGrace {
			t.Errorf("the run waited %v for a planner that ignores its context, want plan_timeout_ms (%v) and the grace (%v)", elapsed, planTimeout, contextos.LateTurnGrace)
		}
		contextostest.AssertStatus(t, res, decision.Escalated)
		if s := res.Record.Rationale.Summary; !strings.Contains(s, "plan_timeout") || !strings.Contains(s, "usage is unknown") {
			t.Errorf("rationale %q", res.Record.Rationale.Summary)
		}
	})
}

func TestInvokingARunAgain(t *testing.T) {
	t.Run("ended", func(t *testing.T) {
		h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
		req, rc := refundRequest(t, 1200, true)
		first := h.Invoke(req, rc)
		again := h.Invoke(req, rc)
		contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
		if again.Status != first.Status || again.Record.RecordHash != first.Record.RecordHash || again.ReplayPacketID != first.ReplayPacketID ||
			len(again.ToolResults) != len(first.ToolResults) || again.Compiled.Hash() != first.Compiled.Hash() {
			t.Errorf("the second Invoke did not return the stored result: %+v", again)
		}
	})
	t.Run("paused", func(t *testing.T) {
		h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), nil)
		req, rc := refundRequest(t, 4200, true)
		first := h.Invoke(req, rc)
		again := h.Invoke(req, rc)
		contextostest.AssertPending(t, again, "GATE_FINANCE_APPROVAL")
		if again.Pending.ActionDigest != first.Pending.ActionDigest {
			t.Error("the stored pause differs")
		}
		contextostest.AssertStatus(t, h.Approve(again, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}), decision.Decided)
	})
	t.Run("in flight", func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		planner := contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
			close(entered)
			<-release
			return deniedPlan(), nil
		})
		h := harness(t, planner, nil)
		req, rc := refundRequest(t, 1200, false)
		done := make(chan error, 1)
		go func() { _, err := h.Runtime.Invoke(context.Background(), req, rc); done <- err }()
		<-entered
		_, err := h.Runtime.Invoke(context.Background(), req, rc)
		close(release)
		if !errors.Is(err, contextos.ErrRunInProgress) {
			t.Errorf("second Invoke while the first runs: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("another request under the same id", func(t *testing.T) {
		h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
		req, rc := refundRequest(t, 1200, true)
		h.Invoke(req, rc)
		req2, rc2 := refundRequest(t, 1300, true)
		if _, err := h.Runtime.Invoke(context.Background(), req2, rc2); !errors.Is(err, contextos.ErrRequestConflict) {
			t.Errorf("Invoke = %v, want ErrRequestConflict", err)
		}
	})
	t.Run("not started", func(t *testing.T) {
		h := harness(t, contextostest.NewPlanner(deniedPlan()), nil)
		req, rc := refundRequest(t, 1200, false)
		req.ContextPackRefs = []string{"ctxpack.support@9.9.9"}
		if _, err := h.Runtime.Invoke(context.Background(), req, rc); err == nil {
			t.Fatal("an unknown pack ran")
		}
		req.ContextPackRefs = []string{"ctxpack.support@1.0.0"}
		// A fixed request under the same id starts the run.
		res := h.Invoke(req, rc)
		contextostest.AssertOutcome(t, res, "denied")
	})
}

// assertResumesWithoutRefundingAgain checks a hard-stopped run after its
// refund ran: its checkpoint is resumable (stopped, not claimed), and the
// resume ends it DECIDED with the one refund it already made.
func assertResumesWithoutRefundingAgain(t *testing.T, h *contextostest.Harness, runID string) {
	t.Helper()
	cp, err := loadState(context.Background(), h.Checkpoints, runID)
	if err != nil || cp.Stopped == "" || cp.Active {
		t.Fatalf("checkpoint %+v (%v) is not resumable", cp, err)
	}
	done, err := h.Runtime.Resume(context.Background(), runID, contextos.ResumeInput{})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, done, decision.Decided)
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
}

func nan() float64 { var z float64; return z / z }
func inf() float64 { return 1 / zero }

var zero float64
