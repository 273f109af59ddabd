package packview_test

import (
	"slices"
	"testing"

	"github.com/contextos/contextos/internal/packview"
	"github.com/contextos/contextos/pack"
	"github.com/google/go-cmp/cmp"
)

// An explicit deny wins over any allow, wherever the two appear; what is
// not allowed is not exposed; of two allows of one capability the first
// governs.
func TestEffectivePermissionsDenyWins(t *testing.T) {
	t.Parallel()
	refund := pack.Permission{PermissionID: "p_issue_refund", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true}
	refund2 := pack.Permission{PermissionID: "p_second", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true}
	lookup := pack.Permission{PermissionID: "p_orders_lookup", AdapterID: "adp_orders", Capability: "lookup", Allow: true}
	tests := []struct {
		name  string
		perms []pack.Permission
		want  map[string]string // exposed capability id → governing permission id
	}{
		{"allows only", []pack.Permission{lookup, refund}, map[string]string{"adp_orders.lookup": "p_orders_lookup", "adp_payments.issue_refund": "p_issue_refund"}},
		{"deny after the allow", []pack.Permission{lookup, refund, {PermissionID: "p_no", AdapterID: "adp_payments", Capability: "issue_refund"}}, map[string]string{"adp_orders.lookup": "p_orders_lookup"}},
		{"deny before the allow", []pack.Permission{{PermissionID: "p_no", AdapterID: "adp_payments", Capability: "issue_refund"}, refund, lookup}, map[string]string{"adp_orders.lookup": "p_orders_lookup"}},
		{"wildcard deny of the adapter", []pack.Permission{refund, lookup, {PermissionID: "p_no", AdapterID: "adp_payments", Capability: "*"}}, map[string]string{"adp_orders.lookup": "p_orders_lookup"}},
		{"deny of another capability", []pack.Permission{refund, {PermissionID: "p_no", AdapterID: "adp_payments", Capability: "void"}}, map[string]string{"adp_payments.issue_refund": "p_issue_refund"}},
		{"two allows: the first governs", []pack.Permission{refund, refund2}, map[string]string{"adp_payments.issue_refund": "p_issue_refund"}},
		{"two allows, the other first", []pack.Permission{refund2, refund}, map[string]string{"adp_payments.issue_refund": "p_second"}},
		{"none", nil, map[string]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &pack.Pack{ToolingLayer: pack.ToolingLayer{Permissions: slices.Clone(tc.perms)}}
			got := map[string]string{}
			for id, q := range packview.EffectivePermissions(p) {
				if !q.Allow || q.CapabilityID() != id {
					t.Errorf("%s is governed by %+v", id, q)
				}
				got[id] = q.PermissionID
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("exposed (-want +got):\n%s", diff)
			}
		})
	}
}

// A gate is unbound when no governing permission names it: one named only
// by a denied permission, or by none, guards no capability of its own.
func TestUnboundGates(t *testing.T) {
	t.Parallel()
	gates := []pack.ApprovalGate{{GateID: "G_REFUND"}, {GateID: "G_ORPHAN"}, {GateID: "G_DENIED_ONLY"}}
	p := &pack.Pack{}
	p.PolicyLayer.ApprovalGates = gates
	p.ToolingLayer.Permissions = []pack.Permission{
		{PermissionID: "p_refund", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true, RequiresApprovalGate: "G_REFUND"},
		{PermissionID: "p_void", AdapterID: "adp_payments", Capability: "void", Allow: true, RequiresApprovalGate: "G_DENIED_ONLY"},
		{PermissionID: "p_no_void", AdapterID: "adp_payments", Capability: "void"},
	}
	got := packview.UnboundGates(p, packview.EffectivePermissions(p))
	if diff := cmp.Diff([]string{"G_ORPHAN", "G_DENIED_ONLY"}, got); diff != "" {
		t.Errorf("UnboundGates (-want +got):\n%s", diff)
	}
}
