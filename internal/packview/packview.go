// Package packview computes the derived views of a pack that the compiler
// and the gateway share, so that both govern a capability by the same
// permission.
package packview

import "github.com/contextos/contextos/pack"

// EffectivePermissions resolves the permission that governs each
// capability ("adapter_id.capability") of p: a capability is exposed only
// by a permission that allows it, and an explicit deny (a permission with
// allow false naming the capability, or "*" on its adapter) wins over any
// allow, wherever the two appear. When several permissions allow the same
// capability (pack.Validate refuses that), the first governs. The result holds
// only the exposed capabilities.
func EffectivePermissions(p *pack.Pack) map[string]pack.Permission {
	perms := p.ToolingLayer.Permissions
	denied := make(map[string]bool)
	for _, q := range perms {
		if !q.Allow {
			denied[q.CapabilityID()] = true
		}
	}
	out := make(map[string]pack.Permission, len(perms))
	for _, q := range perms {
		id := q.CapabilityID()
		if !q.Allow || denied[id] || denied[q.AdapterID+".*"] {
			continue
		}
		if _, seen := out[id]; !seen {
			out[id] = q
		}
	}
	return out
}

// UnboundGates returns the ids of p's approval gates that no governing
// permission names (requires_approval_gate of a value of perms, which is
// EffectivePermissions(p)), in declaration order. Such a gate guards no
// capability of its own: when it is active it holds every write-class
// call, so that a gate the policy activates never holds nothing.
func UnboundGates(p *pack.Pack, perms map[string]pack.Permission) []string {
	var out []string
	for _, g := range p.PolicyLayer.ApprovalGates {
		bound := false
		for _, q := range perms {
			if q.RequiresApprovalGate == g.GateID {
				bound = true
				break
			}
		}
		if !bound {
			out = append(out, g.GateID)
		}
	}
	return out
}
