package contextos_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
)

// A pack may name a redaction rule the host supplies through
// Options.Gateway.Redactors: the runtime's pack validation knows the
// name, and the run redacts with the rule. A rule nobody supplies is
// refused when the pack is validated, and the runtime's names do not leak
// into validation elsewhere in the process.
func TestHostRedactorKnownToValidation(t *testing.T) {
	const rule, employee = "root_test_employee_id", "EMP-123456"
	var doc map[string]any
	if err := json.Unmarshal(readTestdata(t, "ctxpack.support-1.0.0.json"), &doc); err != nil {
		t.Fatal(err)
	}
	g := doc["policy_layer"].(map[string]any)["guardrails"].(map[string]any)
	g["redaction_rules"] = append(g["redaction_rules"].([]any), rule)
	data, _ := json.Marshal(doc)
	var ve *pack.ValidationError
	if _, err := pack.DecodeAndValidate(data, nil); !errors.As(err, &ve) || !ve.HasAt(pack.CodeUnknownRedactionRule, "policy_layer.guardrails.redaction_rules[2]") {
		t.Fatalf("before any runtime supplies %s: DecodeAndValidate = %v, want %s", rule, err, pack.CodeUnknownRedactionRule)
	}
	emp, err := gateway.RegexpRedactor(`\bEMP-\d{6}\b`)
	if err != nil {
		t.Fatal(err)
	}
	planner := contextostest.NewPlanner(lookupPlan(), refundPlan(1200))
	h := contextostest.New(t, planner, [][]byte{data}, &contextostest.Options{
		Runtime: contextos.Options{Evidence: evidence(t), Gateway: gateway.Options{Redactors: map[string]gateway.Redactor{rule: emp}}},
		Scopes:  map[string][]string{"adp_payments.issue_refund": {"payments.refund"}},
	})
	scriptDefaults(h, "adp_orders")
	h.Adapter("adp_orders").On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200, "handled_by": employee})
	req, rc := refundRequest(t, 1200, true)
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	transcript, _ := json.Marshal(h.Transcript.Entries())
	record, _ := json.Marshal(res.Record)
	if strings.Contains(string(transcript), employee) || strings.Contains(string(record), employee) || !strings.Contains(string(transcript), gateway.Redacted) {
		t.Errorf("the host rule did not redact the employee id:\n%s", transcript)
	}
	if _, err := pack.DecodeAndValidate(data, nil); !errors.As(err, &ve) || !ve.HasAt(pack.CodeUnknownRedactionRule, "policy_layer.guardrails.redaction_rules[2]") {
		t.Errorf("after a runtime supplied %s, validation without it = %v, want %s", rule, err, pack.CodeUnknownRedactionRule)
	}
	if _, err := pack.DecodeAndValidate(data, &pack.ValidateOptions{RedactionRules: []string{rule}}); err != nil {
		t.Errorf("validation with %s: %v", rule, err)
	}
}
