package compiler_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextos/contextos/pack"
)

// A gate inactive at compile time that can apply per call (its when, or a
// rule naming it, reads tool.*) is shown to the model as applying per
// call, with when, never as inactive: in the capability's metadata, the
// tool block and, for a gate no surfaced permission names, a block of its
// own. The seed pack's gate over request context is shown as before.
func TestPerCallGateShownToTheModel(t *testing.T) {
	t.Parallel()
	overArgs := `{">":[{"var":"tool.args.amount_inr"},3000]}`
	tests := []struct {
		name    string
		edit    func(p *pack.Pack)
		amount  float64
		perCall string // the capability's approval_gate_per_call
		state   string // in the refund's tool block
		block   string // in a gate block of its own ("" for none)
	}{
		{name: "seed gate, inactive", amount: 1200, state: "approval gate GATE_FINANCE_APPROVAL (inactive)"},
		{name: "seed gate, active", amount: 4200, state: "approval gate GATE_FINANCE_APPROVAL (active)"},
		{name: "gate when over args", amount: 100, edit: func(p *pack.Pack) {
			p.PolicyLayer.ApprovalGates[0].When = json.RawMessage(`{ ">": [ {"var": "tool.args.amount_inr"}, 3000 ] }`)
		},
			perCall: overArgs, state: "approval gate GATE_FINANCE_APPROVAL (applies per call when " + overArgs + ")"},
		{name: "rule over args naming the gate", amount: 100, edit: func(p *pack.Pack) {
			p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].If = json.RawMessage(`{">":[{"var":"tool.args.amount_inr"},3000]}`)
		},
			perCall: "policy rule POLICY_RETURNS_V4#R_HIGH_VALUE_REQUIRES_APPROVAL requires it for the call",
			state:   "approval gate GATE_FINANCE_APPROVAL (applies per call when policy rule POLICY_RETURNS_V4#R_HIGH_VALUE_REQUIRES_APPROVAL requires it for the call)"},
		{name: "a per-call gate no permission names", amount: 100, edit: func(p *pack.Pack) {
			p.PolicyLayer.ApprovalGates = append(p.PolicyLayer.ApprovalGates, pack.ApprovalGate{GateID: "GATE_BIG_REFUNDS",
				When: json.RawMessage(overArgs), RequiredApproverRole: "cfo", TTLSeconds: 600})
		},
			state: "approval gate GATE_FINANCE_APPROVAL (inactive)",
			block: "Approval gate GATE_BIG_REFUNDS (approver role cfo, TTL 600s) applies per call when " + overArgs + ": a write-class call it applies to pauses until a cfo approves it."},
		{name: "an active gate no permission names", amount: 100, edit: func(p *pack.Pack) {
			p.PolicyLayer.ApprovalGates = append(p.PolicyLayer.ApprovalGates, pack.ApprovalGate{GateID: "GATE_RISK_REVIEW",
				When: json.RawMessage(`{"==":[{"var":"request.context.identity_verified"},true]}`), RequiredApproverRole: "risk_lead", TTLSeconds: 600})
		},
			state: "approval gate GATE_FINANCE_APPROVAL (inactive)",
			block: "Approval gate GATE_RISK_REVIEW (approver role risk_lead, TTL 600s) is active: every write-class call pauses until a risk_lead approves it."},
		{name: "an inactive gate no permission names", amount: 100, edit: func(p *pack.Pack) {
			p.PolicyLayer.ApprovalGates = append(p.PolicyLayer.ApprovalGates, pack.ApprovalGate{GateID: "GATE_RISK_REVIEW",
				When: json.RawMessage(`{"==":[{"var":"request.context.identity_verified"},false]}`), RequiredApproverRole: "risk_lead", TTLSeconds: 600})
		},
			state: "approval gate GATE_FINANCE_APPROVAL (inactive)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := canonicalScenario(t)
			if tc.edit != nil {
				tc.edit(s.pack)
			}
			s.req.Input.Context["refund_amount"] = tc.amount
			cc := s.compile(t)
			md := cc.Manifests.ToolManifest[2].CapabilityMetadata["issue_refund"]
			if md.GatePerCall != tc.perCall {
				t.Errorf("approval_gate_per_call = %q, want %q", md.GatePerCall, tc.perCall)
			}
			var tool, gate string
			for _, b := range cc.CompiledPrompt.ContextBlocks {
				switch {
				case strings.Contains(b.Content, "adp_payments.issue_refund"):
					tool = b.Content
				case strings.HasPrefix(b.BlockID, "gate_"):
					gate = b.Content
				}
			}
			if !strings.Contains(tool, tc.state) {
				t.Errorf("refund's tool block %q does not say %q", tool, tc.state)
			}
			if gate != tc.block {
				t.Errorf("gate block = %q, want %q", gate, tc.block)
			}
		})
	}
}

// The per-call form moves the compiled context hash only for packs that
// have it: the seed pack's compiled_context_hash is the one its golden
// file pins (TestCanonicalGolden), and a pack with a per-call gate hashes
// differently from the same pack whose gate reads request context.
func TestPerCallGateInHash(t *testing.T) {
	t.Parallel()
	seed := canonicalScenario(t)
	seed.req.Input.Context["refund_amount"] = 100
	per := canonicalScenario(t)
	per.req.Input.Context["refund_amount"] = 100
	per.pack.PolicyLayer.ApprovalGates[0].When = json.RawMessage(`{">":[{"var":"tool.args.amount_inr"},3000]}`)
	a, b := seed.compile(t), per.compile(t)
	if a.Hash() == b.Hash() {
		t.Error("a per-call gate and an inactive one compile to the same hash; the model is told differently")
	}
}
