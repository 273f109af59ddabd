package agent_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// An agent run that reports a token count or cost beyond 2^53−1 does not
// charge it or put it in a record: the governed call's outcome is refused
// naming the field (or, beside a failed run's error, that spend is
// ignored; a valid part of it is charged), the run ends with its record,
// and every record still reads.
func TestAgentSpendBeyondSafeIntegers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, tc := range []struct {
		name   string
		code   int
		data   string
		field  string // the refused outcome field; "" for a failed run
		tokens int    // charged: the valid part of the spend
	}{
		{"tokens 2^63−1", 0, `{"usage":{"input_tokens":9223372036854775807,"output_tokens":84}}`, "tokens", 0},
		{"tokens 2^53", 0, `{"usage":{"input_tokens":9007199254740992}}`, "tokens", 0},
		{"cost 1e300 dollars", 0, `{"usage":{"input_tokens":10},"cost_usd":1e300}`, "cost_cents", 10},
		{"failed run, tokens 2^63−1", 3, `{"usage":{"input_tokens":9223372036854775807}}`, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ad := agent.NewAdapter(newTestBackend("coder", spendScript(tc.code, tc.data)), &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}})
			h := newHarness(t, contextostest.NewPlanner(fixPlan(map[string]any{"prompt": fixPrompt})), ad.Registration())
			req, rc := coderRequest(t)
			done := h.Approve(h.Invoke(req, rc), techLead)
			last := done.ToolResults[len(done.ToolResults)-1]
			if last.CapabilityID != "adp_coder.run" || last.Metadata.Tokens != tc.tokens || last.Metadata.CostCents > 1<<53-1 {
				t.Fatalf("agent result %s %s: tokens %d, cost %v; want %d tokens and no invalid spend", last.CapabilityID, last.Status, last.Metadata.Tokens, last.Metadata.CostCents, tc.tokens)
			}
			if tc.field != "" && (last.Status != gateway.StatusError || last.Error == nil || last.Error.Details["field"] != tc.field) {
				t.Errorf("agent result %s %+v, want an invalid outcome naming %s", last.Status, last.Error, tc.field)
			}
			if b := done.Record.BudgetUsage; b.Tokens > 1<<53-1 || b.CostUSDCents > 1<<53-1 {
				t.Errorf("record budget_usage %+v holds a number beyond 2^53−1", b)
			}
			ctx := context.Background()
			if all, err := h.Decisions.List(ctx, decision.Filter{}); err != nil || len(all) == 0 {
				t.Errorf("List = %d records, %v", len(all), err)
			}
			if err := h.Decisions.Verify(ctx); err != nil {
				t.Errorf("Verify = %v", err)
			}
			contextostest.AssertReplayEqual(t, h.Replay(done))
		})
	}
}
