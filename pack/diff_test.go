package pack_test

import (
	"testing"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

func TestDiffClasses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		version string
		mutate  func(p *pack.Pack)
		class   pack.Class
		ok      bool
	}{
		{"metadata only", "1.0.1", func(p *pack.Pack) {
			p.PackMeta.Description = "support pack"
			p.PackMeta.Metadata = map[string]any{"owner": "support-platform"}
		}, pack.ClassPatch, true},
		{"rationale typo", "1.0.1", func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[0].Rationale = "Refunds need verified identity."
		}, pack.ClassPatch, true},
		{"stricter threshold", "1.1.0", func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].If = rawJSON(`{"and":[{"==":[{"var":"user.role"},"support_agent"]},{">":[{"var":"request.context.refund_amount"},2000]}]}`)
		}, pack.ClassMinor, true},
		{"additional redaction", "1.1.0", func(p *pack.Pack) {
			p.PolicyLayer.Guardrails.RedactionRules = append(p.PolicyLayer.Guardrails.RedactionRules, "iban")
		}, pack.ClassMinor, true},
		{"new evaluator target", "1.1.0", func(p *pack.Pack) {
			p.EvaluationLayer.ReleaseGates = append(p.EvaluationLayer.ReleaseGates, pack.ReleaseGate{Metric: "economics_cents_per_decision", MaxDelta: 0.25})
		}, pack.ClassMinor, true},
		{"additional read-only evidence source", "1.1.0", func(p *pack.Pack) {
			p.ToolingLayer.AdapterRegistry = append(p.ToolingLayer.AdapterRegistry, pack.Adapter{AdapterID: "adp_crm", Type: "OPENAPI", EndpointRef: "internal://crm", Capabilities: []string{"profile"}, ApprovalMode: runcontext.ReadOnly})
			p.ToolingLayer.Permissions = append(p.ToolingLayer.Permissions, pack.Permission{PermissionID: "p_crm_profile", AdapterID: "adp_crm", Capability: "profile", Allow: true})
		}, pack.ClassMinor, true},
		{"minor change with patch bump", "1.0.1", func(p *pack.Pack) {
			p.PolicyLayer.Guardrails.RedactionRules = append(p.PolicyLayer.Guardrails.RedactionRules, "iban")
		}, pack.ClassMinor, false},
		{"new write capability", "2.0.0", func(p *pack.Pack) {
			p.ToolingLayer.AdapterRegistry[2].Capabilities = append(p.ToolingLayer.AdapterRegistry[2].Capabilities, "void_refund")
			p.ToolingLayer.Permissions = append(p.ToolingLayer.Permissions, pack.Permission{PermissionID: "p_void", AdapterID: "adp_payments", Capability: "void_refund", Allow: true,
				RequiresApprovalGate: "GATE_FINANCE_APPROVAL", ArgConstraints: map[string]map[string]any{"idempotency_key": {"required": true}}})
		}, pack.ClassMajor, true},
		{"removed capability", "2.0.0", func(p *pack.Pack) {
			p.ToolingLayer.Permissions = p.ToolingLayer.Permissions[:2]
			p.ToolingLayer.AdapterRegistry = p.ToolingLayer.AdapterRegistry[:2]
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].Then.ApprovalMode = runcontext.Destructive
		}, pack.ClassMajor, true},
		{"changed outcome set", "2.0.0", func(p *pack.Pack) { p.DecisionLayer.DecisionSpecs[0].AllowedOutcomes = []string{"approved", "denied"} }, pack.ClassMajor, true},
		{"changed required evidence", "2.0.0", func(p *pack.Pack) {
			p.DecisionLayer.DecisionSpecs[0].RequiredEvidence = []string{"identity_verified", "order_lookup"}
		}, pack.ClassMajor, true},
		{"changed ontology semantics", "2.0.0", func(p *pack.Pack) { p.IntelligenceRefs.Ontology.EntityTypes = []string{"Customer"} }, pack.ClassMajor, true},
		{"major change with minor bump", "1.1.0", func(p *pack.Pack) { p.DecisionLayer.DecisionSpecs[0].AllowedOutcomes = []string{"approved", "denied"} }, pack.ClassMajor, false},
		{"permission without adapter", "2.0.0", func(p *pack.Pack) { p.ToolingLayer.Permissions[0].AdapterID = "adp_gone" }, pack.ClassReject, false},
		{"binding without decision spec", "2.0.0", func(p *pack.Pack) { p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[0].DecisionBinding = "x" }, pack.ClassReject, false},
		{"destructive without gate", "2.0.0", func(p *pack.Pack) { p.ToolingLayer.Permissions[2].RequiresApprovalGate = "" }, pack.ClassReject, false},
		{"version not increased", "1.0.0", func(p *pack.Pack) { p.PackMeta.Description = "x" }, pack.ClassPatch, false},
		{"gate allows self-approval", "2.0.0", func(p *pack.Pack) { p.PolicyLayer.ApprovalGates[0].AllowSelfApproval = true }, pack.ClassMajor, true},
		{"self-approval with minor bump", "1.1.0", func(p *pack.Pack) { p.PolicyLayer.ApprovalGates[0].AllowSelfApproval = true }, pack.ClassMajor, false},
		{"looser threshold", "1.1.0", func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].If = rawJSON(`{"and":[{"==":[{"var":"user.role"},"support_agent"]},{">":[{"var":"request.context.refund_amount"},9000]}]}`)
		}, pack.ClassMajor, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			old := canonical(t)
			next := mutated(t, tc.mutate)
			next.PackMeta.PackVersion = tc.version
			got := pack.Diff(old, next, nil)
			if got.Class != tc.class || got.VersionOK != tc.ok {
				t.Errorf("Diff = %s (version ok %v: %s), want %s (ok %v)\n%+v", got.Class, got.VersionOK, got.Version, tc.class, tc.ok, got.Changes)
			}
			if len(got.Changes) == 0 {
				t.Error("no reasons given")
			}
		})
	}
	same := pack.Diff(canonical(t), canonical(t), nil)
	if same.Class != pack.ClassPatch || len(same.Changes) != 0 || same.VersionOK {
		t.Errorf("identical packs: %+v", same)
	}
	other := mutated(t, func(p *pack.Pack) { p.PackMeta.PackID = "ctxpack.billing"; p.PackMeta.PackVersion = "2.0.0" })
	if d := pack.Diff(canonical(t), other, nil); d.Class != pack.ClassReject {
		t.Errorf("different pack id: %s", d.Class)
	}
}

