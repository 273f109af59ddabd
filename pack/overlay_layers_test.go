package pack

import (
	"encoding/json"
	"testing"

	"github.com/contextos/contextos/runcontext"
	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Each layer ApplyOverlay touches is applied by one function; these tables
// pin what each applies and which overlay rule (and path) it refuses.

func layerBase() *Pack {
	deny := false
	return &Pack{
		PackMeta:         PackMeta{EnvironmentDefaults: EnvironmentDefaults{Language: "en", Currency: "INR"}},
		IntelligenceRefs: IntelligenceRefs{Ontology: Ontology{Namespace: "ont.support", Version: "1.0.0"}},
		ToolingLayer: ToolingLayer{
			AdapterRegistry: []Adapter{
				{AdapterID: "adp_orders", EndpointRef: "internal://orders", ApprovalMode: runcontext.ReadOnly},
				{AdapterID: "adp_payments", EndpointRef: "internal://payments", ApprovalMode: runcontext.Network},
			},
			Permissions: []Permission{
				{PermissionID: "p_lookup", AdapterID: "adp_orders", Capability: "lookup", Allow: true},
				{PermissionID: "p_refund", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true, ApprovalMode: runcontext.Network,
					RequiresApprovalGate: "G1", ArgConstraints: map[string]map[string]any{"amount": {"max": 500.0}}},
				{PermissionID: "p_void", AdapterID: "adp_payments", Capability: "void"},
			},
		},
		PolicyLayer: PolicyLayer{
			PolicyBundles: []PolicyBundle{{BundleID: "b1", PolicyDSL: PolicyDSL{Language: "jsonlogic", Rules: []Rule{
				{RuleID: "r1", AppliesTo: map[string]any{"intent": "support.refund"}, If: json.RawMessage(`true`), Then: &Effect{Allow: &deny}},
			}}}},
			Guardrails:    Guardrails{MustRefuse: []string{"fraud"}},
			ApprovalGates: []ApprovalGate{{GateID: "G1", When: json.RawMessage(`true`), RequiredApproverRole: "finance", TTLSeconds: 60}},
		},
		DecisionLayer: DecisionLayer{DecisionSpecs: []DecisionSpec{{
			DecisionKey: "refund_decision", Version: "1.0.0", RequiredEvidence: []string{"order_lookup"},
			AllowedOutcomes: []string{"approved", "denied"}, RefusalOutcomes: []string{"denied"}, ApprovalMode: runcontext.Network,
		}}},
		EvaluationLayer: EvaluationLayer{EvalTargets: []EvalTarget{{Intent: "support.refund", Policy: ptrTo(0.9), LatencyP99MS: ptrTo(2000.0)}}},
	}
}

func ptrTo[T any](v T) *T { return &v }

// refusal is what a test compares of an *OverlayError.
type refusal struct{ Rule, Path string }

func refusalOf(e *OverlayError) *refusal {
	if e == nil {
		return nil
	}
	return &refusal{e.Rule, e.Path}
}

type layerCase struct {
	name    string
	overlay Overlay
	want    *refusal          // nil: applied
	check   func(p *Pack) any // the part of the view the case pins
	wantGot any
}

func runLayerCases(t *testing.T, apply func(*Pack, *Overlay) *OverlayError, cases []layerCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			view := layerBase()
			got := refusalOf(apply(view, &c.overlay))
			if diff := gocmp.Diff(c.want, got); diff != "" {
				t.Fatalf("refusal (-want +got):\n%s", diff)
			}
			if c.want == nil && c.check != nil {
				if diff := gocmp.Diff(c.wantGot, c.check(view), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("applied view (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestOverlayTooling(t *testing.T) {
	t.Parallel()
	endpoints := func(p *Pack) any {
		return map[string]string{"adp_orders": p.ToolingLayer.AdapterRegistry[0].EndpointRef, "adp_payments": p.ToolingLayer.AdapterRegistry[1].EndpointRef}
	}
	refund := func(p *Pack) any { return p.ToolingLayer.Permissions[1] }
	tightRefund := Permission{PermissionID: "p_refund", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true, ApprovalMode: runcontext.Delegated,
		RequiresApprovalGate: "G1", ArgConstraints: map[string]map[string]any{"amount": {"max": 100.0}}}
	runLayerCases(t, overlayTooling, []layerCase{
		{name: "no tooling change", check: endpoints, wantGot: map[string]string{"adp_orders": "internal://orders", "adp_payments": "internal://payments"}},
		{name: "endpoint swapped", overlay: Overlay{EndpointRefs: map[string]string{"adp_orders": "internal://orders-staging"}},
			check: endpoints, wantGot: map[string]string{"adp_orders": "internal://orders-staging", "adp_payments": "internal://payments"}},
		{name: "endpoint of an unknown adapter", overlay: Overlay{EndpointRefs: map[string]string{"adp_new": "internal://x"}},
			want: &refusal{OverlayGrant, "endpoint_refs.adp_new"}},
		{name: "adapter mode raised", overlay: Overlay{AdapterApprovalModes: map[string]ApprovalMode{"adp_orders": runcontext.Network}},
			check: func(p *Pack) any { return p.ToolingLayer.AdapterRegistry[0].ApprovalMode }, wantGot: runcontext.Network},
		{name: "adapter mode lowered", overlay: Overlay{AdapterApprovalModes: map[string]ApprovalMode{"adp_payments": runcontext.ReadOnly}},
			want: &refusal{OverlayLowerMode, "adapter_approval_modes.adp_payments"}},
		{name: "adapter mode invalid", overlay: Overlay{AdapterApprovalModes: map[string]ApprovalMode{"adp_payments": "root"}},
			want: &refusal{OverlayLowerMode, "adapter_approval_modes.adp_payments"}},
		{name: "mode of an unknown adapter", overlay: Overlay{AdapterApprovalModes: map[string]ApprovalMode{"adp_new": runcontext.Network}},
			want: &refusal{OverlayGrant, "adapter_approval_modes.adp_new"}},
		{name: "permission tightened", overlay: Overlay{Permissions: []Permission{tightRefund}}, check: refund, wantGot: tightRefund},
		{name: "unknown permission", overlay: Overlay{Permissions: []Permission{{PermissionID: "p_new", AdapterID: "adp_orders", Capability: "lookup", Allow: true}}},
			want: &refusal{OverlayGrant, "permissions[0]"}},
		{name: "permission re-pointed", overlay: Overlay{Permissions: []Permission{{PermissionID: "p_lookup", AdapterID: "adp_payments", Capability: "void", Allow: true}}},
			want: &refusal{OverlayGrant, "permissions[0]"}},
		{name: "denied permission allowed", overlay: Overlay{Permissions: []Permission{{PermissionID: "p_void", AdapterID: "adp_payments", Capability: "void", Allow: true}}},
			want: &refusal{OverlayGrant, "permissions[0].allow"}},
		{name: "gate dropped", overlay: Overlay{Permissions: []Permission{func() Permission { q := tightRefund; q.RequiresApprovalGate = ""; return q }()}},
			want: &refusal{OverlayLoosen, "permissions[0].requires_approval_gate"}},
		{name: "permission mode lowered", overlay: Overlay{Permissions: []Permission{func() Permission { q := tightRefund; q.ApprovalMode = runcontext.ReadOnly; return q }()}},
			want: &refusal{OverlayLowerMode, "permissions[0].approval_mode"}},
		{name: "argument bound loosened", overlay: Overlay{Permissions: []Permission{func() Permission {
			q := tightRefund
			q.ArgConstraints = map[string]map[string]any{"amount": {"max": 5000.0}}
			return q
		}()}}, want: &refusal{OverlayLoosen, "permissions[0].arg_constraints"}},
	})
}

func TestOverlayPolicy(t *testing.T) {
	t.Parallel()
	deny := false
	stricter := Rule{RuleID: "r_night", AppliesTo: map[string]any{"intent": "support.refund"}, If: json.RawMessage(`true`), Then: &Effect{RequiresApprovalGate: "G1"}}
	bundle := func(r Rule) []PolicyBundle {
		return []PolicyBundle{{BundleID: "b_env", PolicyDSL: PolicyDSL{Language: "jsonlogic", Rules: []Rule{r}}}}
	}
	policy := func(p *Pack) any {
		ids := []string{}
		for _, b := range p.PolicyLayer.PolicyBundles {
			ids = append(ids, b.BundleID)
		}
		gates := []string{}
		for _, g := range p.PolicyLayer.ApprovalGates {
			gates = append(gates, g.GateID)
		}
		return map[string]any{"bundles": ids, "guardrails": p.PolicyLayer.Guardrails, "gates": gates}
	}
	runLayerCases(t, overlayPolicy, []layerCase{
		{name: "no policy change", check: policy, wantGot: map[string]any{"bundles": []string{"b1"}, "guardrails": Guardrails{MustRefuse: []string{"fraud"}}, "gates": []string{"G1"}}},
		{name: "stricter rule added", overlay: Overlay{PolicyBundles: bundle(stricter)},
			check: policy, wantGot: map[string]any{"bundles": []string{"b1", "b_env"}, "guardrails": Guardrails{MustRefuse: []string{"fraud"}}, "gates": []string{"G1"}}},
		{name: "rule for a new intent", overlay: Overlay{PolicyBundles: bundle(Rule{RuleID: "r_x", AppliesTo: map[string]any{"intent": "support.cancel"}, If: json.RawMessage(`true`), Then: &Effect{Allow: &deny}})},
			want: &refusal{OverlayNewIntent, "policy_bundles[0].policy_dsl.rules[0].applies_to.intent"}},
		{name: "rule that allows", overlay: Overlay{PolicyBundles: bundle(Rule{RuleID: "r_x", If: json.RawMessage(`true`), Then: &Effect{Allow: ptrTo(true)}})},
			want: &refusal{OverlayExpand, "policy_bundles[0].policy_dsl.rules[0]"}},
		{name: "rule lowering its decision's mode", overlay: Overlay{PolicyBundles: bundle(Rule{RuleID: "r_x", If: json.RawMessage(`true`), DecisionBinding: "refund_decision", Then: &Effect{ApprovalMode: runcontext.ReadOnly}})},
			want: &refusal{OverlayLowerMode, "policy_bundles[0].policy_dsl.rules[0]"}},
		{name: "guardrails added once", overlay: Overlay{Guardrails: Guardrails{MustRefuse: []string{"fraud", "abuse"}, MustEscalate: []string{"legal"}, RedactionRules: []string{"pan"}}},
			check: policy, wantGot: map[string]any{"bundles": []string{"b1"}, "guardrails": Guardrails{MustRefuse: []string{"fraud", "abuse"}, MustEscalate: []string{"legal"}, RedactionRules: []string{"pan"}}, "gates": []string{"G1"}}},
		{name: "gate added", overlay: Overlay{ApprovalGates: []ApprovalGate{{GateID: "G2", When: json.RawMessage(`true`), RequiredApproverRole: "lead", TTLSeconds: 60}}},
			check: policy, wantGot: map[string]any{"bundles": []string{"b1"}, "guardrails": Guardrails{MustRefuse: []string{"fraud"}}, "gates": []string{"G1", "G2"}}},
		{name: "gate redefined", overlay: Overlay{ApprovalGates: []ApprovalGate{{GateID: "G1", When: json.RawMessage(`false`)}}},
			want: &refusal{OverlayRedefineGate, "approval_gates[0].gate_id"}},
	})
}

func TestOverlayEnvironment(t *testing.T) {
	t.Parallel()
	defaults := func(p *Pack) any { return p.PackMeta.EnvironmentDefaults }
	runLayerCases(t, overlayEnvironment, []layerCase{
		{name: "none", check: defaults, wantGot: EnvironmentDefaults{Language: "en", Currency: "INR"}},
		{name: "set ones replace", overlay: Overlay{EnvironmentDefaults: &EnvironmentDefaults{Locale: "en-IN", Currency: "USD"}},
			check: defaults, wantGot: EnvironmentDefaults{Language: "en", Locale: "en-IN", Currency: "USD"}},
		{name: "all five", overlay: Overlay{EnvironmentDefaults: &EnvironmentDefaults{Language: "hi", Locale: "hi-IN", Timezone: "Asia/Kolkata", Currency: "INR", Region: "in"}},
			check: defaults, wantGot: EnvironmentDefaults{Language: "hi", Locale: "hi-IN", Timezone: "Asia/Kolkata", Currency: "INR", Region: "in"}},
	})
}

func TestOverlayEvaluation(t *testing.T) {
	t.Parallel()
	target := func(p *Pack) any { return p.EvaluationLayer.EvalTargets[0] }
	runLayerCases(t, overlayEvaluation, []layerCase{
		{name: "policy raised, latency lowered, safety set", overlay: Overlay{EvalTargets: []EvalTarget{{Intent: "support.refund", Policy: ptrTo(0.95), LatencyP99MS: ptrTo(1500.0), Safety: ptrTo(0.99)}}},
			check: target, wantGot: EvalTarget{Intent: "support.refund", Policy: ptrTo(0.95), LatencyP99MS: ptrTo(1500.0), Safety: ptrTo(0.99)}},
		{name: "policy lowered", overlay: Overlay{EvalTargets: []EvalTarget{{Intent: "support.refund", Policy: ptrTo(0.5)}}},
			want: &refusal{OverlayLoosen, "eval_targets[0]"}},
		{name: "latency raised", overlay: Overlay{EvalTargets: []EvalTarget{{Intent: "support.refund", LatencyP99MS: ptrTo(9000.0)}}},
			want: &refusal{OverlayLoosen, "eval_targets[0]"}},
		{name: "new intent", overlay: Overlay{EvalTargets: []EvalTarget{{Intent: "support.cancel", Policy: ptrTo(0.9)}}},
			want: &refusal{OverlayNewIntent, "eval_targets[0].intent"}},
	})
}

func TestOverlayDecisions(t *testing.T) {
	t.Parallel()
	base := layerBase().DecisionLayer.DecisionSpecs[0]
	with := func(f func(s *DecisionSpec)) []DecisionSpec {
		s := base
		s.RequiredEvidence = append([]string(nil), base.RequiredEvidence...)
		f(&s)
		return []DecisionSpec{s}
	}
	spec := func(p *Pack) any { return p.DecisionLayer.DecisionSpecs[0] }
	raised := with(func(s *DecisionSpec) {
		s.ApprovalMode = runcontext.Delegated
		s.RequiredEvidence = append(s.RequiredEvidence, "policy_eval")
	})
	runLayerCases(t, overlayDecisions, []layerCase{
		{name: "mode raised, evidence added", overlay: Overlay{DecisionSpecs: raised}, check: spec, wantGot: raised[0]},
		{name: "unknown decision", overlay: Overlay{DecisionSpecs: with(func(s *DecisionSpec) { s.DecisionKey = "other" })},
			want: &refusal{OverlayGrant, "decision_specs[0]"}},
		{name: "outcomes changed", overlay: Overlay{DecisionSpecs: with(func(s *DecisionSpec) { s.AllowedOutcomes = []string{"approved"} })},
			want: &refusal{OverlayOutcomes, "decision_specs[0].allowed_outcomes"}},
		{name: "refusals changed", overlay: Overlay{DecisionSpecs: with(func(s *DecisionSpec) { s.RefusalOutcomes = nil })},
			want: &refusal{OverlayOutcomes, "decision_specs[0].allowed_outcomes"}},
		{name: "mode lowered", overlay: Overlay{DecisionSpecs: with(func(s *DecisionSpec) { s.ApprovalMode = runcontext.ReadOnly })},
			want: &refusal{OverlayLowerMode, "decision_specs[0].approval_mode"}},
		{name: "evidence dropped", overlay: Overlay{DecisionSpecs: with(func(s *DecisionSpec) { s.RequiredEvidence = nil })},
			want: &refusal{OverlayLoosen, "decision_specs[0].required_evidence"}},
		{name: "contract changed", overlay: Overlay{DecisionSpecs: with(func(s *DecisionSpec) { s.OwnerRole = "someone" })},
			want: &refusal{OverlayContract, "decision_specs[0]"}},
	})
}

func TestOverlayOntology(t *testing.T) {
	t.Parallel()
	ontology := func(p *Pack) any { return p.IntelligenceRefs.Ontology }
	runLayerCases(t, overlayOntology, []layerCase{
		{name: "none", check: ontology, wantGot: Ontology{Namespace: "ont.support", Version: "1.0.0"}},
		{name: "same namespace, types added", overlay: Overlay{Ontology: &Ontology{Namespace: "ont.support", Version: "1.1.0", EntityTypes: []string{"order"}}},
			check: ontology, wantGot: Ontology{Namespace: "ont.support", Version: "1.1.0", EntityTypes: []string{"order"}}},
		{name: "namespace swapped with a major bump", overlay: Overlay{Ontology: &Ontology{Namespace: "ont.care", Version: "2.0.0"}},
			check: ontology, wantGot: Ontology{Namespace: "ont.care", Version: "2.0.0"}},
		{name: "namespace swapped without a major bump", overlay: Overlay{Ontology: &Ontology{Namespace: "ont.care", Version: "1.2.0"}},
			want: &refusal{OverlayOntology, "ontology.namespace"}},
		{name: "namespace swapped, version not semver", overlay: Overlay{Ontology: &Ontology{Namespace: "ont.care", Version: "two"}},
			want: &refusal{OverlayOntology, "ontology.namespace"}},
	})
}
