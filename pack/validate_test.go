package pack_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

func TestCanonicalPackValidatesClean(t *testing.T) {
	if err := pack.Validate(canonical(t), nil); err != nil {
		t.Fatalf("Validate(seed full example) = %v", err)
	}
	p := canonical(t)
	if got := pack.ServedIntents(p); !slices.Equal(got, []string{"support.refund"}) {
		t.Errorf("ServedIntents = %v", got)
	}
	if r, _ := p.Ref(); r.String() != "ctxpack.support@1.0.0" {
		t.Errorf("Ref = %s", r)
	}
}

// Each failure mode of seed 003 (the versioning "reject" row, the failure
// modes table, the validation gates) produces exactly this error.
func TestFailureModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(p *pack.Pack)
		want   pack.Problem
	}{
		{"permission without adapter", func(p *pack.Pack) { p.ToolingLayer.Permissions[0].AdapterID = "adp_ordrs" },
			pack.Problem{Gate: "referential", Code: "permission_without_adapter", Path: "tooling_layer.permissions[0].adapter_id", Message: `adapter "adp_ordrs" is not declared in tooling_layer.adapter_registry`}},
		{"permission with unknown capability", func(p *pack.Pack) { p.ToolingLayer.Permissions[0].Capability = "delete" },
			pack.Problem{Gate: "referential", Code: "unknown_capability", Path: "tooling_layer.permissions[0].capability", Message: `capability "delete" is not one of adapter adp_orders's capabilities (lookup)`}},
		{"binding without decision spec", func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].DecisionBinding = "support.refund.exec"
		}, pack.Problem{Gate: "referential", Code: "binding_without_decision_spec", Path: "policy_layer.policy_bundles[0].policy_dsl.rules[1].decision_binding", Message: `decision_binding "support.refund.exec" does not resolve to a decision_layer.decision_specs[].decision_key`}},
		{"rule requires unknown gate", func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].Then.RequiresApprovalGate = "GATE_CFO"
		}, pack.Problem{Gate: "referential", Code: "unknown_approval_gate", Path: "policy_layer.policy_bundles[0].policy_dsl.rules[1].then.requires_approval_gate", Message: `requires_approval_gate "GATE_CFO" does not resolve to a policy_layer.approval_gates[].gate_id`}},
		{"gate id used as rule id", func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[0].RuleID = "GATE_FINANCE_APPROVAL"
		}, pack.Problem{Gate: "referential", Code: "gate_id_as_rule_id", Path: "policy_layer.policy_bundles[0].policy_dsl.rules[0].rule_id", Message: `"GATE_FINANCE_APPROVAL" is an approval gate id; a gate id is never a rule id`}},
		{"duplicate rule id", func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].RuleID = "R_REFUND_REQUIRES_IDV"
		}, pack.Problem{Gate: "referential", Code: "duplicate_id", Path: "policy_layer.policy_bundles[0].policy_dsl.rules[1].rule_id", Message: `rule_id "R_REFUND_REQUIRES_IDV" is already declared at policy_layer.policy_bundles[0].policy_dsl.rules[0]`}},
		{"duplicate adapter id", func(p *pack.Pack) { p.ToolingLayer.AdapterRegistry[1].AdapterID = "adp_orders" },
			pack.Problem{Gate: "referential", Code: "duplicate_id", Path: "tooling_layer.adapter_registry[1]", Message: `adapter_id "adp_orders" is already declared at index 0`}},
		{"evidence designates missing capability", func(p *pack.Pack) {
			p.DecisionLayer.DecisionSpecs[0].RequiredEvidence[1] = "order_history"
		}, pack.Problem{Gate: "referential", Code: "unresolvable_evidence", Path: "decision_layer.decision_specs[0].required_evidence[1]", Message: `"order_history" designates adp_orders.history, which adapter adp_orders does not declare`}},
		{"evidence designates missing adapter", func(p *pack.Pack) {
			p.DecisionLayer.DecisionSpecs[0].RequiredEvidence[1] = "adp_crm.lookup"
		}, pack.Problem{Gate: "referential", Code: "unresolvable_evidence", Path: "decision_layer.decision_specs[0].required_evidence[1]", Message: `"adp_crm.lookup" designates adapter adp_crm, which is not declared`}},
		{"evidence no permission exposes", func(p *pack.Pack) { p.ToolingLayer.Permissions[1].Allow = false },
			pack.Problem{Gate: "referential", Code: "unresolvable_evidence", Path: "decision_layer.decision_specs[0].required_evidence[2]", Message: `"policy_eval" designates adp_policy.eval, which no allowed permission exposes`}},
		{"raise of undeclared guardrail", func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[0].Else.Raise = []string{"refund_without_id"}
		}, pack.Problem{Gate: "referential", Code: "unknown_guardrail", Path: "policy_layer.policy_bundles[0].policy_dsl.rules[0].else.raise[0]", Message: `guardrail label "refund_without_id" is not declared in policy_layer.guardrails must_refuse or must_escalate`}},
		{"empty outcomes", func(p *pack.Pack) { p.DecisionLayer.DecisionSpecs[0].AllowedOutcomes = nil },
			pack.Problem{Gate: "referential", Code: "empty_outcomes", Path: "decision_layer.decision_specs[0].allowed_outcomes", Message: "allowed_outcomes must be a closed, non-empty set"}},
		{"unsupported operator", func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[0].If = rawJSON(`{"set": ["a", 1]}`)
		}, pack.Problem{Gate: "policy", Code: "invalid_expression", Path: "policy_layer.policy_bundles[0].policy_dsl.rules[0].if", Message: `set: unsupported operator "set"`}},
		{"unknown var root", func(p *pack.Pack) {
			p.PolicyLayer.ApprovalGates[0].When = rawJSON(`{">": [{"var": "context.refund_amount"}, 3000]}`)
		}, pack.Problem{Gate: "policy", Code: "unknown_var_root", Path: "policy_layer.approval_gates[0].when", Message: `var "context.refund_amount" does not start with a policy data document member (request, user, agent, tenant_id, session_id, intent, safety_mode, tool)`}},
		{"missing rationale", func(p *pack.Pack) { p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].Rationale = "" },
			pack.Problem{Gate: "policy", Code: "missing_rationale", Path: "policy_layer.policy_bundles[0].policy_dsl.rules[1].rationale", Message: "rule R_HIGH_VALUE_REQUIRES_APPROVAL must carry a rationale so operators know why it fired"}},
		{"unreachable critical rule", func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].If = rawJSON(`{">": [1, 2]}`)
		}, pack.Problem{Gate: "policy", Code: "unreachable_critical_rule", Path: "policy_layer.policy_bundles[0].policy_dsl.rules[1].then", Message: "rule R_HIGH_VALUE_REQUIRES_APPROVAL's then branch is critical but can never apply: its condition is always false"}},
		{"unsatisfiable gate", func(p *pack.Pack) { p.PolicyLayer.ApprovalGates[0].RequiredApproverRole = "" },
			pack.Problem{Gate: "policy", Code: "unsatisfiable_approval_gate", Path: "policy_layer.approval_gates[0].required_approver_role", Message: "gate GATE_FINANCE_APPROVAL names no approver role, so no approval can satisfy it"}},
		{"priority tie", func(p *pack.Pack) {
			b := p.PolicyLayer.PolicyBundles[0]
			b.BundleID = "POLICY_FRAUD_V1"
			b.PolicyDSL.Rules = []pack.Rule{{RuleID: "R_FRAUD_BLOCK", AppliesTo: map[string]any{"intent": "support.refund"}, If: rawJSON(`{"var": "request.context.fraud"}`),
				Then: &pack.Effect{Allow: ptr(false), Reason: "fraud"}, DecisionBinding: "support.refund.execute", Rationale: "fraud blocks refunds"}}
			p.PolicyLayer.PolicyBundles = append(p.PolicyLayer.PolicyBundles, b)
		}, pack.Problem{Gate: "policy", Code: "priority_tie", Path: "policy_layer.policy_bundles[1].priority", Message: "bundles POLICY_RETURNS_V4 and POLICY_FRAUD_V1 both have priority 10 and both govern decision support.refund.execute; give them distinct priorities"}},
		{"destructive capability without gate", func(p *pack.Pack) { p.ToolingLayer.Permissions[2].RequiresApprovalGate = "" },
			pack.Problem{Gate: "risk", Code: "destructive_without_gate", Path: "tooling_layer.permissions[2].requires_approval_gate", Message: "permission p_issue_refund exposes destructive capability adp_payments.issue_refund without an approval gate"}},
		{"missing idempotency", func(p *pack.Pack) { delete(p.ToolingLayer.Permissions[2].ArgConstraints, "idempotency_key") },
			pack.Problem{Gate: "risk", Code: "missing_idempotency", Path: "tooling_layer.permissions[2].arg_constraints.idempotency_key", Message: "permission p_issue_refund exposes write-class capability adp_payments.issue_refund (destructive) without arg_constraints.idempotency_key.required"}},
		{"permission above adapter mode", func(p *pack.Pack) { p.ToolingLayer.Permissions[0].ApprovalMode = runcontext.Network },
			pack.Problem{Gate: "risk", Code: "permission_above_adapter_mode", Path: "tooling_layer.permissions[0].approval_mode", Message: "permission p_orders_lookup asks for network, above adapter adp_orders's approval_mode read_only"}},
		{"decision mode below bound tool", func(p *pack.Pack) { p.DecisionLayer.DecisionSpecs[0].ApprovalMode = runcontext.Delegated },
			pack.Problem{Gate: "risk", Code: "decision_mode_too_low", Path: "decision_layer.decision_specs[0].approval_mode", Message: "decision support.refund.execute has approval_mode delegated but bound tool adp_payments.issue_refund can produce destructive"}},
		{"raw endpoint url", func(p *pack.Pack) { p.ToolingLayer.AdapterRegistry[0].EndpointRef = "https://orders.acme.example/v1" },
			pack.Problem{Gate: "tenancy", Code: "raw_endpoint", Path: "tooling_layer.adapter_registry[0].endpoint_ref", Message: `scheme "https" is not a registry reference (internal://…, registry://…); raw URLs belong in the host's adapter registry`}},
		{"endpoint with credentials", func(p *pack.Pack) { p.ToolingLayer.AdapterRegistry[0].EndpointRef = "internal://svc:hunter2@orders" },
			pack.Problem{Gate: "tenancy", Code: "raw_endpoint", Path: "tooling_layer.adapter_registry[0].endpoint_ref", Message: "must not carry credentials; credentials are exchanged by the Tool Gateway"}},
		{"issuer tenant mismatch", func(p *pack.Pack) { p.ContractMeta.Issuer = "tenant_globex" },
			pack.Problem{Gate: "tenancy", Code: "tenant_mismatch", Path: "contract_meta.issuer", Message: `issuer names tenant "tenant_globex" but pack_meta.tenant.tenant_id is "tenant_acme_prod"`}},
		{"bearer token", func(p *pack.Pack) {
			p.BusinessContext.NonNegotiables = append(p.BusinessContext.NonNegotiables, "call with Authorization: Bearer abcdefghijklmnopqrstuvwx")
		}, pack.Problem{Gate: "security", Code: "secret", Path: "business_context.non_negotiables[2]", Message: "contains a bearer token; packs must not carry secrets or raw PII"}},
		{"private key", func(p *pack.Pack) {
			p.PackMeta.Metadata = map[string]any{"note": "-----BEGIN OPENSSH PRIVATE KEY-----\nxyz"}
		},
			pack.Problem{Gate: "security", Code: "secret", Path: "pack_meta.metadata.note", Message: "contains a private key; packs must not carry secrets or raw PII"}},
		{"aws key", func(p *pack.Pack) { p.PackMeta.Description = "uses AKIAIOSFODNN7EXAMPLE" },
			pack.Problem{Gate: "security", Code: "secret", Path: "pack_meta.description", Message: "contains an AWS access key id; packs must not carry secrets or raw PII"}},
		{"secret-named member", func(p *pack.Pack) { p.PackMeta.Metadata = map[string]any{"api_key": "x"} },
			pack.Problem{Gate: "security", Code: "secret", Path: "pack_meta.metadata.api_key", Message: "member api_key holds a secret value; use a secret reference"}},
		{"pii card number", func(p *pack.Pack) { p.PackMeta.Metadata = map[string]any{"example": "card 4111 1111 1111 1111"} },
			pack.Problem{Gate: "security", Code: "pii", Path: "pack_meta.metadata.example", Message: "contains a payment card number; packs must not carry secrets or raw PII"}},
		{"pii email", func(p *pack.Pack) { p.ToneAndComms.Do = append(p.ToneAndComms.Do, "cc jane.doe@acme.example") },
			pack.Problem{Gate: "security", Code: "pii", Path: "tone_and_comms.do[2]", Message: "contains an email address; packs must not carry secrets or raw PII"}},
		{"wildcard capability", func(p *pack.Pack) { p.ToolingLayer.Permissions[0].Capability = "*" },
			pack.Problem{Gate: "security", Code: "unrestricted_tool_surface", Path: "tooling_layer.permissions[0].capability", Message: "wildcard capabilities give an unrestricted tool surface; name each capability"}},
		{"intent without eval target", func(p *pack.Pack) { p.EvaluationLayer.EvalTargets[0].Intent = "support.cancel" },
			pack.Problem{Gate: "evaluation", Code: "missing_eval_target", Path: "evaluation_layer.eval_targets", Message: `intent "support.refund" is served by policy rules but has no eval target`}},
		{"release gates without safety", func(p *pack.Pack) { p.EvaluationLayer.ReleaseGates = p.EvaluationLayer.ReleaseGates[:1] },
			pack.Problem{Gate: "evaluation", Code: "missing_release_gate", Path: "evaluation_layer.release_gates", Message: "release gates must include safety so utility gains cannot buy safety regressions"}},
		{"target out of range", func(p *pack.Pack) { p.EvaluationLayer.EvalTargets[0].Safety = ptr(1.5) },
			pack.Problem{Gate: "evaluation", Code: "target_range", Path: "evaluation_layer.eval_targets[0].safety", Message: "must be in [0, 1]"}},
		{"compatibility without runtime", func(p *pack.Pack) { delete(p.ContractMeta.Compatibility.Requires, "runtime") },
			pack.Problem{Gate: "schema", Code: "required", Path: "contract_meta.compatibility.requires.runtime", Message: "is required so old runtimes fail closed"}},
		{"bad constraint", func(p *pack.Pack) { p.ContractMeta.Compatibility.Requires["ontology"] = ">=one" },
			pack.Problem{Gate: "schema", Code: "format", Path: "contract_meta.compatibility.requires.ontology", Message: "is not a semantic version constraint"}},
		{"unversioned embedding key", func(p *pack.Pack) { p.IntelligenceRefs.EmbeddingKeys = []string{"support_orders"} },
			pack.Problem{Gate: "schema", Code: "format", Path: "intelligence_refs.embedding_keys[0]", Message: "embedding keys must be versioned (end in _v<N>)"}},
		{"bad ttl", func(p *pack.Pack) { p.MemoryLayer.MemoryPolicy.TierTTLs["working"] = "1 hour" },
			pack.Problem{Gate: "schema", Code: "format", Path: "memory_layer.memory_policy.tier_ttls.working", Message: "must be a duration such as 30m, 1h, 24h or 365d"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := pack.Validate(mutated(t, tc.mutate), nil)
			if !errors.Is(err, pack.ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
			got := problems(t, err)
			if !slices.Contains(got, tc.want) {
				t.Errorf("problems:\n%v\nwant one equal to\n%v", got, tc.want)
			}
		})
	}
}

