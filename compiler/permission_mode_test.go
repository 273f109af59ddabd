package compiler_test

import (
	"strings"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
	"github.com/google/go-cmp/cmp"
)

// ordersCanWrite makes adp_orders an adapter that can also write
// (local_write) and keeps its lookup read-only through its permission.
func ordersCanWrite(p *pack.Pack) {
	p.ToolingLayer.AdapterRegistry[0].ApprovalMode = runcontext.LocalWrite
	p.ToolingLayer.Permissions[0].ApprovalMode = runcontext.ReadOnly
}

// A permission that declares a lower mode for its own capability than its
// adapter's is surfaced, described and withheld at that mode.
func TestPermissionModeGovernsSurfacing(t *testing.T) {
	t.Parallel()
	refundAt := func(m runcontext.ApprovalMode) func(p *pack.Pack) {
		return func(p *pack.Pack) { p.ToolingLayer.Permissions[2].ApprovalMode = m }
	}
	tests := []struct {
		name     string
		mutate   func(p *pack.Pack)
		safety   runcontext.ApprovalMode
		tools    []string
		md       map[string]compiler.CapabilityMetadata // kind, risk level and mode of surfaced capabilities
		withheld []compiler.ModeWithheld
	}{
		{"read-only lookup of a writing adapter under read_only", ordersCanWrite, runcontext.ReadOnly,
			[]string{"adp_orders.lookup", "adp_policy.eval"},
			map[string]compiler.CapabilityMetadata{"adp_orders.lookup": {Kind: "read", RiskLevel: "read_only", ApprovalMode: runcontext.ReadOnly}},
			[]compiler.ModeWithheld{{Capability: "adp_payments.issue_refund", ApprovalMode: runcontext.Destructive}}},
		{"the adapter's mode when the permission declares none", func(p *pack.Pack) {
			p.ToolingLayer.AdapterRegistry[0].ApprovalMode = runcontext.LocalWrite
			p.ToolingLayer.Permissions[0].ArgConstraints = map[string]map[string]any{"idempotency_key": {"required": true}}
		}, runcontext.ReadOnly,
			[]string{"adp_policy.eval"}, nil,
			[]compiler.ModeWithheld{{Capability: "adp_orders.lookup", ApprovalMode: runcontext.LocalWrite}, {Capability: "adp_payments.issue_refund", ApprovalMode: runcontext.Destructive}}},
		{"refund declared network under network", refundAt(runcontext.Network), runcontext.Network,
			[]string{"adp_orders.lookup", "adp_policy.eval", "adp_payments.issue_refund"},
			map[string]compiler.CapabilityMetadata{"adp_payments.issue_refund": {Kind: "write", RiskLevel: "network", ApprovalMode: runcontext.Network}}, nil},
		{"refund declared network under local_write", refundAt(runcontext.Network), runcontext.LocalWrite,
			[]string{"adp_orders.lookup", "adp_policy.eval"}, nil,
			[]compiler.ModeWithheld{{Capability: "adp_payments.issue_refund", ApprovalMode: runcontext.Network}}},
		{"refund at its adapter's mode under delegated", nil, runcontext.Delegated,
			[]string{"adp_orders.lookup", "adp_policy.eval"}, nil,
			[]compiler.ModeWithheld{{Capability: "adp_payments.issue_refund", ApprovalMode: runcontext.Destructive}}},
		{"nothing withheld under destructive", nil, runcontext.Destructive,
			[]string{"adp_orders.lookup", "adp_policy.eval", "adp_payments.issue_refund"}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := canonicalScenario(t)
			if tc.mutate != nil {
				tc.mutate(s.pack)
			}
			s.rc.SafetyMode = tc.safety
			if tc.safety.Compare(runcontext.Delegated) < 0 {
				s.rc.User.Delegation = nil
			}
			prepared, err := compiler.Prepare(s.inputs(), &s.opts)
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			cc, err := prepared.Compile(ctx, s.req, s.rc)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if diff := cmp.Diff(tc.tools, cc.ContextLedger.Tools); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			for id, want := range tc.md {
				adapter, name, _ := strings.Cut(id, ".")
				var got compiler.CapabilityMetadata
				for _, e := range cc.Manifests.ToolManifest {
					if e.AdapterID == adapter {
						got = e.CapabilityMetadata[name]
					}
				}
				if got.Kind != want.Kind || got.RiskLevel != want.RiskLevel || got.ApprovalMode != want.ApprovalMode {
					t.Errorf("%s: kind %q, risk level %q, mode %q; want %q, %q, %q", id, got.Kind, got.RiskLevel, got.ApprovalMode, want.Kind, want.RiskLevel, want.ApprovalMode)
				}
			}
			got := prepared.AboveSafetyMode(tc.safety)
			if diff := cmp.Diff(tc.withheld, got); diff != "" {
				t.Errorf("AboveSafetyMode (-want +got):\n%s", diff)
			}
			// AboveSafetyMode names exactly the ledger's entries withheld
			// for their mode, with the mode the ledger gives.
			var ledger []compiler.ModeWithheld
			for _, w := range cc.ContextLedger.ToolsWithheld {
				mode, rest, ok := strings.Cut(strings.TrimPrefix(w.Reason, "approval mode "), " is above the run's safety mode ")
				if ok && rest == string(tc.safety) {
					ledger = append(ledger, compiler.ModeWithheld{Capability: w.Capability, ApprovalMode: runcontext.ApprovalMode(mode)})
				}
			}
			if diff := cmp.Diff(ledger, got); diff != "" {
				t.Errorf("AboveSafetyMode against the ledger (-ledger +got):\n%s", diff)
			}
		})
	}
}

// AboveSafetyMode (asked at the end of every run, for its notices) makes
// only the ids of the capabilities it withholds: withholding nothing, it
// allocates nothing.
func TestAboveSafetyModeWithholdingNothingAllocatesNothing(t *testing.T) {
	s := canonicalScenario(t)
	prepared, err := compiler.Prepare(s.inputs(), &s.opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := prepared.AboveSafetyMode(runcontext.Destructive); got != nil {
		t.Fatalf("AboveSafetyMode(destructive) = %v, want nothing", got)
	}
	if a := testing.AllocsPerRun(20, func() { prepared.AboveSafetyMode(runcontext.Destructive) }); a != 0 {
		t.Errorf("AboveSafetyMode withholding nothing allocates %v times a call", a)
	}
	want := []compiler.ModeWithheld{{Capability: "adp_payments.issue_refund", ApprovalMode: runcontext.Destructive}}
	if diff := cmp.Diff(want, prepared.AboveSafetyMode(runcontext.ReadOnly)); diff != "" {
		t.Errorf("AboveSafetyMode(read_only) (-want +got):\n%s", diff)
	}
}
