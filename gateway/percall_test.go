package gateway_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// Per-call forms of the support pack's finance control, each over the
// call's own arguments.
var (
	// gateWhenOverArgs: the gate's when reads the refund's amount.
	gateWhenOverArgs = func(p *pack.Pack) {
		p.PolicyLayer.ApprovalGates[0].When = json.RawMessage(`{">":[{"var":"tool.args.amount_inr"},3000]}`)
	}
	// gateWhenOverArgsDefault: the same with a default for calls without
	// the argument.
	gateWhenOverArgsDefault = func(p *pack.Pack) {
		p.PolicyLayer.ApprovalGates[0].When = json.RawMessage(`{">":[{"var":["tool.args.amount_inr",0]},3000]}`)
	}
	// ruleOverArgs: the high-value rule reads the refund's amount and
	// names the gate; the gate's own when (the seed's, over the request's
	// refund_amount) does not hold for a request of 1200.
	ruleOverArgs = func(p *pack.Pack) {
		p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].If = json.RawMessage(`{"and":[{"==":[{"var":"user.role"},"support_agent"]},{">":[{"var":"tool.args.amount_inr"},3000]}]}`)
	}
	// ruleAppliesToRefunds: the high-value rule applies to refund calls
	// only (applies_to over tool.capability_id) and reads their amount.
	ruleAppliesToRefunds = func(p *pack.Pack) {
		r := &p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1]
		r.AppliesTo = map[string]any{"tool.capability_id": "adp_payments.issue_refund"}
		r.If = json.RawMessage(`{">":[{"var":"tool.args.amount_inr"},3000]}`)
	}
)

func editPack(edits ...func(*pack.Pack)) fixtureOption {
	return func(f *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		f.editPack = func(p *pack.Pack) {
			for _, e := range edits {
				e(p)
			}
		}
	}
}

// A gate made active by the call itself — its when over tool.args, or a
// rule over tool.args that names it — holds that call exactly as a
// compile-time gate does: the request says 1200 (the gate is inactive at
// compile time), the planner asks for more, the call pauses, nothing
// reaches the adapter, and the approval bound to the action lets it run
// once. A refund below the threshold and a lookup are not held.
func TestPerCallGateHoldsTheCall(t *testing.T) {
	t.Parallel()
	forms := []struct {
		name string
		edit func(*pack.Pack)
	}{
		{"gate when over args", gateWhenOverArgs},
		{"gate when over args with a default", gateWhenOverArgsDefault},
		{"rule over args naming the gate", ruleOverArgs},
		{"rule applying to refund calls", ruleAppliesToRefunds},
	}
	amounts := []struct {
		name   string
		amount float64
		held   bool
	}{
		{"refund of 4200", 4200, true},
		{"prompt-injected refund of 50000", 50000, true},
		{"refund of 1200", 1200, false},
	}
	for _, form := range forms {
		for _, a := range amounts {
			t.Run(form.name+"/"+a.name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, lowValue, editPack(form.edit))
				if len(f.cc.RuntimeControls.ApprovalGatesActive) != 0 {
					t.Fatalf("the gate is active at compile time: %v", f.cc.RuntimeControls.ApprovalGatesActive)
				}
				if res, err := f.run.Call(ctx, lookupCall()); err != nil || res.Status != gateway.StatusOK {
					t.Fatalf("lookup = %s %+v, %v", res.Status, res.Error, err)
				}
				res, err := f.run.Call(ctx, refundCall(a.amount))
				if err != nil {
					t.Fatal(err)
				}
				if !a.held {
					if res.Status != gateway.StatusCompleted || res.Metadata.ApprovalGateID != "" {
						t.Fatalf("refund = %s %+v, metadata %+v; want completed without a gate", res.Status, res.Error, res.Metadata)
					}
					return
				}
				if res.Status != gateway.StatusPaused || res.Approval == nil || res.Approval.GateID != "GATE_FINANCE_APPROVAL" || res.Approval.ApproverRole != "finance_lead" || res.Approval.TTLSeconds != 7200 {
					t.Fatalf("refund = %s %+v, approval %+v; want paused on GATE_FINANCE_APPROVAL", res.Status, res.Error, res.Approval)
				}
				if n := f.payments.CallCount("issue_refund"); n != 0 {
					t.Fatalf("a held refund reached the adapter (%d calls)", n)
				}
				req := refundCall(a.amount)
				req.Approval = approvalFor(res, "finance_lead", f.now, "apr_1")
				done, err := f.run.Call(ctx, req)
				if err != nil || done.Status != gateway.StatusCompleted || done.Metadata.ApprovalGateID != "GATE_FINANCE_APPROVAL" || done.Metadata.Approver != "user_finance_lead_77" {
					t.Fatalf("approved refund = %s %+v, metadata %+v, %v", done.Status, done.Error, done.Metadata, err)
				}
				// The approval is bound to the action: another amount is
				// another action.
				other := refundCall(a.amount - 1)
				other.Approval = approvalFor(res, "finance_lead", f.now, "apr_2")
				if o, _ := f.run.Call(ctx, other); o.Status != gateway.StatusBlocked || o.Error.Code != gateway.CodeApprovalDenied {
					t.Errorf("an approval of %v used for %v = %s %+v", a.amount, a.amount-1, o.Status, o.Error)
				}
				// And used once: presented again for the same action (a
				// takeover continuing the call) it answers that action's
				// stored result, and the refund does not run again.
				again := refundCall(a.amount)
				again.Step = gateway.StepID{Turn: 1}
				again.Approval = approvalFor(res, "finance_lead", f.now, "apr_1")
				if o, _ := f.run.Call(ctx, again); o.Status != gateway.StatusCompleted || !o.Metadata.Duplicate {
					t.Errorf("the approval presented again for its action = %s %+v (duplicate %v), want its stored result", o.Status, o.Error, o.Metadata.Duplicate)
				}
				if n := f.payments.CallCount("issue_refund"); n != 1 {
					t.Errorf("the refund ran %d times, want once", n)
				}
			})
		}
	}
}

