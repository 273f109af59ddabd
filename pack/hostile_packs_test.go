package pack_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// Paths and expressions of the canonical support pack (internal/fixture).
const (
	amount      = `{"var":"request.context.refund_amount"}`
	gateWhen    = "policy_layer.approval_gates[0].when"
	refundPerm  = "tooling_layer.permissions[2]"
	refundArgs  = refundPerm + ".arg_constraints"
	roleIsAgent = `{"==":[{"var":"user.role"},"support_agent"]}`
)

func setWhen(expr string) func(p *pack.Pack) {
	return func(p *pack.Pack) { p.PolicyLayer.ApprovalGates[0].When = rawJSON(expr) }
}

// constrain sets arg_constraints[arg] of p_issue_refund.
func constrain(arg string, c map[string]any) func(p *pack.Pack) {
	return func(p *pack.Pack) { p.ToolingLayer.Permissions[2].ArgConstraints[arg] = c }
}

func both(fs ...func(p *pack.Pack)) func(p *pack.Pack) {
	return func(p *pack.Pack) {
		for _, f := range fs {
			f(p)
		}
	}
}

// readOnlyAlias adds a read-only adapter on endpoint ref that exposes
// issue_refund with no gate and no idempotency key.
func readOnlyAlias(ref string) func(p *pack.Pack) {
	return func(p *pack.Pack) {
		p.ToolingLayer.AdapterRegistry = append(p.ToolingLayer.AdapterRegistry, pack.Adapter{AdapterID: "adp_payments_ro", Type: "OPENAPI", EndpointRef: ref, Capabilities: []string{"issue_refund"}, ApprovalMode: runcontext.ReadOnly})
		p.ToolingLayer.Permissions = append(p.ToolingLayer.Permissions, pack.Permission{PermissionID: "p_refund_ro", AdapterID: "adp_payments_ro", Capability: "issue_refund", Allow: true})
	}
}

func deny(id, capability string) func(p *pack.Pack) {
	return func(p *pack.Pack) {
		p.ToolingLayer.Permissions = append(p.ToolingLayer.Permissions, pack.Permission{PermissionID: id, AdapterID: "adp_payments", Capability: capability, Allow: false})
	}
}

func evalTarget(intent string) pack.EvalTarget {
	return pack.EvalTarget{Intent: intent, Policy: ptr(1.0), Utility: ptr(0.9), Safety: ptr(1.0)}
}

// refundRestated is p_issue_refund as an overlay restates it, with its
// base constraints changed by f.
func refundRestated(f func(c map[string]map[string]any)) pack.Permission {
	c := map[string]map[string]any{"amount_inr": {"min": 1.0, "max": 50000.0}, "idempotency_key": {"required": true}}
	f(c)
	return pack.Permission{PermissionID: "p_issue_refund", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true, RequiresApprovalGate: "GATE_FINANCE_APPROVAL", ArgConstraints: c}
}

func refundSpec(f func(s *pack.DecisionSpec)) pack.DecisionSpec {
	s := pack.DecisionSpec{DecisionKey: "support.refund.execute", Version: "1.0.0", OwnerRole: "support_ops", RequiredEvidence: []string{"identity_verified", "order_lookup", "policy_eval"},
		AllowedOutcomes: []string{"approved", "denied", "escalated"}, ApprovalMode: runcontext.Destructive, DecisionRight: "execute",
		InputsSchemaRef: "schema://decision.support.refund.execute.inputs.v1", OutputsSchemaRef: "schema://decision.support.refund.execute.outputs.v1"}
	f(&s)
	return s
}

func denyRule(id, intent string) pack.Rule {
	return pack.Rule{RuleID: id, AppliesTo: map[string]any{"intent": intent}, If: rawJSON(`{"var":"request.context.fraud"}`),
		Then: &pack.Effect{Allow: ptr(false), Reason: "fraud"}, DecisionBinding: "support.refund.execute", Rationale: "fraud blocks"}
}