// The validator reports every problem at once, in gate order.
func TestValidateReportsAllInGateOrder(t *testing.T) {
	p := mutated(t, func(p *pack.Pack) {
		p.EvaluationLayer.ReleaseGates = nil
		p.ToolingLayer.Permissions[2].RequiresApprovalGate = ""
		p.ToolingLayer.Permissions[0].AdapterID = "adp_x"
		p.PackMeta.TTLSeconds = 0
	})
	got := problems(t, pack.Validate(p, nil))
	var gates []string
	for _, q := range got {
		gates = append(gates, q.Gate)
	}
	want := []string{"schema", "referential", "referential", "referential", "risk", "evaluation", "evaluation"}
	if diff := cmp.Diff(want, gates); diff != "" {
		t.Errorf("gates (-want +got):\n%s\n%v", diff, got)
	}
	if pack.Validate(nil, nil) == nil {
		t.Error("Validate(nil) = nil")
	}
}

func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	base := string(readFile(t, "ctxpack.support-1.0.0.json"))
	tests := []struct {
		name, from, to, path, msg string
	}{
		{"misspelled field", `"ttl_seconds"`, `"ttl_second"`, "pack_meta.ttl_second", `unknown field "ttl_second"`},
		{"case variant", `"adapter_registry"`, `"Adapter_Registry"`, "tooling_layer.Adapter_Registry", `unknown field "Adapter_Registry": field names are case-sensitive (did you mean "adapter_registry"?)`},
		{"missing layer", `"tone_and_comms"`, `"tone_and_comm"`, "tone_and_comms", "is required"},
		{"bad enum", `"INTERNAL"`, `"SECRET"`, "pack_meta.data_classification", `data_classification "SECRET" is not one of PUBLIC, INTERNAL, CONFIDENTIAL, RESTRICTED`},
		{"bad approval mode", `"approval_mode": "read_only"`, `"approval_mode": "readonly"`, "tooling_layer.adapter_registry[0].approval_mode", `runcontext: unknown enum value: approval mode is not one of read_only, local_write, network, delegated, destructive`},
		{"bad write class", `"correction"]`, `"corrections"]`, "memory_layer.memory_policy.write_classes_allowed[3]", `write class "corrections" is not one of evidence_link, preference, decision_outcome, correction`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			doc := strings.Replace(base, tc.from, tc.to, 1)
			_, err := pack.Decode([]byte(doc))
			want := pack.Problem{Gate: "schema", Code: "decode", Path: tc.path, Message: tc.msg}
			if tc.msg == "is required" {
				want.Code = "required"
			}
			if got := problems(t, err); !slices.Contains(got, want) {
				t.Errorf("Decode problems = %v, want %v", got, want)
			}
		})
	}
	// Open maps stay open.
	doc := strings.Replace(base, `"amount_inr": { "min": 1, "max": 50000 }`, `"amount_inr": { "min": 1, "max": 50000, "currency_in": ["INR"] }`, 1)
	doc = strings.Replace(doc, `"ttl_seconds": 86400,`, `"ttl_seconds": 86400, "metadata": {"owner_note": {"any": ["shape"]}},`, 1)
	p, err := pack.Decode([]byte(doc))
	if err != nil {
		t.Fatalf("open maps refused: %v", err)
	}
	if p.ToolingLayer.Permissions[2].ArgConstraints["amount_inr"]["currency_in"] == nil || p.PackMeta.Metadata["owner_note"] == nil {
		t.Error("open map members lost")
	}
	if _, err := pack.Decode(make([]byte, pack.MaxDocumentBytes+1)); !errors.Is(err, pack.ErrInvalid) {
		t.Errorf("oversized document: %v", err)
	}
}

