package pack_test

import (
	"errors"
	"testing"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
	"github.com/google/go-cmp/cmp"
)

// A permission's approval_mode is its capability's mode when it declares
// one (lower than or equal to its adapter's); otherwise the adapter's.
func TestPermissionMode(t *testing.T) {
	t.Parallel()
	writer := pack.Adapter{AdapterID: "adp_tickets", ApprovalMode: runcontext.LocalWrite}
	tests := []struct {
		name string
		perm pack.Permission
		want runcontext.ApprovalMode
	}{
		{"none declared: the adapter's", pack.Permission{AdapterID: "adp_tickets", Capability: "close", Allow: true}, runcontext.LocalWrite},
		{"lower declared", pack.Permission{AdapterID: "adp_tickets", Capability: "lookup", Allow: true, ApprovalMode: runcontext.ReadOnly}, runcontext.ReadOnly},
		{"equal declared", pack.Permission{AdapterID: "adp_tickets", Capability: "close", Allow: true, ApprovalMode: runcontext.LocalWrite}, runcontext.LocalWrite},
		// Validate refuses a higher one; kept as declared, it is the stricter.
		{"higher declared", pack.Permission{AdapterID: "adp_tickets", Capability: "close", Allow: true, ApprovalMode: runcontext.Destructive}, runcontext.Destructive},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.perm.Mode(writer); got != tc.want {
				t.Errorf("Mode = %s, want %s", got, tc.want)
			}
		})
	}
}

