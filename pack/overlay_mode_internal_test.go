package pack

import (
	"testing"

	"github.com/contextos/contextos/runcontext"
	gocmp "github.com/google/go-cmp/cmp"
)

// A permission's approval_mode is its capability's mode (Permission.Mode),
// so an overlay may not lower it by restating a permission that declares
// none with a mode below its adapter's (raised or not).
func TestOverlayPermissionModeNeverFalls(t *testing.T) {
	t.Parallel()
	undeclared := func(q Permission) Permission { q.ApprovalMode = ""; return q }
	restate := func(m runcontext.ApprovalMode) Permission {
		return Permission{PermissionID: "p_refund", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true, ApprovalMode: m,
			RequiresApprovalGate: "G1", ArgConstraints: map[string]map[string]any{"amount": {"max": 500.0}}}
	}
	tests := []struct {
		name     string
		overlay  Overlay
		want     *refusal
		wantMode runcontext.ApprovalMode // the capability's mode in the view, when applied
	}{
		{name: "restated below the adapter's", overlay: Overlay{Permissions: []Permission{restate(runcontext.ReadOnly)}},
			want: &refusal{OverlayLowerMode, "permissions[0].approval_mode"}},
		{name: "restated at the adapter's", overlay: Overlay{Permissions: []Permission{restate(runcontext.Network)}}, wantMode: runcontext.Network},
		{name: "restated above the adapter's", overlay: Overlay{Permissions: []Permission{restate(runcontext.Delegated)}}, wantMode: runcontext.Delegated},
		{name: "restated without a mode", overlay: Overlay{Permissions: []Permission{restate("")}}, wantMode: runcontext.Network},
		{name: "adapter raised, restated at the old mode", overlay: Overlay{AdapterApprovalModes: map[string]ApprovalMode{"adp_payments": runcontext.Destructive},
			Permissions: []Permission{restate(runcontext.Network)}}, want: &refusal{OverlayLowerMode, "permissions[0].approval_mode"}},
		{name: "adapter raised, restated without a mode", overlay: Overlay{AdapterApprovalModes: map[string]ApprovalMode{"adp_payments": runcontext.Destructive},
			Permissions: []Permission{restate("")}}, wantMode: runcontext.Destructive},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			view := layerBase()
			view.ToolingLayer.Permissions[1] = undeclared(view.ToolingLayer.Permissions[1])
			got := refusalOf(overlayTooling(view, &tc.overlay))
			if diff := gocmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("refusal (-want +got):\n%s", diff)
			}
			if tc.want != nil {
				return
			}
			if m := view.ToolingLayer.Permissions[1].Mode(view.ToolingLayer.AdapterRegistry[1]); m != tc.wantMode {
				t.Errorf("issue_refund's mode in the view = %s, want %s", m, tc.wantMode)
			}
		})
	}
}