func TestParseRef(t *testing.T) {
	r, err := pack.ParseRef("ctxpack.support@5.2.0")
	if err != nil || r.ID != "ctxpack.support" || r.Version() != "5.2.0" || r.String() != "ctxpack.support@5.2.0" {
		t.Errorf("ParseRef = %+v, %v", r, err)
	}
	for _, bad := range []string{"ctxpack.support", "ctxpack.support@latest", "ctxpack.support@^5.2.0", "ctxpack.support@5.2", "ctxpack.support@5.2.0+build1", "ctxpack.support@5.2.0-rc.1", "ctxpack.support@>=5.0.0"} {
		if _, err := pack.ParseRef(bad); !errors.Is(err, pack.ErrUnpinnedRef) {
			t.Errorf("ParseRef(%q) = %v, want ErrUnpinnedRef", bad, err)
		}
	}
	a, b := pack.MustParseRef("p@1.2.0"), pack.MustParseRef("p@1.10.0")
	if a.Compare(b) >= 0 || b.Compare(a) <= 0 || a.Compare(a) != 0 || pack.MustParseRef("a@9.0.0").Compare(a) >= 0 {
		t.Error("Compare wrong")
	}
	var r2 pack.Ref
	if err := r2.UnmarshalText([]byte("p@1.0.0")); err != nil || r2.String() != "p@1.0.0" {
		t.Errorf("UnmarshalText = %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("MustParseRef did not panic")
		}
	}()
	pack.MustParseRef("p")
}

func TestCheckCompatibility(t *testing.T) {
	p := canonical(t)
	tests := []struct {
		host pack.Host
		ok   bool
	}{
		{pack.Host{"runtime": "1.0.0", "ontology": "1.0.0"}, true},
		{pack.Host{"runtime": "2.3.1", "ontology": "1.4.0", "extra": "x"}, true},
		{pack.Host{"runtime": "0.9.9", "ontology": "1.0.0"}, false},
		{pack.Host{"runtime": "1.0.0"}, false},
		{pack.Host{"runtime": "one", "ontology": "1.0.0"}, false},
		{nil, false},
	}
	for _, tc := range tests {
		err := pack.CheckCompatibility(p, tc.host)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, pack.ErrIncompatible)) {
			t.Errorf("CheckCompatibility(%v) = %v, want ok=%v", tc.host, err, tc.ok)
		}
	}
	p.ContractMeta.Compatibility.Requires = nil
	if err := pack.CheckCompatibility(p, pack.Host{"runtime": "1.0.0"}); !errors.Is(err, pack.ErrIncompatible) {
		t.Errorf("no requires: %v", err)
	}
}