// Every case is a hostile change to the canonical support pack, refused:
// by Validate (a problem with code at path), by Diff (never classed below
// class, and never releasable as a minor version), or by ApplyOverlay (an
// *OverlayError with rule at path).
func TestHostilePacks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		base      func(p *pack.Pack)    // the base (old) pack, for diff and overlay cases; canonical when nil
		pack      func(p *pack.Pack)    // Validate: the pack; Diff: the new version (applied after base)
		overlay   func(o *pack.Overlay) // an overlay on the base
		noOverlay bool                  // ApplyOverlay with a nil overlay
		code      pack.Code             // Validate: the problem's code (path in path)
		class     pack.Class            // Diff: the class
		rule      string                // ApplyOverlay: the rule (path in path)
		path      string
	}{
		// Validation: an approval gate that can never activate on a write capability.
		{name: "gate when is false", pack: setWhen(`false`), code: pack.CodeGateNeverActivates, path: gateWhen},
		{name: "gate when is one equals two", pack: setWhen(`{"==":[1,2]}`), code: pack.CodeGateNeverActivates, path: gateWhen},
		{name: "gate when is false and a var", pack: setWhen(`{"and":[false,` + amount + `]}`), code: pack.CodeGateNeverActivates, path: gateWhen},
		{name: "gate when is not true", pack: setWhen(`{"!":true}`), code: pack.CodeGateNeverActivates, path: gateWhen},
		{name: "gate when is a var below itself", pack: setWhen(`{"<":[` + amount + `,` + amount + `]}`), code: pack.CodeGateNeverActivates, path: gateWhen},
		{name: "gate when is an if with two falsy branches", pack: setWhen(`{"if":[` + amount + `,0,false]}`), code: pack.CodeGateNeverActivates, path: gateWhen},
		{name: "gate when is an empty string", pack: setWhen(`""`), code: pack.CodeGateNeverActivates, path: gateWhen},
		{name: "gate when is zero divided by zero", pack: setWhen(`{"/":[0,0]}`), code: pack.CodeGateNeverActivates, path: gateWhen},
		{name: "rule's gated branch can never apply", pack: func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].If = rawJSON(`{"and":[` + roleIsAgent + `,{"==":[1,2]}]}`)
		}, code: pack.CodeUnreachableCriticalRule, path: "policy_layer.policy_bundles[0].policy_dsl.rules[1].then"},

		// Validation: one endpoint, two approval modes.
		{name: "read-only alias of the payments endpoint", pack: readOnlyAlias("internal://payments"), code: pack.CodeSharedEndpoint, path: "tooling_layer.adapter_registry[3].endpoint_ref"},
		{name: "alias spelled in upper case with a trailing slash", pack: readOnlyAlias("INTERNAL://Payments/"), code: pack.CodeSharedEndpoint, path: "tooling_layer.adapter_registry[3].endpoint_ref"},
		{name: "alias with a dot segment", pack: readOnlyAlias("internal://payments/./"), code: pack.CodeSharedEndpoint, path: "tooling_layer.adapter_registry[3].endpoint_ref"},
		{name: "alias without the slashes", pack: readOnlyAlias("internal:payments"), code: pack.CodeSharedEndpoint, path: "tooling_layer.adapter_registry[3].endpoint_ref"},
		{name: "alias with a trailing-dot host", pack: readOnlyAlias("internal://payments."), code: pack.CodeSharedEndpoint, path: "tooling_layer.adapter_registry[3].endpoint_ref"},
		{name: "alias with a port", pack: readOnlyAlias("internal://payments:443"), code: pack.CodeSharedEndpoint, path: "tooling_layer.adapter_registry[3].endpoint_ref"},
		{name: "alias with a port and a trailing dot, without the slashes", pack: readOnlyAlias("internal:Payments.:8443/"), code: pack.CodeSharedEndpoint, path: "tooling_layer.adapter_registry[3].endpoint_ref"},

		// Validation: deny wins, so an allow next to a deny is refused.
		{name: "deny after an allow of the same capability", pack: deny("p_no_refund", "issue_refund"), code: pack.CodeDenyOverridden, path: refundPerm + ".allow"},
		{name: "deny before an allow of the same capability", pack: func(p *pack.Pack) {
			p.ToolingLayer.Permissions = append([]pack.Permission{{PermissionID: "p_no_refund", AdapterID: "adp_payments", Capability: "issue_refund"}}, p.ToolingLayer.Permissions...)
		}, code: pack.CodeDenyOverridden, path: "tooling_layer.permissions[3].allow"},
		{name: "wildcard deny of the adapter", pack: deny("p_no_payments", "*"), code: pack.CodeDenyOverridden, path: refundPerm + ".allow"},

		// Validation: arg_constraints the gateway would not enforce.
		{name: "unknown constraint key", pack: constrain("amount_inr", map[string]any{"min": 1.0, "maximum": 50000.0}), code: pack.CodeUnknownArgConstraint, path: refundArgs + ".amount_inr.maximum"},
		{name: "constraint key in another case", pack: constrain("amount_inr", map[string]any{"min": 1.0, "Max": 50000.0}), code: pack.CodeUnknownArgConstraint, path: refundArgs + ".amount_inr.Max"},
		{name: "max as a string", pack: constrain("amount_inr", map[string]any{"min": 1.0, "max": "50000"}), code: pack.CodeFormat, path: refundArgs + ".amount_inr.max"},
		{name: "pattern that does not compile", pack: constrain("currency", map[string]any{"pattern": "^[A-Z{3}$"}), code: pack.CodeFormat, path: refundArgs + ".currency.pattern"},
		{name: "enum that is not a list", pack: constrain("currency", map[string]any{"enum": "INR"}), code: pack.CodeFormat, path: refundArgs + ".currency.enum"},
		{name: "min above max", pack: constrain("amount_inr", map[string]any{"min": 900.0, "max": 10.0}), code: pack.CodeFormat, path: refundArgs + ".amount_inr.min"},

		// Validation: no decision spec, duplicate ids.
		{name: "no decision spec", pack: func(p *pack.Pack) {
			p.DecisionLayer.DecisionSpecs = nil
			for i := range p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules {
				p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[i].DecisionBinding = ""
			}
		}, code: pack.CodeRequired, path: "decision_layer.decision_specs"},
		{name: "approval gate redefined with a higher threshold", pack: func(p *pack.Pack) {
			g := p.PolicyLayer.ApprovalGates[0]
			g.When = rawJSON(`{">":[` + amount + `,1000000]}`)
			p.PolicyLayer.ApprovalGates = append(p.PolicyLayer.ApprovalGates, g)
		}, code: pack.CodeDuplicateID, path: "policy_layer.approval_gates[1]"},
		{name: "capability allowed by a second, looser permission", pack: func(p *pack.Pack) {
			q := p.ToolingLayer.Permissions[2]
			q.PermissionID = "p_issue_refund_bulk"
			q.ArgConstraints = map[string]map[string]any{"amount_inr": {"max": 5000000.0}, "idempotency_key": {"required": true}}
			p.ToolingLayer.Permissions = append(p.ToolingLayer.Permissions, q)
		}, code: pack.CodeDuplicateID, path: "tooling_layer.permissions[3].capability"},
		{name: "capability declared twice by an adapter", pack: func(p *pack.Pack) {
			p.ToolingLayer.AdapterRegistry[2].Capabilities = append(p.ToolingLayer.AdapterRegistry[2].Capabilities, "issue_refund")
		}, code: pack.CodeDuplicateID, path: "tooling_layer.adapter_registry[2].capabilities[1]"},

		// Diff: a change that widens power is major (or rejected), never patch or minor.
		{name: "gate condition negated", pack: setWhen(`{"!":{">":[` + amount + `,3000]}}`), class: pack.ClassMajor},
		{name: "gate condition inverted", pack: setWhen(`{"<":[` + amount + `,3000]}`), class: pack.ClassMajor},
		{name: "gate threshold raised", pack: setWhen(`{">":[` + amount + `,30000]}`), class: pack.ClassMajor},
		{name: "gate threshold raised by a fraction", pack: setWhen(`{">":[` + amount + `,3000.01]}`), class: pack.ClassMajor},
		{name: "gate condition narrowed by a conjunct", pack: setWhen(`{"and":[{">":[` + amount + `,3000]},` + roleIsAgent + `]}`), class: pack.ClassMajor},
		{name: "gate condition wrapped in an if", pack: setWhen(`{"if":[{">":[` + amount + `,3000]},true,false]}`), class: pack.ClassMajor},
		{name: "gate condition on another variable", pack: setWhen(`{">":[{"var":"request.context.refund_amount_usd"},3000]}`), class: pack.ClassMajor},
		{name: "gate condition made constant false", pack: setWhen(`{"and":[false,` + amount + `]}`), class: pack.ClassReject},
		{name: "rule threshold raised", pack: func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].If = rawJSON(`{"and":[` + roleIsAgent + `,{">":[` + amount + `,9000]}]}`)
		}, class: pack.ClassMajor},
		{name: "bound raised on a rule whose else denies", base: func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[0].If = rawJSON(`{"<":[` + amount + `,10000]}`)
		}, pack: func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[0].If = rawJSON(`{"<":[` + amount + `,100000]}`)
		}, class: pack.ClassMajor},
		{name: "new rule lowers the gated capability's approval mode", pack: func(p *pack.Pack) {
			rules := &p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules
			*rules = append(*rules, pack.Rule{RuleID: "R_FAST_LANE", AppliesTo: map[string]any{"intent": "support.refund"}, If: rawJSON(roleIsAgent),
				Then: &pack.Effect{Allow: ptr(true), ApprovalMode: runcontext.ReadOnly, RequiresApprovalGate: "GATE_FINANCE_APPROVAL"}, DecisionBinding: "support.refund.execute", Rationale: "fast lane"})
		}, class: pack.ClassMajor},
		{name: "new served intent through an eval target", pack: func(p *pack.Pack) {
			p.EvaluationLayer.EvalTargets = append(p.EvaluationLayer.EvalTargets, evalTarget("support.cancel"))
		}, class: pack.ClassMajor},
		{name: "new served intent through a denying rule", pack: func(p *pack.Pack) {
			rules := &p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules
			*rules = append(*rules, denyRule("R_CANCEL_FRAUD", "support.cancel"))
			p.EvaluationLayer.EvalTargets = append(p.EvaluationLayer.EvalTargets, evalTarget("support.cancel"))
		}, class: pack.ClassMajor},
		{name: "rule moved to a bundle evaluated last", pack: func(p *pack.Pack) {
			rules := p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules = rules[:1]
			p.PolicyLayer.PolicyBundles = append(p.PolicyLayer.PolicyBundles, pack.PolicyBundle{BundleID: "POLICY_LATE", Priority: 99, PolicyDSL: pack.PolicyDSL{Language: "jsonlogic", Rules: rules[1:]}})
		}, class: pack.ClassMajor},
		{name: "enum widened", base: constrain("currency", map[string]any{"enum": []any{"INR"}}), pack: constrain("currency", map[string]any{"enum": []any{"INR", "USD"}}), class: pack.ClassMajor},
		{name: "pattern loosened", base: constrain("currency", map[string]any{"pattern": "^INR$"}), pack: constrain("currency", map[string]any{"pattern": "^[A-Z]{3}$"}), class: pack.ClassMajor},
		{name: "max_length raised", base: constrain("note", map[string]any{"max_length": 80.0}), pack: constrain("note", map[string]any{"max_length": 8000.0}), class: pack.ClassMajor},
		{name: "min_length lowered", base: constrain("reason", map[string]any{"min_length": 10.0}), pack: constrain("reason", map[string]any{"min_length": 0.0}), class: pack.ClassMajor},
		{name: "max raised", pack: constrain("amount_inr", map[string]any{"min": 1.0, "max": 500000.0}), class: pack.ClassMajor},
		{name: "min lowered", pack: constrain("amount_inr", map[string]any{"min": 0.0, "max": 50000.0}), class: pack.ClassMajor},
		{name: "new write permission", pack: func(p *pack.Pack) {
			p.ToolingLayer.AdapterRegistry[2].Capabilities = append(p.ToolingLayer.AdapterRegistry[2].Capabilities, "void_refund")
			p.ToolingLayer.Permissions = append(p.ToolingLayer.Permissions, pack.Permission{PermissionID: "p_void", AdapterID: "adp_payments", Capability: "void_refund", Allow: true,
				RequiresApprovalGate: "GATE_FINANCE_APPROVAL", ArgConstraints: map[string]map[string]any{"idempotency_key": {"required": true}}})
		}, class: pack.ClassMajor},
		{name: "deny permission removed", base: both(func(p *pack.Pack) {
			p.ToolingLayer.AdapterRegistry[2].Capabilities = append(p.ToolingLayer.AdapterRegistry[2].Capabilities, "void_refund")
		}, deny("p_no_void", "void_refund")), pack: func(p *pack.Pack) { p.ToolingLayer.Permissions = p.ToolingLayer.Permissions[:3] }, class: pack.ClassMajor},
		{name: "redaction rule removed", pack: func(p *pack.Pack) { p.PolicyLayer.Guardrails.RedactionRules = []string{"credit_card"} }, class: pack.ClassMajor},
		{name: "must_refuse guardrail moved to must_escalate", pack: func(p *pack.Pack) {
			g := &p.PolicyLayer.Guardrails
			g.MustEscalate, g.MustRefuse = append(g.MustEscalate, g.MustRefuse...), nil
		}, class: pack.ClassMajor},
		{name: "latency budget raised", pack: func(p *pack.Pack) { p.EvaluationLayer.EvalTargets[0].LatencyP99MS = ptr(30000.0) }, class: pack.ClassMajor},
		{name: "cost budget raised", pack: func(p *pack.Pack) { p.EvaluationLayer.EvalTargets[0].EconomicsCentsPerDecision = ptr(15.0) }, class: pack.ClassMajor},
		{name: "release gate delta raised", pack: func(p *pack.Pack) { p.EvaluationLayer.ReleaseGates[1].MaxDelta = 0.2 }, class: pack.ClassMajor},
		{name: "pack cache ttl raised", pack: func(p *pack.Pack) { p.PackMeta.TTLSeconds = 30 * 86400 }, class: pack.ClassMajor},
		{name: "non-negotiable removed", pack: func(p *pack.Pack) { p.BusinessContext.NonNegotiables = p.BusinessContext.NonNegotiables[:1] }, class: pack.ClassMajor},
		{name: "tone dont removed", pack: func(p *pack.Pack) { p.ToneAndComms.Dont = p.ToneAndComms.Dont[1:] }, class: pack.ClassMajor},
		{name: "read-only alias added as an evidence source", pack: readOnlyAlias("internal://payments"), class: pack.ClassReject},
		{name: "deny added next to the allow", pack: deny("p_no_refund", "issue_refund"), class: pack.ClassReject},

		// Overlays: they only constrain.
		{name: "overlay widens an enum", base: constrain("currency", map[string]any{"enum": []any{"INR"}}), overlay: func(o *pack.Overlay) {
			o.Permissions = []pack.Permission{refundRestated(func(c map[string]map[string]any) { c["currency"] = map[string]any{"enum": []any{"INR", "USD"}} })}
		}, rule: pack.OverlayLoosen, path: "permissions[0].arg_constraints"},
		{name: "overlay swaps a pattern", base: constrain("currency", map[string]any{"pattern": "^INR$"}), overlay: func(o *pack.Overlay) {
			o.Permissions = []pack.Permission{refundRestated(func(c map[string]map[string]any) { c["currency"] = map[string]any{"pattern": "^.*$"} })}
		}, rule: pack.OverlayLoosen, path: "permissions[0].arg_constraints"},
		{name: "overlay raises a limit", overlay: func(o *pack.Overlay) {
			o.Permissions = []pack.Permission{refundRestated(func(c map[string]map[string]any) { c["amount_inr"]["max"] = 5000000.0 })}
		}, rule: pack.OverlayLoosen, path: "permissions[0].arg_constraints"},
		{name: "overlay adds an intent through an eval target", overlay: func(o *pack.Overlay) {
			o.EvalTargets = []pack.EvalTarget{evalTarget("support.cancel")}
		}, rule: pack.OverlayNewIntent, path: "eval_targets[0].intent"},
		{name: "overlay adds an intent through a rule", overlay: func(o *pack.Overlay) {
			o.PolicyBundles = []pack.PolicyBundle{{BundleID: "POLICY_CANCEL", Priority: 20, PolicyDSL: pack.PolicyDSL{Language: "jsonlogic", Rules: []pack.Rule{denyRule("R_CANCEL_FRAUD", "support.cancel")}}}}
		}, rule: pack.OverlayNewIntent, path: "policy_bundles[0].policy_dsl.rules[0].applies_to.intent"},
		{name: "overlay adds a rule that only allows", overlay: func(o *pack.Overlay) {
			r := denyRule("R_ALLOW_ALL", "support.refund")
			r.Then = &pack.Effect{Allow: ptr(true)}
			o.PolicyBundles = []pack.PolicyBundle{{BundleID: "POLICY_OPEN", Priority: 1, PolicyDSL: pack.PolicyDSL{Language: "jsonlogic", Rules: []pack.Rule{r}}}}
		}, rule: pack.OverlayExpand, path: "policy_bundles[0].policy_dsl.rules[0]"},
		{name: "overlay changes the decision version", overlay: func(o *pack.Overlay) {
			o.DecisionSpecs = []pack.DecisionSpec{refundSpec(func(s *pack.DecisionSpec) { s.Version = "2.0.0" })}
		}, rule: pack.OverlayContract, path: "decision_specs[0]"},
		{name: "overlay changes the decision's output schema", overlay: func(o *pack.Overlay) {
			o.DecisionSpecs = []pack.DecisionSpec{refundSpec(func(s *pack.DecisionSpec) { s.OutputsSchemaRef = "schema://anything" })}
		}, rule: pack.OverlayContract, path: "decision_specs[0]"},
		{name: "overlay drops an outcome", overlay: func(o *pack.Overlay) {
			o.DecisionSpecs = []pack.DecisionSpec{refundSpec(func(s *pack.DecisionSpec) { s.AllowedOutcomes = []string{"approved"} })}
		}, rule: pack.OverlayOutcomes, path: "decision_specs[0].allowed_outcomes"},
		{name: "overlay redefines the finance gate with a higher threshold", overlay: func(o *pack.Overlay) {
			o.ApprovalGates = []pack.ApprovalGate{{GateID: "GATE_FINANCE_APPROVAL", When: rawJSON(`{">":[` + amount + `,1000000]}`), RequiredApproverRole: "finance_lead", TTLSeconds: 7200}}
		}, rule: pack.OverlayRedefineGate, path: "approval_gates[0].gate_id"},
		{name: "overlay defines one new gate twice", overlay: func(o *pack.Overlay) {
			g := pack.ApprovalGate{GateID: "GATE_REGION", When: rawJSON(`true`), RequiredApproverRole: "ops", TTLSeconds: 60}
			o.ApprovalGates = []pack.ApprovalGate{g, g}
		}, rule: pack.OverlayRedefineGate, path: "approval_gates[1].gate_id"},
		{name: "overlay points the orders adapter at payments", overlay: func(o *pack.Overlay) {
			o.EndpointRefs = map[string]string{"adp_orders": "internal://payments"}
		}, rule: pack.OverlayInvalidAfter, path: "tooling_layer.adapter_registry[2].endpoint_ref"},
		{name: "overlay adds a constraint the gateway does not know", overlay: func(o *pack.Overlay) {
			o.Permissions = []pack.Permission{refundRestated(func(c map[string]map[string]any) { c["amount_inr"]["maximum"] = 10.0 })}
		}, rule: pack.OverlayInvalidAfter, path: refundArgs + ".amount_inr.maximum"},
		{name: "overlay grants a new permission", overlay: func(o *pack.Overlay) {
			o.Permissions = []pack.Permission{{PermissionID: "p_refund_ro", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true}}
		}, rule: pack.OverlayGrant, path: "permissions[0]"},
		{name: "no overlay at all", noOverlay: true, rule: pack.OverlayBase},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := canonical(t)
			if tc.base != nil {
				tc.base(base)
				if err := pack.Validate(base, nil); err != nil {
					t.Fatalf("the base of the case is invalid: %v", err)
				}
			}
			switch {
			case tc.overlay != nil || tc.noOverlay:
				var o *pack.Overlay
				if tc.overlay != nil {
					o = baseOverlay()
					tc.overlay(o)
				}
				_, _, err := pack.ApplyOverlay(base, o, nil)
				var oe *pack.OverlayError
				if !errors.As(err, &oe) || !errors.Is(err, pack.ErrOverlay) {
					t.Fatalf("ApplyOverlay = %v, want an *OverlayError", err)
				}
				if oe.Rule != tc.rule || oe.Path != tc.path {
					t.Errorf("refused by %s at %q, want %s at %q: %v", oe.Rule, oe.Path, tc.rule, tc.path, err)
				}
			case tc.class != "":
				next := mutated(t, both(func(p *pack.Pack) {
					if tc.base != nil {
						tc.base(p)
					}
				}, tc.pack))
				next.PackMeta.PackVersion = "1.1.0"
				got := pack.Diff(base, next, nil)
				if got.Class != tc.class || got.VersionOK {
					t.Errorf("Diff = %s (version ok %v), want %s and a minor bump refused\n%+v", got.Class, got.VersionOK, tc.class, got.Changes)
				}
			default:
				err := pack.Validate(mutated(t, tc.pack), nil)
				var ve *pack.ValidationError
				if !errors.As(err, &ve) || !errors.Is(err, pack.ErrInvalid) {
					t.Fatalf("Validate = %v, want a *ValidationError", err)
				}
				if !ve.HasAt(tc.code, tc.path) {
					t.Errorf("no %s problem at %s in\n%s", tc.code, tc.path, strings.ReplaceAll(err.Error(), "; ", "\n"))
				}
			}
		})
	}
}
