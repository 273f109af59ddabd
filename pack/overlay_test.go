package pack_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

func baseOverlay() *pack.Overlay {
	return &pack.Overlay{OverlayID: "ov_support_prod_in", Base: "ctxpack.support@1.0.0", Environment: "prod"}
}

func TestApplyOverlayAllowed(t *testing.T) {
	o := baseOverlay()
	o.EndpointRefs = map[string]string{"adp_orders": "internal://orders-prod"}
	o.AdapterApprovalModes = map[string]pack.ApprovalMode{"adp_orders": runcontext.LocalWrite}
	o.Guardrails = pack.Guardrails{MustEscalate: []string{"chargeback_open"}, RedactionRules: []string{"iban", "pan"}}
	o.EnvironmentDefaults = &pack.EnvironmentDefaults{Locale: "en-IN", Currency: "INR", Timezone: "Asia/Kolkata"}
	o.EvalTargets = []pack.EvalTarget{{Intent: "support.refund", Policy: ptr(1.0), LatencyP99MS: ptr(2500.0)}}
	o.PolicyBundles = []pack.PolicyBundle{{BundleID: "POLICY_REGION_IN", Priority: 5, PolicyDSL: pack.PolicyDSL{Language: "jsonlogic", Rules: []pack.Rule{{
		RuleID: "R_IN_LOWER_THRESHOLD", AppliesTo: map[string]any{"intent": "support.refund"}, If: rawJSON(`{">": [{"var": "request.context.refund_amount"}, 2000]}`),
		Then: &pack.Effect{Allow: ptr(true), RequiresApprovalGate: "GATE_FINANCE_APPROVAL"}, DecisionBinding: "support.refund.execute", Rationale: "stricter threshold in IN",
	}}}}}
	// The adapter is now local_write, so its permission needs idempotency: the overlay tightens it too.
	o.Permissions = []pack.Permission{{PermissionID: "p_orders_lookup", AdapterID: "adp_orders", Capability: "lookup", Allow: true,
		ArgConstraints: map[string]map[string]any{"idempotency_key": {"required": true}}}}
	base := canonical(t)
	view, applied, err := pack.ApplyOverlay(base, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if view.ToolingLayer.AdapterRegistry[0].EndpointRef != "internal://orders-prod" || view.ToolingLayer.AdapterRegistry[0].ApprovalMode != runcontext.LocalWrite {
		t.Errorf("adapter not overlaid: %+v", view.ToolingLayer.AdapterRegistry[0])
	}
	if g := view.PolicyLayer.Guardrails; len(g.MustEscalate) != 2 || len(g.RedactionRules) != 3 {
		t.Errorf("guardrails not added (without duplicates): %+v", g)
	}
	if d := view.PackMeta.EnvironmentDefaults; d.Locale != "en-IN" || d.Language != "en" {
		t.Errorf("defaults: %+v", d)
	}
	if et := view.EvaluationLayer.EvalTargets[0]; *et.LatencyP99MS != 2500 || *et.Utility != 0.9 {
		t.Errorf("eval target not tightened: %+v", et)
	}
	if len(view.PolicyLayer.PolicyBundles) != 2 {
		t.Error("bundle not added")
	}
	if applied.OverlayID != "ov_support_prod_in" || applied.Environment != "prod" || len(applied.Hash) != len("sha256:")+64 {
		t.Errorf("applied = %+v", applied)
	}
	if base.ToolingLayer.AdapterRegistry[0].EndpointRef != "internal://orders" {
		t.Error("ApplyOverlay modified the base pack")
	}
	// Same overlay, same hash.
	_, again, _ := pack.ApplyOverlay(canonical(t), o, nil)
	if again.Hash != applied.Hash {
		t.Error("overlay hash not deterministic")
	}
}

func TestApplyOverlayRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(o *pack.Overlay)
		rule   string
	}{
		{"other base", func(o *pack.Overlay) { o.Base = "ctxpack.support@1.0.1" }, pack.OverlayBase},
		{"grant permission", func(o *pack.Overlay) {
			o.Permissions = []pack.Permission{{PermissionID: "p_refund_all", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true}}
		}, pack.OverlayGrant},
		{"repoint permission", func(o *pack.Overlay) {
			o.Permissions = []pack.Permission{{PermissionID: "p_orders_lookup", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true}}
		}, pack.OverlayGrant},
		{"endpoint of unknown adapter", func(o *pack.Overlay) { o.EndpointRefs = map[string]string{"adp_crm": "internal://crm"} }, pack.OverlayGrant},
		{"lower adapter mode", func(o *pack.Overlay) {
			o.AdapterApprovalModes = map[string]pack.ApprovalMode{"adp_payments": runcontext.ReadOnly}
		}, pack.OverlayLowerMode},
		{"drop approval gate", func(o *pack.Overlay) {
			o.Permissions = []pack.Permission{{PermissionID: "p_issue_refund", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true,
				ArgConstraints: map[string]map[string]any{"amount_inr": {"min": 1.0, "max": 50000.0}, "idempotency_key": {"required": true}}}}
		}, pack.OverlayLoosen},
		{"raise max", func(o *pack.Overlay) {
			o.Permissions = []pack.Permission{{PermissionID: "p_issue_refund", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true, RequiresApprovalGate: "GATE_FINANCE_APPROVAL",
				ArgConstraints: map[string]map[string]any{"amount_inr": {"min": 1.0, "max": 90000.0}, "idempotency_key": {"required": true}}}}
		}, pack.OverlayLoosen},
		{"change outcomes", func(o *pack.Overlay) {
			o.DecisionSpecs = []pack.DecisionSpec{{DecisionKey: "support.refund.execute", Version: "1.0.0", AllowedOutcomes: []string{"approved", "denied"}, ApprovalMode: runcontext.Destructive,
				RequiredEvidence: []string{"identity_verified", "order_lookup", "policy_eval"}}}
		}, pack.OverlayOutcomes},
		{"lower decision mode", func(o *pack.Overlay) {
			o.DecisionSpecs = []pack.DecisionSpec{{DecisionKey: "support.refund.execute", Version: "1.0.0", AllowedOutcomes: []string{"approved", "denied", "escalated"}, ApprovalMode: runcontext.Network,
				RequiredEvidence: []string{"identity_verified", "order_lookup", "policy_eval"}}}
		}, pack.OverlayLowerMode},
		{"swap ontology namespace", func(o *pack.Overlay) { o.Ontology = &pack.Ontology{Namespace: "ont.billing", Version: "1.0.0"} }, pack.OverlayOntology},
		{"insert secret", func(o *pack.Overlay) {
			o.EndpointRefs = map[string]string{"adp_orders": "internal://svc:p4ssw0rd@orders"}
		}, pack.OverlaySecret},
		{"insert secret in metadata", func(o *pack.Overlay) { o.Metadata = map[string]any{"password": "hunter2"} }, pack.OverlaySecret},
		{"loosen eval target", func(o *pack.Overlay) {
			o.EvalTargets = []pack.EvalTarget{{Intent: "support.refund", Utility: ptr(0.5)}}
		}, pack.OverlayLoosen},
		{"added rule lowers mode", func(o *pack.Overlay) {
			o.PolicyBundles = []pack.PolicyBundle{{BundleID: "B2", Priority: 1, PolicyDSL: pack.PolicyDSL{Language: "jsonlogic", Rules: []pack.Rule{{
				RuleID: "R_X", If: rawJSON(`true`), Then: &pack.Effect{Allow: ptr(true), ApprovalMode: runcontext.ReadOnly}, DecisionBinding: "support.refund.execute", Rationale: "x"}}}}}
		}, pack.OverlayLowerMode},
		{"result invalid", func(o *pack.Overlay) { o.EndpointRefs = map[string]string{"adp_orders": "orders.local"} }, pack.OverlayInvalidAfter},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := baseOverlay()
			tc.mutate(o)
			_, _, err := pack.ApplyOverlay(canonical(t), o, nil)
			var oe *pack.OverlayError
			if !errors.As(err, &oe) || !errors.Is(err, pack.ErrOverlay) || oe.Rule != tc.rule {
				t.Errorf("ApplyOverlay = %v, want OverlayError %s", err, tc.rule)
			}
			if oe != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "p4ssw0rd")) {
				t.Errorf("error echoes a secret: %v", err)
			}
		})
	}
	// The ontology namespace may change with a major version bump.
	o := baseOverlay()
	o.Ontology = &pack.Ontology{Namespace: "ont.support2", Version: "2.0.0"}
	if _, _, err := pack.ApplyOverlay(canonical(t), o, nil); err != nil {
		t.Errorf("namespace swap with version bump: %v", err)
	}
}

