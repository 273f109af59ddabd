package claudecode

import (
	"context"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/gateway"
)

// Claude reports the prompt-cache reads and writes apart from its
// input_tokens; they are input tokens all the same, and what a delegated
// run (agent.Adapter) and a planning run (agent.Planner) charge to the
// run's budget counts them: 120 + 2000 read + 300 written + 25 output.
func TestCacheTokensAreChargedToTheBudget(t *testing.T) {
	const want = 120 + 2000 + 300 + 25
	t.Run("usage", func(t *testing.T) {
		o := runFake(t, "cached_usage", Config{}, agent.RunRequest{Prompt: "plan"})
		u, ok := agent.UsageOf(o.comp)
		if !ok || u.Tokens() != want || u.InputTokens != 2420 || u.CachedInputTokens != 2000 || u.OutputTokens != 25 {
			t.Fatalf("UsageOf = %+v (ok %v), want %d tokens: 2420 input of which 2000 cached, 25 output", u, ok, want)
		}
	})
	t.Run("adapter", func(t *testing.T) {
		ad := agent.NewAdapter(newFake(t, "cached_usage", Config{}), nil)
		out, err := ad.Call(context.Background(), &gateway.Call{
			Envelope:       &gateway.ToolCallEnvelope{ToolCallID: "tc_1", CapabilityID: ad.CapabilityID(), Args: map[string]any{"prompt": "fix it"}},
			Capability:     agent.AdapterCapability,
			Attempt:        1,
			IdempotencyKey: "idem_1",
		})
		if err != nil {
			t.Fatal(err)
		}
		if out.Tokens != want || out.CostCents != 1 {
			t.Fatalf("the call charges %d tokens and %v cents, want %d and 1", out.Tokens, out.CostCents, want)
		}
	})
	t.Run("planner", func(t *testing.T) {
		pl := agent.NewPlanner(newFake(t, "cached_usage", Config{}), nil)
		plan, err := pl.Plan(context.Background(), &contextos.PlanRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if plan.Usage.Tokens != want || plan.Usage.CostCents != 1 {
			t.Fatalf("the turn charges %+v, want %d tokens and 1 cent", plan.Usage, want)
		}
	})
}