// A pack may give a read-only capability of an adapter that can write its
// own lower mode: the risk rules then govern it at that mode (no
// idempotency key for a lookup), and still govern the adapter's other
// capabilities at the adapter's. A mode above the adapter's stays refused.
func TestValidatePermissionLowersMode(t *testing.T) {
	t.Parallel()
	writableOrders := func(p *pack.Pack) {
		p.ToolingLayer.AdapterRegistry[0].ApprovalMode = runcontext.LocalWrite // adp_orders can also write
		p.ToolingLayer.AdapterRegistry[0].Capabilities = append(p.ToolingLayer.AdapterRegistry[0].Capabilities, "cancel")
		p.ToolingLayer.Permissions = append(p.ToolingLayer.Permissions, pack.Permission{PermissionID: "p_orders_cancel", AdapterID: "adp_orders", Capability: "cancel", Allow: true,
			ArgConstraints: map[string]map[string]any{"idempotency_key": {"required": true}}})
	}
	tests := []struct {
		name   string
		mutate func(p *pack.Pack)
		want   []pack.Problem
	}{
		{"lookup declared read_only", func(p *pack.Pack) {
			writableOrders(p)
			p.ToolingLayer.Permissions[0].ApprovalMode = runcontext.ReadOnly
		}, nil},
		{"lookup declared at the adapter's mode", func(p *pack.Pack) {
			writableOrders(p)
			p.ToolingLayer.Permissions[0].ApprovalMode = runcontext.LocalWrite
		}, []pack.Problem{{Gate: "risk", Code: "missing_idempotency", Path: "tooling_layer.permissions[0].arg_constraints.idempotency_key",
			Message: "permission p_orders_lookup exposes write-class capability adp_orders.lookup (local_write) without arg_constraints.idempotency_key.required"}}},
		{"lookup declaring none takes the adapter's", writableOrders, []pack.Problem{{Gate: "risk", Code: "missing_idempotency", Path: "tooling_layer.permissions[0].arg_constraints.idempotency_key",
			Message: "permission p_orders_lookup exposes write-class capability adp_orders.lookup (local_write) without arg_constraints.idempotency_key.required"}}},
		{"cancel without idempotency keeps the adapter's mode", func(p *pack.Pack) {
			writableOrders(p)
			p.ToolingLayer.Permissions[0].ApprovalMode = runcontext.ReadOnly
			p.ToolingLayer.Permissions[3].ArgConstraints = nil
		}, []pack.Problem{{Gate: "risk", Code: "missing_idempotency", Path: "tooling_layer.permissions[3].arg_constraints.idempotency_key",
			Message: "permission p_orders_cancel exposes write-class capability adp_orders.cancel (local_write) without arg_constraints.idempotency_key.required"}}},
		{"refund declared delegated needs no gate for being destructive", func(p *pack.Pack) {
			p.ToolingLayer.Permissions[2].ApprovalMode = runcontext.Delegated
			p.ToolingLayer.Permissions[2].RequiresApprovalGate = ""
		}, nil},
		{"lookup declared above its adapter", func(p *pack.Pack) {
			writableOrders(p)
			p.ToolingLayer.Permissions[0].ApprovalMode = runcontext.Network
		}, []pack.Problem{
			{Gate: "risk", Code: "permission_above_adapter_mode", Path: "tooling_layer.permissions[0].approval_mode", Message: "permission p_orders_lookup asks for network, above adapter adp_orders's approval_mode local_write"},
			{Gate: "risk", Code: "missing_idempotency", Path: "tooling_layer.permissions[0].arg_constraints.idempotency_key",
				Message: "permission p_orders_lookup exposes write-class capability adp_orders.lookup (network) without arg_constraints.idempotency_key.required"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := pack.Validate(mutated(t, tc.mutate), nil)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, pack.ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
			if diff := cmp.Diff(tc.want, problems(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// pack diff classes a permission's mode change by the capability's mode
// it moves: a lowering is major (the capability surfaces under more
// safety modes), a raise minor, a restatement of the mode it already had
// a patch.
func TestDiffPermissionMode(t *testing.T) {
	t.Parallel()
	lowered := func(m runcontext.ApprovalMode) func(p *pack.Pack) {
		return func(p *pack.Pack) { p.ToolingLayer.Permissions[2].ApprovalMode = m }
	}
	tests := []struct {
		name       string
		base, next func(p *pack.Pack)
		version    string
		class      pack.Class
		change     string
	}{
		{"lowered below the adapter's", nil, lowered(runcontext.Delegated), "2.0.0", pack.ClassMajor,
			"permission p_issue_refund's approval mode lowered to delegated (surfaces under more safety modes)"},
		{"lowered again", lowered(runcontext.Delegated), lowered(runcontext.Network), "2.0.0", pack.ClassMajor,
			"permission p_issue_refund's approval mode lowered to network (surfaces under more safety modes)"},
		{"raised back to the adapter's", lowered(runcontext.Delegated), lowered(""), "1.1.0", pack.ClassMinor,
			"permission p_issue_refund's approval mode raised to destructive"},
		{"raised", lowered(runcontext.Network), lowered(runcontext.Delegated), "1.1.0", pack.ClassMinor,
			"permission p_issue_refund's approval mode raised to delegated"},
		{"restates the adapter's", nil, lowered(runcontext.Destructive), "1.0.1", pack.ClassPatch,
			"permission p_issue_refund's approval mode restated (still destructive)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			old := canonical(t)
			if tc.base != nil {
				tc.base(old)
			}
			next := mutated(t, func(p *pack.Pack) {
				if tc.base != nil {
					tc.base(p)
				}
				tc.next(p)
			})
			next.PackMeta.PackVersion = tc.version
			got := pack.Diff(old, next, nil)
			if got.Class != tc.class || !got.VersionOK {
				t.Errorf("Diff = %s (version ok %v: %s), want %s\n%+v", got.Class, got.VersionOK, got.Version, tc.class, got.Changes)
			}
			var reasons []string
			for _, c := range got.Changes {
				reasons = append(reasons, c.Reason)
			}
			if diff := cmp.Diff([]string{tc.change}, reasons); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
		})
	}
	// A new capability that a writing adapter exposes stays major however
	// low its permission declares it.
	next := mutated(t, func(p *pack.Pack) {
		p.ToolingLayer.AdapterRegistry[2].Capabilities = append(p.ToolingLayer.AdapterRegistry[2].Capabilities, "refund_status")
		p.ToolingLayer.Permissions = append(p.ToolingLayer.Permissions, pack.Permission{PermissionID: "p_refund_status", AdapterID: "adp_payments", Capability: "refund_status", Allow: true, ApprovalMode: runcontext.ReadOnly})
	})
	next.PackMeta.PackVersion = "1.1.0"
	got := pack.Diff(canonical(t), next, nil)
	want := []pack.Change{
		{Class: pack.ClassMinor, Path: "tooling_layer.adapter_registry.adp_payments.capabilities", Reason: "declared capability refund_status (exposed only through permissions)"},
		{Class: pack.ClassMajor, Path: "tooling_layer.permissions.p_refund_status", Reason: "new capability adp_payments.refund_status (declared read_only on an adapter that can produce destructive)"},
	}
	if diff := cmp.Diff(want, got.Changes); got.Class != pack.ClassMajor || diff != "" {
		t.Errorf("new read-only capability of a destructive adapter: %s, changes (-want +got):\n%s", got.Class, diff)
	}
}
