package policy_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// The finance gate and the high-value rule of the support pack rewritten
// over the call's own arguments (the per-call form).
const (
	gateOverArgs        = `{">":[{"var":"tool.args.amount_inr"},3000]}`
	gateOverArgsDefault = `{">":[{"var":["tool.args.amount_inr",0]},3000]}`
	ruleOverArgs        = `{"and":[{"==":[{"var":"user.role"},"support_agent"]},{">":[{"var":"tool.args.amount_inr"},3000]}]}`
	gateOverRequest     = `{">":[{"var":"request.context.refund_amount"},3000]}`
)

// perCallPack is the support pack with the finance gate's when and the
// high-value rule's if replaced.
func perCallPack(t *testing.T, when, ruleIf string) *pack.Pack {
	t.Helper()
	p, _, _ := load(t)
	p.PolicyLayer.ApprovalGates[0].When = json.RawMessage(when)
	p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].If = json.RawMessage(ruleIf)
	return p
}

// evalCall evaluates p for a refund of amount (requested in the request
// context) and, when call is set, for that call.
func evalCall(t *testing.T, p *pack.Pack, requested float64, call map[string]any, capability string) (*policy.Evaluation, error) {
	t.Helper()
	_, req, rc := load(t)
	req.Input.Context["refund_amount"] = requested
	e, err := policy.Prepare(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc := policy.NewDocument(req.Input, rc)
	if call != nil {
		doc = doc.WithTool(capability, call, runcontext.Destructive)
	}
	return e.Evaluate(policy.Input{RunID: rc.RunID, Data: doc})
}

func gate(t *testing.T, res *policy.Evaluation) policy.Gate {
	t.Helper()
	if len(res.Gates) != 1 {
		t.Fatalf("gates = %+v", res.Gates)
	}
	return res.Gates[0]
}

// A gate or rule over tool.* is not evaluated at compile time (the
// document has no tool member): it applies per call. For a call it is
// evaluated with the call's arguments, and a gate the call made active is
// marked ByCall; a gate over request context never is.
func TestPerCallGates(t *testing.T) {
	t.Parallel()
	refund := func(amount float64) map[string]any {
		return map[string]any{"order_id": "ord_881", "amount_inr": amount}
	}
	lookup := map[string]any{"order_id": "ord_881"}
	tests := []struct {
		name       string
		when, rule string
		requested  float64
		call       map[string]any
		capability string
		want       policy.Gate
		skipped    []policy.Skipped
	}{
		{name: "gate over args, compile time", when: gateOverArgs, rule: gateOverRequest, requested: 100,
			want:    policy.Gate{GateID: "GATE_FINANCE_APPROVAL", ApproverRole: "finance_lead", TTLSeconds: 7200, PerCall: true},
			skipped: []policy.Skipped{{GateID: "GATE_FINANCE_APPROVAL", Path: "tool.args.amount_inr"}}},
		{name: "gate over args, a refund of 4200", when: gateOverArgs, rule: gateOverRequest, requested: 100, call: refund(4200), capability: "adp_payments.issue_refund",
			want: policy.Gate{GateID: "GATE_FINANCE_APPROVAL", ApproverRole: "finance_lead", TTLSeconds: 7200, PerCall: true, Active: true, ActivatedBy: []string{"when"}, ByCall: true}},
		{name: "gate over args, a refund of 1200", when: gateOverArgs, rule: gateOverRequest, requested: 4200, call: refund(1200), capability: "adp_payments.issue_refund",
			// The request's 4200 activates the rule over request context,
			// which the call did not make active.
			want: policy.Gate{GateID: "GATE_FINANCE_APPROVAL", ApproverRole: "finance_lead", TTLSeconds: 7200, PerCall: true, Active: true, ActivatedBy: []string{"R_HIGH_VALUE_REQUIRES_APPROVAL"}}},
		{name: "gate over args, a lookup without the argument", when: gateOverArgs, rule: gateOverRequest, requested: 100, call: lookup, capability: "adp_orders.lookup",
			want:    policy.Gate{GateID: "GATE_FINANCE_APPROVAL", ApproverRole: "finance_lead", TTLSeconds: 7200, PerCall: true},
			skipped: []policy.Skipped{{GateID: "GATE_FINANCE_APPROVAL", Path: "tool.args.amount_inr"}}},
		{name: "gate over args with a default, compile time", when: gateOverArgsDefault, rule: gateOverRequest, requested: 100,
			want: policy.Gate{GateID: "GATE_FINANCE_APPROVAL", ApproverRole: "finance_lead", TTLSeconds: 7200, PerCall: true}},
		{name: "gate over args with a default, a lookup", when: gateOverArgsDefault, rule: gateOverRequest, requested: 100, call: lookup, capability: "adp_orders.lookup",
			want: policy.Gate{GateID: "GATE_FINANCE_APPROVAL", ApproverRole: "finance_lead", TTLSeconds: 7200, PerCall: true}},
		{name: "rule over args, compile time", when: gateOverRequest, rule: ruleOverArgs, requested: 100,
			want:    policy.Gate{GateID: "GATE_FINANCE_APPROVAL", ApproverRole: "finance_lead", TTLSeconds: 7200, PerCall: true},
			skipped: []policy.Skipped{{BundleID: "POLICY_RETURNS_V4", RuleID: "R_HIGH_VALUE_REQUIRES_APPROVAL", Path: "tool.args.amount_inr"}}},
		{name: "rule over args, a refund of 50000", when: gateOverRequest, rule: ruleOverArgs, requested: 100, call: refund(50000), capability: "adp_payments.issue_refund",
			want: policy.Gate{GateID: "GATE_FINANCE_APPROVAL", ApproverRole: "finance_lead", TTLSeconds: 7200, PerCall: true, Active: true, ActivatedBy: []string{"R_HIGH_VALUE_REQUIRES_APPROVAL"}, ByCall: true}},
		{name: "seed gate, a refund", when: gateOverRequest, rule: gateOverRequest, requested: 4200, call: refund(4200), capability: "adp_payments.issue_refund",
			want: policy.Gate{GateID: "GATE_FINANCE_APPROVAL", ApproverRole: "finance_lead", TTLSeconds: 7200, Active: true, ActivatedBy: []string{"when", "R_HIGH_VALUE_REQUIRES_APPROVAL"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := evalCall(t, perCallPack(t, tc.when, tc.rule), tc.requested, tc.call, tc.capability)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, gate(t, res)); diff != "" {
				t.Errorf("gate (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.skipped, res.Skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
		})
	}
}

// A skip stands for the missing variable it is: an *Error naming the
// rule or gate and the path.
func TestSkippedError(t *testing.T) {
	t.Parallel()
	err := error(policy.Skipped{GateID: "GATE_FINANCE_APPROVAL", Path: "tool.args.amount_inr"}.Error())
	var ee *policy.Error
	if !errors.As(err, &ee) || !errors.Is(err, policy.ErrEvaluation) || ee.Kind != policy.KindMissingVariable {
		t.Fatalf("Skipped.Error() = %v", err)
	}
	if want := "policy: approval gate GATE_FINANCE_APPROVAL: missing_variable tool.args.amount_inr: the call has no value for it"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

// PerCallGates says, for each gate that reads the tool call, its when
// (compact) and the rules over tool.* that name it; a pack that reads no
// tool data has none, and does not use tool data.
func TestPerCallGatesDescribed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		when, rule string
		want       []policy.PerCallGate
		usesTool   bool
	}{
		{"seed pack", gateOverRequest, gateOverRequest, nil, false},
		{"gate over args", `{ ">" : [ {"var":"tool.args.amount_inr"}, 3000 ] }`, gateOverRequest,
			[]policy.PerCallGate{{GateID: "GATE_FINANCE_APPROVAL", When: json.RawMessage(gateOverArgs)}}, true},
		{"rule over args", gateOverRequest, ruleOverArgs,
			[]policy.PerCallGate{{GateID: "GATE_FINANCE_APPROVAL", Rules: []string{"POLICY_RETURNS_V4#R_HIGH_VALUE_REQUIRES_APPROVAL"}}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := policy.Prepare(perCallPack(t, tc.when, tc.rule), nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, e.PerCallGates()); diff != "" {
				t.Errorf("PerCallGates (-want +got):\n%s", diff)
			}
			if e.UsesTool() != tc.usesTool {
				t.Errorf("UsesTool = %v, want %v", e.UsesTool(), tc.usesTool)
			}
		})
	}
	// A rule that reads tool.* only through its applies_to names its
	// gate per call too.
	p := perCallPack(t, gateOverRequest, gateOverRequest)
	p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].AppliesTo = map[string]any{"tool.capability_id": "adp_payments.issue_refund"}
	e, err := policy.Prepare(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.PerCallGates(); len(got) != 1 || len(got[0].Rules) != 1 || got[0].When != nil {
		t.Errorf("PerCallGates = %+v", got)
	}
}

// TestPerCallGatesShareNothingWithTheEngine: what a caller does to the
// per-call gates it is given (their gate ids, when and rules) changes
// neither what the engine gives the next caller — the gateway, which
// holds a call whose gate's rule could not be judged, and the compiler,
// which tells the model a gate applies per call — nor the engine.
func TestPerCallGatesShareNothingWithTheEngine(t *testing.T) {
	t.Parallel()
	e, err := policy.Prepare(perCallPack(t, gateOverArgs, ruleOverArgs), nil)
	if err != nil {
		t.Fatal(err)
	}
	first := e.PerCallGates()
	if len(first) != 1 || len(first[0].Rules) != 1 || first[0].When == nil {
		t.Fatalf("PerCallGates = %+v", first)
	}
	want := []policy.PerCallGate{{GateID: first[0].GateID, When: slices.Clone(first[0].When), Rules: slices.Clone(first[0].Rules)}}
	got := e.PerCallGates()
	got[0].Rules[0] = "edited#edited"
	got[0].When[0] = ' '
	got[0].GateID = "edited"
	if diff := cmp.Diff(want, e.PerCallGates()); diff != "" {
		t.Errorf("a caller's edits reached the engine's per-call gates (-first +after the edits):\n%s", diff)
	}
}

// A path is read as the evaluator reads it: "01" and "+1" index no
// array there, and a trailing dot reads a member named "", so the
// required check must find no value either. Read by strconv.Atoi, they passed the check on amounts[1] while
// the gate's when saw null: the gate never held, and nothing said so.
// A member named "01" of an object is still found.
func TestGatePathsReadAsTheEvaluatorReads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path    string
		context any // request.context.amounts
		active  bool
		missing bool
	}{
		{"request.context.amounts.1", []any{0.0, 5000.0}, true, false},
		{"request.context.amounts.01", []any{0.0, 5000.0}, false, true},
		{"request.context.amounts.+1", []any{0.0, 5000.0}, false, true},
		{"request.context.amounts.-1", []any{0.0, 5000.0}, false, true},
		{"request.context.amounts.01", map[string]any{"01": 5000.0}, true, false},
		// A trailing dot reads the member "" of amounts[1], as the
		// evaluator reads it; a number has none.
		{"request.context.amounts.1.", []any{0.0, 5000.0}, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			// The gate alone: the high-value rule reads a refund amount
			// under the threshold.
			p := perCallPack(t, `{">":[{"var":"`+tc.path+`"},3000]}`, gateOverRequest)
			_, req, rc := load(t)
			req.Input.Context["refund_amount"] = 100.0
			req.Input.Context["amounts"] = tc.context
			e, err := policy.Prepare(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.Evaluate(policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc)})
			if tc.missing {
				var pe *policy.Error
				if !errors.As(err, &pe) || pe.Kind != policy.KindMissingVariable || pe.Path != tc.path {
					t.Fatalf("Evaluate = %v, %v; want a missing_variable error for %s", res, err, tc.path)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g := gate(t, res); g.Active != tc.active {
				t.Errorf("gate active = %v, want %v", g.Active, tc.active)
			}
		})
	}
}