func TestDecodeOverlay(t *testing.T) {
	o, err := pack.DecodeOverlay([]byte(`{"overlay_id":"ov1","base":"ctxpack.support@1.0.0","environment":"staging","endpoint_refs":{"adp_orders":"internal://orders-staging"}}`))
	if err != nil || o.EndpointRefs["adp_orders"] != "internal://orders-staging" {
		t.Fatalf("DecodeOverlay = %+v, %v", o, err)
	}
	if _, err := pack.DecodeOverlay([]byte(`{"overlay_id":"ov1","base":"x","environment":"e","grant":{"adp":"all"}}`)); !errors.Is(err, pack.ErrInvalid) {
		t.Errorf("unknown overlay field: %v", err)
	}
}

// An overlay has no way to remove a guardrail or a redaction rule: listing
// fewer adds nothing and removes nothing.
func TestOverlayCannotRemoveGuardrails(t *testing.T) {
	o := baseOverlay()
	o.Guardrails = pack.Guardrails{RedactionRules: []string{"pan"}}
	view, _, err := pack.ApplyOverlay(canonical(t), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := view.PolicyLayer.Guardrails; !slices.Equal(g.RedactionRules, []string{"pan", "credit_card"}) || !slices.Equal(g.MustRefuse, []string{"refund_without_identity"}) {
		t.Errorf("guardrails after the overlay: %+v", g)
	}
}
