package pack_test

import (
	"slices"
	"testing"

	"github.com/contextos/contextos/pack"
)

// An explicit deny wins over any allow, wherever the two appear; what is
// not allowed is not exposed.
func TestEffectivePermissionsDenyWins(t *testing.T) {
	refund := pack.Permission{PermissionID: "p_issue_refund", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true}
	lookup := pack.Permission{PermissionID: "p_orders_lookup", AdapterID: "adp_orders", Capability: "lookup", Allow: true}
	tests := []struct {
		name  string
		perms []pack.Permission
		want  []string // exposed capability ids, sorted
	}{
		{"allows only", []pack.Permission{lookup, refund}, []string{"adp_orders.lookup", "adp_payments.issue_refund"}},
		{"deny after the allow", []pack.Permission{lookup, refund, {PermissionID: "p_no", AdapterID: "adp_payments", Capability: "issue_refund"}}, []string{"adp_orders.lookup"}},
		{"deny before the allow", []pack.Permission{{PermissionID: "p_no", AdapterID: "adp_payments", Capability: "issue_refund"}, refund, lookup}, []string{"adp_orders.lookup"}},
		{"wildcard deny of the adapter", []pack.Permission{refund, lookup, {PermissionID: "p_no", AdapterID: "adp_payments", Capability: "*"}}, []string{"adp_orders.lookup"}},
		{"deny of another capability", []pack.Permission{refund, {PermissionID: "p_no", AdapterID: "adp_payments", Capability: "void"}}, []string{"adp_payments.issue_refund"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := canonical(t)
			p.ToolingLayer.Permissions = tc.perms
			got := pack.EffectivePermissions(p)
			ids := make([]string, 0, len(got))
			for id, q := range got {
				if !q.Allow || q.CapabilityID() != id {
					t.Errorf("%s is governed by %+v", id, q)
				}
				ids = append(ids, id)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tc.want) {
				t.Errorf("exposed %v, want %v", ids, tc.want)
			}
		})
	}
	// Two allows (Validate refuses them): the first governs.
	p := canonical(t)
	second := p.ToolingLayer.Permissions[2]
	second.PermissionID, second.ArgConstraints = "p_second", nil
	p.ToolingLayer.Permissions = append(p.ToolingLayer.Permissions, second)
	if got := pack.EffectivePermissions(p)["adp_payments.issue_refund"].PermissionID; got != "p_issue_refund" {
		t.Errorf("governing permission = %s, want the first, p_issue_refund", got)
	}
}
