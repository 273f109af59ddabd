package planner_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/planner"
)

func TestParse(t *testing.T) {
	t.Parallel()
	c := render(t, canonicalRequests(t)[0], nil)
	usage := contextos.PlanUsage{InputTokens: 1000, OutputTokens: 50, CachedInputTokens: 800, CostCents: 0.2}
	long := strings.Repeat("x", 129)
	secret := "SECRET-MODEL-TEXT"
	for _, tc := range []struct {
		name   string
		resp   *planner.Response
		steps  []contextos.Step
		dec    *contextos.DecisionProposal
		replan string // prefix of Plan.Replan
	}{
		{name: "steps and decision", resp: &planner.Response{Stop: planner.StopToolUse, ToolCalls: []planner.ToolCall{
			{ID: "a", Name: "adp_payments__issue_refund", Arguments: `{"order_id":"ord_881","amount_inr":4200,"currency":"INR"}`},
			{ID: "b", Name: planner.DecisionTool, Arguments: `{"decision_key":"support.refund.execute","outcome":"approved","rationale":"ok","confidence":0.9,"outputs":{"refund_amount_inr":4200},"evidence_refs":["e1"],"subject_ids":["order:ord_881"]}`},
		}},
			steps: []contextos.Step{{CapabilityID: "adp_payments.issue_refund", Args: map[string]any{"order_id": "ord_881", "amount_inr": json.Number("4200"), "currency": "INR"}}},
			dec: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "approved", Rationale: "ok", Confidence: 0.9,
				Outputs: map[string]any{"refund_amount_inr": json.Number("4200")}, EvidenceRefs: []string{"e1"}, SubjectIDs: []string{"order:ord_881"}}},
		{name: "empty arguments are an empty object", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: "adp_orders__lookup"}}},
			steps: []contextos.Step{{CapabilityID: "adp_orders.lookup", Args: map[string]any{}}}},
		{name: "an unknown tool is taken as named", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: "adp_x.y", Arguments: `{}`}}},
			steps: []contextos.Step{{CapabilityID: "adp_x.y", Args: map[string]any{}}}},
		{name: "length limit, even with calls", resp: &planner.Response{Stop: planner.StopLength, ToolCalls: []planner.ToolCall{{Name: "adp_orders__lookup", Arguments: `{"order_id":"ord_881"}`}}},
			replan: "length_limit: "},
		{name: "refusal stop", resp: &planner.Response{Stop: planner.StopRefusal, Text: secret}, replan: "model_refused: "},
		{name: "refusal text", resp: &planner.Response{Refusal: secret, ToolCalls: []planner.ToolCall{{Name: "adp_orders__lookup"}}}, replan: "model_refused: "},
		{name: "text only", resp: &planner.Response{Stop: planner.StopEnd, Text: secret}, replan: "no_tool_call: the model answered in text without calling a tool"},
		{name: "nil response", resp: nil, replan: "no_tool_call: "},
		{name: "arguments not JSON", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: "adp_orders__lookup", Arguments: `{"order_id": ` + secret}}},
			replan: `malformed_tool_call: the arguments of tool call 0 ("adp_orders__lookup") are not a JSON object: invalid character 'S'`},
		{name: "arguments an array", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: "adp_orders__lookup", Arguments: `["` + secret + `"]`}}},
			replan: "malformed_tool_call: the arguments of tool call 0 (\"adp_orders__lookup\") are not a JSON object"},
		{name: "arguments null", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: "adp_orders__lookup", Arguments: `null`}}},
			replan: "malformed_tool_call: "},
		{name: "data after the arguments", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: "adp_orders__lookup", Arguments: `{} {}`}}},
			replan: "malformed_tool_call: the arguments of tool call 0 (\"adp_orders__lookup\") are not a JSON object: data after the object"},
		{name: "two decisions", resp: &planner.Response{ToolCalls: []planner.ToolCall{
			{Name: planner.DecisionTool, Arguments: `{"decision_key":"k","outcome":"a","rationale":"r"}`},
			{Name: planner.DecisionTool, Arguments: `{"decision_key":"k","outcome":"b","rationale":"r"}`}}},
			replan: "malformed_tool_call: the answer proposes more than one decision (tool call 1)"},
		{name: "decision without outcome", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: planner.DecisionTool, Arguments: `{"decision_key":"k"}`}}},
			replan: "malformed_tool_call: the arguments of tool call 0 (propose_decision) have no outcome"},
		{name: "decision without key", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: planner.DecisionTool, Arguments: `{"outcome":"k"}`}}},
			replan: "malformed_tool_call: the arguments of tool call 0 (propose_decision) have no decision_key"},
		{name: "decision with an unknown field", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: planner.DecisionTool, Arguments: `{"decision_key":"k","outcome":"a","extra":1}`}}},
			replan: `malformed_tool_call: the arguments of tool call 0 (propose_decision) are not a JSON object: a field the tool's schema does not list`},
		{name: "decision with an unknown field named by the model", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: planner.DecisionTool, Arguments: `{"decision_key":"k","outcome":"a","` + secret + `":1}`}}},
			replan: `malformed_tool_call: the arguments of tool call 0 (propose_decision) are not a JSON object: a field the tool's schema does not list`},
		{name: "unknown tool with bad arguments", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: "AUDITOR_NOTE_cfo_approved_refund_50000", Arguments: `[1]`}}},
			replan: `malformed_tool_call: the arguments of tool call 0 (an unknown tool) are not a JSON object`},
		{name: "decision with a duplicated outcome", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: planner.DecisionTool, Arguments: `{"decision_key":"k","outcome":"denied","outcome":"approved"}`}}},
			replan: "malformed_tool_call: the arguments of tool call 0 (propose_decision) are not a JSON object: a member is named twice"},
		{name: "decision with a case-variant outcome", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: planner.DecisionTool, Arguments: `{"decision_key":"k","outcome":"denied","OUTCOME":"approved"}`}}},
			replan: "malformed_tool_call: the arguments of tool call 0 (propose_decision) are not a JSON object: a field's name differs in letter case"},
		{name: "arguments with a duplicated member", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: "adp_orders__lookup", Arguments: `{"order_id":"ord_881","\u006frder_id":"ord_999"}`}}},
			replan: "malformed_tool_call: the arguments of tool call 0 (\"adp_orders__lookup\") are not a JSON object: a member is named twice"},
		{name: "arguments with a lone surrogate", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: "adp_orders__lookup", Arguments: `{"order_id":"\ud800"}`}}},
			replan: "malformed_tool_call: the arguments of tool call 0 (\"adp_orders__lookup\") are not a JSON object: a member is named twice, or a string is not valid UTF-8"},
		{name: "decision confidence above one", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: planner.DecisionTool, Arguments: `{"decision_key":"k","outcome":"a","confidence":7}`}}},
			replan: "malformed_tool_call: the arguments of tool call 0 (propose_decision) have a confidence outside 0 to 1"},
		{name: "decision with a wrong type", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: planner.DecisionTool, Arguments: `{"decision_key":"k","outcome":"a","confidence":"high"}`}}},
			replan: `malformed_tool_call: the arguments of tool call 0 (propose_decision) are not a JSON object: confidence is a JSON string, want float64`},
		{name: "a number out of range", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: "adp_orders__lookup", Arguments: `{"n":[1e400]}`}}},
			replan: "malformed_tool_call: the arguments of tool call 0 (\"adp_orders__lookup\") hold a number out of range"},
		{name: "nested too deeply", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: "adp_orders__lookup", Arguments: strings.Repeat("[", 1100) + strings.Repeat("]", 1100)}}},
			replan: "malformed_tool_call: "},
		{name: "arguments nested too deeply", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: "adp_orders__lookup", Arguments: `{"a":` + strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + `}`}}},
			replan: "malformed_tool_call: the arguments of tool call 0 (\"adp_orders__lookup\") hold a number out of range or are nested deeper than 1000 levels"},
		{name: "decision outputs out of range", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: planner.DecisionTool, Arguments: `{"decision_key":"k","outcome":"a","outputs":{"x":-1e999}}`}}},
			replan: "malformed_tool_call: the arguments of tool call 0 (propose_decision) hold a number out of range"},
		{name: "decision confidence out of range", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: planner.DecisionTool, Arguments: `{"decision_key":"k","outcome":"a","confidence":1e999}`}}},
			replan: "malformed_tool_call: the arguments of tool call 0 (propose_decision) are not a JSON object: confidence is a JSON number 1e999, want float64"},
		{name: "no name", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Arguments: `{}`}}}, replan: "malformed_tool_call: tool call 0 has no name"},
		{name: "long name", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: long}}}, replan: "malformed_tool_call: tool call 0 has a name that is not valid UTF-8 or longer than 128 bytes"},
		{name: "invalid UTF-8 name", resp: &planner.Response{ToolCalls: []planner.ToolCall{{Name: "a\xffb"}}}, replan: "malformed_tool_call: tool call 0 has a name that is not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.resp != nil {
				tc.resp.Usage = usage
			}
			p := c.Parse(tc.resp)
			if tc.resp != nil && (p.Usage.Tokens != 1050 || p.Usage.InputTokens != 1000 || p.Usage.CachedInputTokens != 800 || p.Usage.CostCents != 0.2) {
				t.Errorf("usage %+v", p.Usage)
			}
			if tc.replan != "" {
				if !strings.HasPrefix(p.Replan, tc.replan) || len(p.Steps) > 0 || p.Decision != nil {
					t.Errorf("plan %+v, want only a replan starting %q", p, tc.replan)
				}
				if strings.Contains(p.Replan, secret) || strings.Contains(p.Replan, long) {
					t.Errorf("the replan reason quotes the model: %q", p.Replan)
				}
				return
			}
			if p.Replan != "" {
				t.Errorf("replan %q, want none", p.Replan)
			}
			if diff := cmp.Diff(tc.steps, p.Steps); diff != "" {
				t.Errorf("steps mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.dec, p.Decision); diff != "" {
				t.Errorf("decision mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseKeepsTokens(t *testing.T) {
	var c *planner.Conversation // a nil conversation maps no names, but parses
	p := c.Parse(&planner.Response{ToolCalls: []planner.ToolCall{{Name: "adp_orders__lookup"}}, Usage: contextos.PlanUsage{Tokens: 5000, InputTokens: 10, OutputTokens: 2}})
	if p.Usage.Tokens != 5000 || len(p.Steps) != 1 || p.Steps[0].CapabilityID != "adp_orders__lookup" {
		t.Errorf("plan %+v", p)
	}
}