// A gate a write makes active holds it whatever gate its permission
// names; a read-only call is held only by the gate its own permission
// names (here the lookup's, per call over its order id), never by a gate
// over tool.args meant for writes. A write two gates hold cannot be
// approved through one and is blocked.
func TestPerCallGateNamedByNoPermission(t *testing.T) {
	t.Parallel()
	orderGate := func(p *pack.Pack) {
		// Any call about order ord_881 needs the fraud desk; no
		// permission names the gate.
		p.PolicyLayer.ApprovalGates = append(p.PolicyLayer.ApprovalGates, pack.ApprovalGate{GateID: "GATE_FRAUD_DESK",
			When: json.RawMessage(`{"==":[{"var":"tool.args.order_id"},"ord_881"]}`), RequiredApproverRole: "fraud_analyst", TTLSeconds: 600})
	}
	lookupGate := func(p *pack.Pack) {
		// Lookups of ord_990 need a privacy officer: the lookup's
		// permission names this gate.
		p.PolicyLayer.ApprovalGates = append(p.PolicyLayer.ApprovalGates, pack.ApprovalGate{GateID: "GATE_ORDER_READS",
			When: json.RawMessage(`{"==":[{"var":"tool.args.order_id"},"ord_990"]}`), RequiredApproverRole: "privacy_officer", TTLSeconds: 600})
		for i := range p.ToolingLayer.Permissions {
			if p.ToolingLayer.Permissions[i].Capability == "lookup" {
				p.ToolingLayer.Permissions[i].RequiresApprovalGate = "GATE_ORDER_READS"
			}
		}
	}
	f := newFixture(t, lowValue, editPack(gateWhenOverArgs, orderGate, lookupGate))
	// The fraud desk's gate is active for the lookup of ord_881, which is
	// read-only and not named: the lookup runs.
	if res, err := f.run.Call(ctx, lookupCall()); err != nil || res.Status != gateway.StatusOK {
		t.Fatalf("lookup of ord_881 = %s %+v, %v", res.Status, res.Error, err)
	}
	// The lookup's own gate holds the lookup of ord_990.
	other := lookupCall()
	other.Args = map[string]any{"order_id": "ord_990"}
	res, err := f.run.Call(ctx, other)
	if err != nil || res.Status != gateway.StatusPaused || res.Approval.GateID != "GATE_ORDER_READS" || res.Approval.ApproverRole != "privacy_officer" {
		t.Fatalf("lookup of ord_990 = %s %+v, approval %+v, %v; want paused on GATE_ORDER_READS", res.Status, res.Error, res.Approval, err)
	}
	// A refund of 1200 on ord_881: held by the fraud desk's gate alone.
	res, err = f.run.Call(ctx, refundCall(1200))
	if err != nil || res.Status != gateway.StatusPaused || res.Approval.GateID != "GATE_FRAUD_DESK" || res.Approval.ApproverRole != "fraud_analyst" {
		t.Fatalf("refund of 1200 = %s %+v, approval %+v, %v; want paused on GATE_FRAUD_DESK", res.Status, res.Error, res.Approval, err)
	}
	// A refund of 4200 on ord_881 is held by both gates.
	res, err = f.run.Call(ctx, refundCall(4200))
	if err != nil || res.Status != gateway.StatusBlocked || res.Error.Code != gateway.CodePermissionDenied ||
		!strings.Contains(res.Error.Message, "GATE_FINANCE_APPROVAL, GATE_FRAUD_DESK") {
		t.Fatalf("refund held by two gates = %s %+v, %v; want blocked naming both", res.Status, res.Error, err)
	}
	if n := f.payments.CallCount("issue_refund") + f.orders.CallCount("lookup"); n != 1 {
		t.Errorf("%d adapter calls, want the one lookup of ord_881", n)
	}
}

