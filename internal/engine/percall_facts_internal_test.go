package engine

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// A gate that held a call of the run, active at compile time or only for
// that call, is in the run's facts: in the controls a record must list
// (in the pack's gate order), and, when its approval let the call run,
// among the gates whose approval a DECIDED record needs, with its
// approver role. A gate whose approval was refused is listed among the
// controls only; the gate a paused run awaits is listed too.
func TestRunFactsKnowPerCallGates(t *testing.T) {
	t.Parallel()
	p, err := pack.Decode(fixture.Read(t, "ctxpack.support-1.0.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	p.PolicyLayer.ApprovalGates = append(p.PolicyLayer.ApprovalGates, pack.ApprovalGate{GateID: "GATE_AAA_FIRST_BY_NAME", RequiredApproverRole: "cfo", TTLSeconds: 60})
	cc := &compiler.CompiledContext{
		ContextLedger: compiler.ContextLedger{ApprovalGates: []policy.Gate{
			{GateID: "GATE_FINANCE_APPROVAL", ApproverRole: "finance_lead", TTLSeconds: 7200, PerCall: true},
			{GateID: "GATE_AAA_FIRST_BY_NAME", ApproverRole: "cfo", TTLSeconds: 60, PerCall: true},
		}},
		RuntimeControls: compiler.RuntimeControls{MustRefuse: []string{}, MustEscalate: []string{}, ApprovalGatesActive: []string{}, RedactionRulesActive: []string{"pan"}},
	}
	req := &runcontext.InvokeRequest{Input: runcontext.Input{Context: map[string]any{}}}
	approved := &gateway.ToolResultEnvelope{CapabilityID: "adp_payments.issue_refund", ToolCallID: "tool_1", Status: gateway.StatusCompleted,
		Metadata: gateway.ResultMetadata{ApprovalGateID: "GATE_FINANCE_APPROVAL", Approver: "user_finance_lead_77"}}
	refused := &gateway.ToolResultEnvelope{CapabilityID: "adp_payments.issue_refund", ToolCallID: "tool_2", Status: gateway.StatusBlocked,
		Error: gateway.NewToolError(gateway.CodeApprovalDenied, false, "the approver denied the action", map[string]any{"gate_id": "GATE_AAA_FIRST_BY_NAME"})}
	ran := []StepResult{{Result: approved}}
	f := runFacts(p, cc, req, ran, nil)
	if diff := cmp.Diff(map[string]string{"GATE_FINANCE_APPROVAL": "finance_lead"}, f.ActiveGates); diff != "" {
		t.Errorf("active gates (-want +got):\n%s", diff)
	}
	if got := f.Controls.ApprovalGatesActive; !slices.Equal(got, []string{"GATE_FINANCE_APPROVAL"}) {
		t.Errorf("controls = %v", got)
	}
	// The compiled controls are not changed by the facts.
	if len(cc.RuntimeControls.ApprovalGatesActive) != 0 {
		t.Errorf("runFacts changed the compiled controls: %v", cc.RuntimeControls.ApprovalGatesActive)
	}
	f = runFacts(p, cc, req, append(ran, StepResult{Result: refused}), nil)
	if got := f.Controls.ApprovalGatesActive; !slices.Equal(got, []string{"GATE_FINANCE_APPROVAL", "GATE_AAA_FIRST_BY_NAME"}) {
		t.Errorf("controls = %v, want the pack's gate order", got)
	}
	if _, ok := f.ActiveGates["GATE_AAA_FIRST_BY_NAME"]; ok {
		t.Errorf("a gate whose approval was refused needs an approval: %v", f.ActiveGates)
	}
	// Two gates held a call, which was blocked: both are listed (the
	// details as a checkpoint decodes them).
	both := &gateway.ToolResultEnvelope{CapabilityID: "adp_payments.issue_refund", ToolCallID: "tool_3", Status: gateway.StatusBlocked,
		Error: gateway.NewToolError(gateway.CodePermissionDenied, false, "held by two gates", map[string]any{"gate_ids": []any{"GATE_FINANCE_APPROVAL", "GATE_AAA_FIRST_BY_NAME"}})}
	f = runFacts(p, cc, req, []StepResult{{Result: both}}, nil)
	if got := f.Controls.ApprovalGatesActive; !slices.Equal(got, []string{"GATE_FINANCE_APPROVAL", "GATE_AAA_FIRST_BY_NAME"}) || len(f.ActiveGates) != 0 {
		t.Errorf("controls = %v, active gates %v", got, f.ActiveGates)
	}
	// No gate held a call: the compiled controls, as they are.
	f = runFacts(p, cc, req, nil, nil)
	if len(f.Controls.ApprovalGatesActive) != 0 || len(f.ActiveGates) != 0 {
		t.Errorf("facts of a run no gate held: %+v %v", f.Controls, f.ActiveGates)
	}
}