// Guard changes that provably only constrain stay minor: the monotonicity
// check does not class every change as major.
func TestDiffGuardTightening(t *testing.T) {
	t.Parallel()
	const amt = `{"var":"request.context.refund_amount"}`
	const role = `{"==":[{"var":"user.role"},"support_agent"]}`
	tests := []struct {
		name       string
		base, next func(p *pack.Pack)
	}{
		{"gate threshold lowered", nil, setWhen(`{">":[` + amt + `,1000]}`)},
		{"gate > becomes >=", nil, setWhen(`{">=":[` + amt + `,3000]}`)},
		{"gate operands swapped", nil, setWhen(`{"<":[3000,` + amt + `]}`)},
		{"gate disjunct added", nil, setWhen(`{"or":[{">":[` + amt + `,3000]},` + role + `]}`)},
		{"gate conjunct removed", setWhen(`{"and":[` + role + `,{">":[` + amt + `,3000]}]}`), setWhen(`{">":[` + amt + `,3000]}`)},
		{"gated rule's conjunct removed", nil, func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].If = rawJSON(`{">":[` + amt + `,3000]}`)
		}},
		{"allowing branch narrowed where else denies", func(p *pack.Pack) {
			r := &p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[0]
			r.If, r.Then = rawJSON(`{"<":[`+amt+`,10000]}`), &pack.Effect{Allow: ptr(true)}
		}, func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[0].If = rawJSON(`{"<":[` + amt + `,5000]}`)
		}},
		{"deny permission added", func(p *pack.Pack) {
			p.ToolingLayer.AdapterRegistry[2].Capabilities = append(p.ToolingLayer.AdapterRegistry[2].Capabilities, "void_refund")
		}, deny("p_no_void", "void_refund")},
		{"pack cache ttl lowered", nil, func(p *pack.Pack) { p.PackMeta.TTLSeconds = 3600 }},
		{"enum narrowed", constrain("currency", map[string]any{"enum": []any{"INR", "USD"}}), constrain("currency", map[string]any{"enum": []any{"INR"}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			old := canonical(t)
			if tc.base != nil {
				tc.base(old)
			}
			next := mutated(t, both(func(p *pack.Pack) {
				if tc.base != nil {
					tc.base(p)
				}
			}, tc.next))
			next.PackMeta.PackVersion = "1.1.0"
			if got := pack.Diff(old, next, nil); got.Class != pack.ClassMinor || !got.VersionOK {
				t.Errorf("Diff = %s (version ok %v), want minor\n%+v", got.Class, got.VersionOK, got.Changes)
			}
		})
	}
}
