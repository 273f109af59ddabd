package gateway_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/contextos/contextos/gateway"
)

// FuzzDecodeCallEnvelope: any input decodes to a well-formed envelope or
// fails with a *ToolError (invalid_input); never a panic.
func FuzzDecodeCallEnvelope(f *testing.F) {
	f.Add([]byte(`{"envelope_version":"contextos.tool_call.v1","tool_call_id":"tool_1","run_id":"run_1","trace_id":"t","capability_id":"adp_payments.issue_refund","args":{"amount_inr":4200},"principal_chain":[],"approval_mode_requested":"destructive","approval_mode_effective":"destructive","approval_mode_highest":"destructive","policy_decision_id":null,"evidence_refs":[],"idempotency_key":"ik_1","auth_ref":null}`))
	f.Add([]byte(`{"envelope_version":"contextos.tool_call.v2"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := gateway.DecodeCallEnvelope(data)
		if err != nil {
			var te *gateway.ToolError
			if !errors.As(err, &te) || te.Code != gateway.CodeInvalidInput {
				t.Fatalf("error is not invalid_input: %v", err)
			}
			return
		}
		b, _ := json.Marshal(env)
		if _, err := gateway.DecodeCallEnvelope(b); err != nil {
			t.Fatalf("a decoded envelope does not decode again: %v", err)
		}
	})
}

// FuzzCallArguments: any JSON arguments to the refund capability are
// validated (schema and constraints) without a panic; only valid ones
// reach the adapter.
func FuzzCallArguments(f *testing.F) {
	f.Add([]byte(`{"order_id":"ord_881","amount_inr":4200,"currency":"INR"}`))
	f.Add([]byte(`{"order_id":7,"amount_inr":"x","currency":["INR"],"extra":{}}`))
	f.Add([]byte(`{"amount_inr":1e308}`))
	fx := newFixture(f, lowValue)
	f.Fuzz(func(t *testing.T, data []byte) {
		var args map[string]any
		if json.Unmarshal(data, &args) != nil || args == nil {
			return
		}
		before := fx.payments.CallCount("issue_refund")
		res, err := fx.run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_payments.issue_refund", Args: args, Step: gateway.StepID{Index: 9}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status == gateway.StatusRejected && fx.payments.CallCount("issue_refund") != before {
			t.Fatal("a rejected call reached the adapter")
		}
	})
}