// A gate no permission names guards no capability of its own: active for
// the run (its when over the request's refund_amount holds), it holds
// every write-class call and no read-only one.
func TestActiveGateNoPermissionNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t, lowValue, editPack(func(p *pack.Pack) {
		p.PolicyLayer.ApprovalGates = append(p.PolicyLayer.ApprovalGates, pack.ApprovalGate{GateID: "GATE_RISK_REVIEW",
			When: json.RawMessage(`{">":[{"var":"request.context.refund_amount"},1000]}`), RequiredApproverRole: "risk_lead", TTLSeconds: 600})
	}))
	if res, err := f.run.Call(ctx, lookupCall()); err != nil || res.Status != gateway.StatusOK {
		t.Fatalf("lookup = %s %+v, %v", res.Status, res.Error, err)
	}
	res, err := f.run.Call(ctx, refundCall(1200))
	if err != nil || res.Status != gateway.StatusPaused || res.Approval == nil || res.Approval.GateID != "GATE_RISK_REVIEW" || res.Approval.ApproverRole != "risk_lead" {
		t.Fatalf("refund = %s %+v, approval %+v, %v; want paused on GATE_RISK_REVIEW", res.Status, res.Error, res.Approval, err)
	}
	if n := f.payments.CallCount("issue_refund"); n != 0 {
		t.Errorf("the refund reached the adapter (%d calls)", n)
	}
}

// tool.approval_mode is the mode the call is governed at: a call that
// requests a lower mode than its capability's is evaluated at the
// capability's, and a gate over tool.approval_mode holds it.
func TestPerCallApprovalModeNotLowered(t *testing.T) {
	t.Parallel()
	f := newFixture(t, lowValue, editPack(func(p *pack.Pack) {
		p.PolicyLayer.ApprovalGates[0].When = json.RawMessage(`{"==":[{"var":"tool.approval_mode"},"destructive"]}`)
	}))
	for _, mode := range []runcontext.ApprovalMode{runcontext.ReadOnly, runcontext.Network, runcontext.Delegated} {
		call := refundCall(1200)
		call.ApprovalMode = mode
		res, err := f.run.Call(ctx, call)
		if err != nil || res.Status != gateway.StatusPaused || res.Approval == nil || res.Approval.GateID != "GATE_FINANCE_APPROVAL" {
			t.Errorf("refund requesting %s = %s %+v, %v; want paused on GATE_FINANCE_APPROVAL", mode, res.Status, res.Error, err)
		}
	}
	if n := f.payments.CallCount("issue_refund"); n != 0 {
		t.Errorf("the refund reached the adapter (%d calls)", n)
	}
}

// A write for which a per-call rule or gate cannot be judged (it reads an
// argument the write does not carry) does not run: blocked,
// runtime_policy_invalid, naming the gate and the argument. A read-only
// call without the argument is not held by it.
func TestPerCallGateOverMissingArgument(t *testing.T) {
	t.Parallel()
	f := newFixture(t, lowValue, editPack(func(p *pack.Pack) {
		p.PolicyLayer.ApprovalGates[0].When = json.RawMessage(`{">":[{"var":"tool.args.refund_total"},3000]}`)
	}))
	if res, err := f.run.Call(ctx, lookupCall()); err != nil || res.Status != gateway.StatusOK {
		t.Fatalf("lookup = %s %+v, %v", res.Status, res.Error, err)
	}
	res, err := f.run.Call(ctx, refundCall(4200))
	if err != nil || res.Status != gateway.StatusBlocked || res.Error.Code != gateway.CodeRuntimePolicyInvalid ||
		!strings.Contains(res.Error.Message, "approval gate GATE_FINANCE_APPROVAL: missing_variable tool.args.refund_total") {
		t.Fatalf("refund = %s %+v, %v; want blocked naming the gate and the argument", res.Status, res.Error, err)
	}
	if n := f.payments.CallCount("issue_refund"); n != 0 {
		t.Errorf("the refund reached the adapter (%d calls)", n)
	}
}

