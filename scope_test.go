package contextos_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// keyedRefundPlan is the refund with a caller-chosen idempotency key.
func keyedRefundPlan(key string) *contextos.Plan {
	p := refundPlan(1200)
	p.Steps[0].IdempotencyKey = key
	return p
}

// Two tenants (with the same host-chosen run id) and two runs of one
// tenant that pick the same idempotency key each get their own refund.
func TestIdempotencyKeysAreScopedToTenantAndRun(t *testing.T) {
	packB := bytes.ReplaceAll(bytes.ReplaceAll(readTestdata(t, "ctxpack.support-1.0.0.json"), []byte("tenant_acme_prod"), []byte("tenant_beta")),
		[]byte(`"ctxpack.support"`), []byte(`"ctxpack.support_beta"`))
	h := contextostest.New(t, contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
		if req.Turn == 0 {
			return lookupPlan(), nil
		}
		return keyedRefundPlan("refund-ord_881"), nil
	}), [][]byte{readTestdata(t, "ctxpack.support-1.0.0.json"), packB}, &contextostest.Options{
		Runtime: contextos.Options{Evidence: evidence(t), ReplaySampleRate: 1},
		Scopes:  map[string][]string{"adp_payments.issue_refund": {"payments.refund"}},
	})
	scriptDefaults(h, "adp_payments")
	h.Adapter("adp_payments").On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_acme"}, "refund:txn_acme").
		ReturnOutput(map[string]any{"transaction_id": "txn_beta"}, "refund:txn_beta").
		ReturnOutput(map[string]any{"transaction_id": "txn_acme_2"}, "refund:txn_acme_2")

	reqA, rcA := refundRequest(t, 1200, true)
	resA := h.Invoke(reqA, rcA)

	// Tenant B: the same request id and key, its own pack. Under tenant
	// A's host-chosen run id it is refused before any work (runs are
	// stored by run id); under its own (derived) run id it runs.
	reqB, rcB := retenanted(t, "tenant_beta")
	reqB.ContextPackRefs = []string{"ctxpack.support_beta@1.0.0"}
	if _, err := h.Runtime.Invoke(context.Background(), reqB, rcB); !errors.Is(err, contextos.ErrRequestConflict) {
		t.Fatalf("tenant B under tenant A's run id: %v", err)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	rcB.RunID = ""
	resB := h.Invoke(reqB, rcB)

	reqC, rcC := refundRequest(t, 1200, true)
	reqC.RequestID, rcC.RunID = "req_second_run", "run_second_run_0001"
	resC := h.Invoke(reqC, rcC)

	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 3)
	txn := func(res *contextos.Result) any {
		for _, r := range res.ToolResults {
			if r.CapabilityID == "adp_payments.issue_refund" {
				return r.Output["transaction_id"]
			}
		}
		return nil
	}
	if txn(resA) != "txn_acme" || txn(resB) != "txn_beta" || txn(resC) != "txn_acme_2" {
		t.Errorf("transactions: A %v, B %v, C %v: a run got another's result", txn(resA), txn(resB), txn(resC))
	}
	for _, res := range []*contextos.Result{resA, resB, resC} {
		contextostest.AssertStatus(t, res, decision.Decided)
	}
	h.ReplayAll()
}

// An approval without an approver or an id, or by the requesting user, is
// refused before the refund runs; a used approval is in the record.
func TestApprovalsAreCheckedAndRecorded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(a *gateway.Approval)
		ok     bool
	}{
		{"empty approver", func(a *gateway.Approval) { a.Approver = "" }, false},
		{"empty approval id", func(a *gateway.Approval) { a.ApprovalID = "" }, false},
		{"requesting user approves", func(a *gateway.Approval) { a.Approver = "usr_771" }, false},
		{"finance lead approves", func(*gateway.Approval) {}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200), approvedAgain()).RepeatLast(), nil)
			req, rc := refundRequest(t, 4200, true)
			res := h.Invoke(req, rc)
			contextostest.AssertPending(t, res, "GATE_FINANCE_APPROVAL")
			a := contextostest.Approval(res.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
			tc.mutate(&a)
			done, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
			if err != nil {
				t.Fatal(err)
			}
			assertNotDecidedOnFailedWrite(t, done)
			if !tc.ok {
				contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
				if done.Status == decision.Decided || done.Status == decision.Deferred {
					t.Errorf("status %s after a refused approval", done.Status)
				}
				return
			}
			contextostest.AssertStatus(t, done, decision.Decided)
			if len(done.Record.Approvals) != 1 || done.Record.Approvals[0].ApprovalID != a.ApprovalID || done.Record.Approvals[0].Approver != a.Approver {
				t.Errorf("record approvals %+v, used %s", done.Record.Approvals, a.ApprovalID)
			}
		})
	}
}

