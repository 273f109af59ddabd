package gateway_test

import (
	"encoding/json"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
)

// A per-call gate whose number reads an argument through a default
// ({"var": [path, 0]}, the form policy.md gives for calls that may lack
// it) or through max or min fails closed when the call carries that
// argument as something other than a number, as the plain {"var": path}
// form does: JsonLogic would read it as NaN, every comparison with NaN is
// false, and a 50000 refund the gate holds ran without its approval
// because the model sent a fee of "waived" or null. A fee that is a
// number, or absent (the default stands for it), is judged as before. The
// tool's schema types the amount and leaves the fee untyped.
func TestPerCallGateNumericOperandsFailClosed(t *testing.T) {
	t.Parallel()
	schema := refundSchemaAs(`{"type":"object","required":["order_id","amount_inr","currency"],"properties":{"order_id":{"type":"string"},"amount_inr":{"type":"number"},"currency":{"enum":["INR"]},"fee_inr":{"description":"a fee to charge, if any"},"idempotency_key":{"type":"string"}},"additionalProperties":false}`)
	forms := map[string]string{
		"sum with a default": `{">":[{"+":[{"var":"tool.args.amount_inr"},{"var":["tool.args.fee_inr",0]}]},3000]}`,
		"max":                `{">":[{"max":[{"var":"tool.args.fee_inr"},{"var":"tool.args.amount_inr"}]},3000]}`,
		"min with a default": `{"<":[{"min":[{"var":["tool.args.fee_inr",0]},{"-":[0,{"var":"tool.args.amount_inr"}]}]},-3000]}`,
	}
	for name, when := range forms {
		for _, tc := range []struct {
			fee  any
			want gateway.Status
		}{
			{"waived", gateway.StatusBlocked},
			{nil, gateway.StatusBlocked},
			{[]any{1.0}, gateway.StatusBlocked},
			{25.0, gateway.StatusPaused},
		} {
			f := newFixture(t, lowValue, schema, editPack(func(p *pack.Pack) { p.PolicyLayer.ApprovalGates[0].When = json.RawMessage(when) }))
			req := refundCall(50000)
			req.Args["fee_inr"] = tc.fee
			res, err := f.run.Call(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.want || f.payments.CallCount("issue_refund") != 0 {
				t.Errorf("%s, fee %#v: %s %+v, the adapter ran %d times; want %s", name, tc.fee, res.Status, res.Error, f.payments.CallCount("issue_refund"), tc.want)
			}
			if tc.want == gateway.StatusBlocked && (res.Error == nil || res.Error.Code != gateway.CodeRuntimePolicyInvalid) {
				t.Errorf("%s, fee %#v: %+v, want runtime_policy_invalid", name, tc.fee, res.Error)
			}
		}
	}
	// A call without the fee: the default stands for it.
	f := newFixture(t, lowValue, schema, editPack(func(p *pack.Pack) { p.PolicyLayer.ApprovalGates[0].When = json.RawMessage(forms["sum with a default"]) }))
	if res, err := f.run.Call(ctx, refundCall(50000)); err != nil || res.Status != gateway.StatusPaused {
		t.Errorf("no fee: %s %+v, %v; want paused", res.Status, res.Error, err)
	}
}

// A per-call gate over a total the call's line items add up to holds the
// call when a line carries no amount (or one that is not a number), and
// fails closed: the sum would be NaN, the comparison false, and the 50000
// line refunded without its approval.
func TestPerCallGateOverComputedTotalFailsClosed(t *testing.T) {
	t.Parallel()
	schema := refundSchemaAs(`{"type":"object","required":["order_id","amount_inr","currency"],"properties":{"order_id":{"type":"string"},"amount_inr":{"type":"number"},"currency":{"enum":["INR"]},"lines":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"amount_inr":{}}}},"idempotency_key":{"type":"string"}},"additionalProperties":false}`)
	when := `{">":[{"reduce":[{"var":"tool.args.lines"},{"+":[{"var":"accumulator"},{"var":"current.amount_inr"}]},0]},3000]}`
	line := map[string]any{"sku": "a", "amount_inr": 50000.0}
	for _, tc := range []struct {
		name  string
		lines []any
		want  gateway.Status
	}{
		{"one line of 50000", []any{line}, gateway.StatusPaused},
		{"a second line without an amount", []any{line, map[string]any{"sku": "b"}}, gateway.StatusBlocked},
		{"a second line of null", []any{line, map[string]any{"sku": "b", "amount_inr": nil}}, gateway.StatusBlocked},
		{"a second line of \"50,000\"", []any{map[string]any{"sku": "a", "amount_inr": 10.0}, map[string]any{"sku": "b", "amount_inr": "50,000"}}, gateway.StatusBlocked},
		{"two lines of 100", []any{map[string]any{"sku": "a", "amount_inr": 100.0}, map[string]any{"sku": "b", "amount_inr": 100.0}}, gateway.StatusCompleted},
	} {
		f := newFixture(t, lowValue, schema, editPack(func(p *pack.Pack) { p.PolicyLayer.ApprovalGates[0].When = json.RawMessage(when) }))
		req := refundCall(1200)
		req.Args["lines"] = tc.lines
		res, err := f.run.Call(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ran := f.payments.CallCount("issue_refund")
		if res.Status != tc.want || ran != 0 && tc.want != gateway.StatusCompleted {
			t.Errorf("%s: %s %+v, the adapter ran %d times; want %s", tc.name, res.Status, res.Error, ran, tc.want)
		}
		if tc.want == gateway.StatusBlocked && (res.Error == nil || res.Error.Code != gateway.CodeRuntimePolicyInvalid) {
			t.Errorf("%s: %+v, want runtime_policy_invalid", tc.name, res.Error)
		}
	}
}