// RunOptions.VerifyWrite is asked about every write that passed the
// checks before it, with the rules that applied to the call, and never
// about a read: its error blocks the write, which never reaches the
// adapter; nil lets it run. It is asked before the approval gate, so a
// write it blocks never pauses.
func TestVerifyWrite(t *testing.T) {
	t.Parallel()
	var asked []gateway.WriteCall
	block := true
	f := newFixture(t, editPack(ruleAppliesToRefunds), func(_ *fixture, _ *runcontext.RunContext, req *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		req.Input.Context["refund_amount"] = 100
	})
	run, err := f.gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)},
		&gateway.RunOptions{VerifyWrite: func(w *gateway.WriteCall) *gateway.ToolError {
			asked = append(asked, *w)
			if block {
				return gateway.NewToolError(gateway.CodePermissionDenied, true, "missing_evidence: order_lookup", map[string]any{"missing_evidence": []string{"order_lookup"}})
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := run.Call(ctx, lookupCall()); err != nil || res.Status != gateway.StatusOK || len(asked) != 0 {
		t.Fatalf("lookup = %s %+v, %v; asked %d times", res.Status, res.Error, err, len(asked))
	}
	res, err := run.Call(ctx, refundCall(4200))
	if err != nil || res.Status != gateway.StatusBlocked || res.Error.Code != gateway.CodePermissionDenied || res.Error.Message != "missing_evidence: order_lookup" ||
		res.Error.Retryable || res.Error.Reason != "tool_permission_denied" || res.Approval != nil {
		t.Fatalf("refund = %s %+v, approval %+v, %v; want blocked by the hook, not paused", res.Status, res.Error, res.Approval, err)
	}
	if n := f.payments.CallCount("issue_refund"); n != 0 {
		t.Fatalf("a blocked write reached the adapter (%d calls)", n)
	}
	if len(asked) != 1 || asked[0].CapabilityID != "adp_payments.issue_refund" || asked[0].ToolCallID != res.ToolCallID ||
		!slices.ContainsFunc(asked[0].Decisions, func(d policy.Decision) bool { return d.RuleID == "R_HIGH_VALUE_REQUIRES_APPROVAL" }) {
		t.Errorf("asked %+v", asked)
	}
	block = false
	res, err = run.Call(ctx, refundCall(4200))
	if err != nil || res.Status != gateway.StatusPaused {
		t.Fatalf("refund the hook lets go = %s %+v, %v; want paused at its gate", res.Status, res.Error, err)
	}
}

// A resumed call's approval cannot be used once the request it answers
// is as old as the gate's ttl_seconds (on the run's clock): the call ends
// blocked, approval_timeout, and nothing runs. Within the TTL it runs.
func TestApprovalRequestTTL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		wait    time.Duration
		timeout bool
	}{
		{"answered within the TTL", 2*time.Hour - time.Second, false},
		{"answered at the TTL", 2 * time.Hour, true},
		{"answered a day later", 24 * time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			paused, err := f.run.Call(ctx, refundCall(4200))
			if err != nil || paused.Status != gateway.StatusPaused {
				t.Fatalf("refund = %+v, %v", paused, err)
			}
			f.now = f.now.Add(tc.wait)
			req := refundCall(4200)
			// The approver decided a minute ago: the approval itself is
			// fresh; the request it answers is not.
			req.Approval = approvalFor(paused, "finance_lead", f.now.Add(-time.Minute), "apr_1")
			req.ApprovalRequest = paused.Approval
			res, err := f.run.Call(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.timeout {
				if res.Status != gateway.StatusCompleted {
					t.Fatalf("refund = %s %+v, want completed", res.Status, res.Error)
				}
				return
			}
			if res.Status != gateway.StatusBlocked || res.Error.Code != gateway.CodeApprovalTimeout || res.Error.Details["gate_id"] != "GATE_FINANCE_APPROVAL" {
				t.Fatalf("refund = %s %+v, want blocked approval_timeout", res.Status, res.Error)
			}
			if n := f.payments.CallCount("issue_refund"); n != 0 {
				t.Errorf("the refund ran %d times on an expired request", n)
			}
		})
	}
}