// A tool's reported cost is charged; one that takes the run over its cost
// budget stops it (after the call, which ran), and the largest cost an
// outcome may report (2^53−1 cents) does not wrap to a negative usage.
func TestToolCostsAreChargedAndStopTheRun(t *testing.T) {
	for _, cost := range []float64{30, 1<<53 - 1} {
		h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), approvedAgain()), nil)
		scriptDefaults(h, "adp_orders")
		h.Adapter("adp_orders").On("lookup").Return(&gateway.Outcome{Output: map[string]any{"order_id": "ord_881"}, CostCents: cost})
		req, rc := refundRequest(t, 1200, true)
		res := h.Invoke(req, rc)
		contextostest.AssertStatus(t, res, decision.Escalated)
		if !strings.Contains(res.Record.Rationale.Summary, "budget_exceeded") {
			t.Errorf("cost %g: rationale %q", cost, res.Record.Rationale.Summary)
		}
		if u := res.Record.BudgetUsage.CostUSDCents; u < rc.RunBudget.MaxCostCents {
			t.Errorf("cost %g: recorded cost %g is not what was spent", cost, u)
		}
		contextostest.AssertCalls(t, h.Adapter("adp_policy"), "eval", 0)
		h.ReplayAll()
	}
}

// slowEvidence ignores its context for a while, as a hung source does.
type slowEvidence struct {
	compiler.StaticEvidence
	release chan struct{}
}

func (s slowEvidence) Evidence(ctx context.Context, q compiler.EvidenceQuery) ([]compiler.EvidenceItem, error) {
	<-s.release
	return s.StaticEvidence.Evidence(ctx, q)
}

// The compile stage is bounded by the run's wall clock. It runs in a
// synctest bubble: time is virtual, so the bound is exact and holds on a
// loaded machine.
func TestCompileIsBoundedByTheWallClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		h := bareHarness(t, contextostest.NewPlanner(deniedPlan()), &contextostest.Options{Runtime: contextos.Options{
			Evidence: slowEvidence{evidence(t), release}, Now: time.Now}})
		req, rc := refundRequest(t, 1200, false)
		const wallClock = 50 * time.Millisecond
		rc.RunBudget.WallClockMS = wallClock.Milliseconds()
		start := time.Now()
		_, err := h.Runtime.Invoke(context.Background(), req, rc)
		if err == nil || !strings.Contains(err.Error(), "wall_clock") {
			t.Fatalf("Invoke = %v, want a wall-clock budget error", err)
		}
		if elapsed := time.Since(start); elapsed > wallClock {
			t.Fatalf("the compile ran %v, past the wall clock of %v", elapsed, wallClock)
		}
	})
}

// retenanted is the 1200 refund request and run context of another tenant.
func retenanted(t *testing.T, tenant string) (*runcontext.InvokeRequest, *runcontext.RunContext) {
	t.Helper()
	swap := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("tenant_acme_prod"), []byte(tenant)) }
	req, err := runcontext.DecodeInvokeRequest(swap(readTestdata(t, "invoke.support-refund.json")))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(swap(readTestdata(t, "run-context.support.json")))
	if err != nil {
		t.Fatal(err)
	}
	req.Input.Context["refund_amount"] = 1200
	req.Input.Context["identity_verified"] = true
	return req, rc
}
