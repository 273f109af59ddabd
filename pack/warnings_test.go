package pack_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// The risk gate warns, by gate, when a write-class capability's controls
// read only what the caller asserts in request.context; the per-call form
// (over tool.args) silences it, and the pack stays valid either way.
func TestWarningsCallerAssertedControl(t *testing.T) {
	t.Parallel()
	seedWarning := pack.Problem{Gate: "risk", Code: "caller_asserted_control", Path: "policy_layer.approval_gates[0].when",
		Message: `gate GATE_FINANCE_APPROVAL guards write-class adp_payments.issue_refund (destructive), but its when, the rules naming it and the deny rules read only caller-asserted request.context (identity_verified, refund_amount) and nothing of the call's arguments, so a call whose arguments differ from what the caller asserted is not held; bind it to the call: a when over tool.args, such as {">": [{"var": "tool.args.amount_inr"}, …]}, or a rule over tool.args.* whose branch names requires_approval_gate GATE_FINANCE_APPROVAL`}
	tests := []struct {
		name   string
		mutate func(p *pack.Pack)
		want   []pack.Problem
	}{
		{"seed pack: gate and rules over request.context", func(*pack.Pack) {}, []pack.Problem{seedWarning}},
		{"gate when over the call's amount", func(p *pack.Pack) {
			p.PolicyLayer.ApprovalGates[0].When = rawJSON(`{">": [{"var": "tool.args.amount_inr"}, 3000]}`)
		}, nil},
		{"rule naming the gate over the call's amount", func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].If = rawJSON(`{">": [{"var": "tool.args.amount_inr"}, 3000]}`)
		}, nil},
		{"deny rule over the call's amount", func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[0].If = rawJSON(`{"and": [{"==": [{"var": "request.context.identity_verified"}, true]}, {"<=": [{"var": "tool.args.amount_inr"}, 3000]}]}`)
		}, nil},
		{"controls over the user only", func(p *pack.Pack) {
			p.PolicyLayer.ApprovalGates[0].When = rawJSON(`{"==": [{"var": "user.role"}, "support_agent"]}`)
			r := &p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules
			(*r)[0].If = rawJSON(`{"==": [{"var": "user.role"}, "support_agent"]}`)
			(*r)[1].If = rawJSON(`{"==": [{"var": "user.role"}, "support_agent"]}`)
		}, nil},
		{"a gate guarding read-only capabilities only", func(p *pack.Pack) {
			p.ToolingLayer.AdapterRegistry[2].ApprovalMode = runcontext.ReadOnly
		}, nil},
		{"ungated write capability guarded by a caller-asserted deny", func(p *pack.Pack) {
			p.ToolingLayer.AdapterRegistry[2].ApprovalMode = runcontext.LocalWrite
			p.ToolingLayer.Permissions[2].RequiresApprovalGate = ""
		}, []pack.Problem{{Gate: "risk", Code: "caller_asserted_control", Path: "tooling_layer.permissions[2]",
			Message: "write-class capability adp_payments.issue_refund (local_write) has no approval gate, and the deny rules that guard it read only caller-asserted request.context (identity_verified) and nothing of the call's arguments; bind it to the call: give permission p_issue_refund a requires_approval_gate whose when reads tool.args.amount_inr, or add a rule over tool.args.*"}}},
		{"a deny rule over another capability's arguments does not bind the refund", func(p *pack.Pack) {
			r := &p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules
			*r = append(*r, pack.Rule{RuleID: "R_LOOKUP_OWN_ORDERS", AppliesTo: map[string]any{"tool.capability_id": "adp_orders.lookup"},
				If:   rawJSON(`{"==": [{"var": "tool.args.order_id"}, "ord_blocked"]}`),
				Then: &pack.Effect{Allow: ptr(false), Reason: "blocked order"}, Rationale: "A blocked order is not looked up."})
		}, []pack.Problem{seedWarning}},
		{"a deny rule over the refund's own arguments binds it", func(p *pack.Pack) {
			r := &p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules
			*r = append(*r, pack.Rule{RuleID: "R_REFUND_CAP", AppliesTo: map[string]any{"tool.capability_id": []any{"adp_orders.lookup", "adp_payments.issue_refund"}},
				If:   rawJSON(`{">": [{"var": "tool.args.amount_inr"}, 3000]}`),
				Then: &pack.Effect{Allow: ptr(false), Reason: "above the cap"}, Rationale: "Refunds above 3000 are denied."})
		}, nil},
		{"a denied permission is not surfaced", func(p *pack.Pack) {
			p.ToolingLayer.Permissions[2].Allow = false
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := mutated(t, tc.mutate)
			if err := pack.Validate(p, nil); err != nil {
				t.Fatalf("Validate = %v; a warning never makes a pack invalid", err)
			}
			if diff := cmp.Diff(tc.want, pack.Warnings(p)); diff != "" {
				t.Errorf("Warnings (-want +got):\n%s", diff)
			}
		})
	}
	if got := pack.Warnings(nil); got != nil {
		t.Errorf("Warnings(nil) = %v", got)
	}
}
