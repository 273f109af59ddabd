package agent_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

var update = flag.Bool("update", false, "rewrite the golden prompts in testdata")

// answers is a planner backend's script: each run answers with the next
// text the function gives for its prompt.
func answers(answer func(n int, prompt string) string) script {
	var n int
	return func(ctx context.Context, p *agent.Prepared, out *agent.Emitter) (agent.Completion, error) {
		out.Emit(agent.Event{Kind: agent.EventStatus, Message: "planning"})
		text := answer(n, p.Prompt)
		n++
		return agent.Completion{FinalText: text, Data: json.RawMessage(`{"usage":{"input_tokens":100,"output_tokens":20},"cost_usd":0.01}`)}, nil
	}
}

const (
	readStep     = `{"steps":[{"capability_id":"adp_repo.read","args":{"path":"internal/refund/calc.go"}}]}`
	abandonPlan  = `{"decision":{"decision_key":"code.change.apply","outcome":"abandoned","rationale":"Read the code; the change needs a human.","confidence":0.7}}`
	fencedAnswer = "Here is the plan.\n```json\n" + readStep + "\n```\n"
)

// firstTurn reports a prompt of a turn with no results yet.
func firstTurn(prompt string) bool { return strings.Contains(prompt, "## Results so far\nNone yet.") }

// A run planned by an agent: it reads a file through the gateway, then
// decides; usage from the completion data is charged per turn; the record
// replays equal without running the planner agent again.
func TestGovernedAgentPlanner(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	be := newTestBackend("planner", answers(func(_ int, prompt string) string {
		if firstTurn(prompt) {
			return fencedAnswer
		}
		return abandonPlan
	}))
	h := newHarness(t, agent.NewPlanner(be, nil), repoRegistration())
	req, rc := planRequest(t)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	contextostest.AssertOutcome(t, res, "abandoned")
	if len(res.ToolResults) != 1 || res.ToolResults[0].CapabilityID != "adp_repo.read" || res.ToolResults[0].Status != gateway.StatusOK {
		t.Fatalf("tool results %+v", res.ToolResults)
	}
	prompts := be.Requests()
	if len(prompts) != 2 {
		t.Fatalf("the planner agent ran %d times, want 2", len(prompts))
	}
	if got := prompts[0].Env["TRACEPARENT"]; got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("planner TRACEPARENT %q", got)
	}
	if !strings.Contains(prompts[1].Prompt, `"capability_id":"adp_repo.read"`) || !strings.Contains(prompts[1].Prompt, "func round") {
		t.Errorf("the second turn does not see the first turn's result:\n%s", prompts[1].Prompt)
	}
	p := packet(t, h, res)
	if len(p.PlannerOutput) != 2 {
		t.Fatalf("%d planner outputs", len(p.PlannerOutput))
	}
	for i, po := range p.PlannerOutput {
		var plan contextos.Plan
		if err := json.Unmarshal(po, &plan); err != nil {
			t.Fatal(err)
		}
		if plan.Usage.Tokens != 120 || plan.Usage.CostCents != 1 {
			t.Errorf("turn %d usage %+v, want 120 tokens, 1 cent", i, plan.Usage)
		}
	}
	contextostest.AssertReplayEqual(t, h.Replay(res))
	if n := len(be.Requests()); n != 2 {
		t.Errorf("the replay ran the planner agent: %d runs", n)
	}
}

// packet returns the run's captured replay packet.
func packet(t *testing.T, h *contextostest.Harness, res *contextos.Result) *replay.Packet {
	t.Helper()
	p, err := h.Replays.Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// An answer that is not a valid plan is asked again within the turn, with
// the schema's problems as the reason; the turn's usage sums both runs.
func TestAgentPlannerCorrectsAnInvalidAnswer(t *testing.T) {
	be := newTestBackend("planner", answers(func(n int, prompt string) string {
		switch {
		case n == 0:
			return "I think we should read the file."
		case n == 1:
			return `{"steps":[{"capability_id":"adp_repo.read"}]}`
		case firstTurn(prompt):
			return readStep
		}
		return abandonPlan
	}))
	h := newHarness(t, agent.NewPlanner(be, &agent.PlannerOptions{Attempts: 3}), repoRegistration())
	req, rc := planRequest(t)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	prompts := be.Requests()
	if len(prompts) != 4 {
		t.Fatalf("%d planner runs, want 4", len(prompts))
	}
	if strings.Contains(prompts[0].Prompt, "## Your previous answer was refused") {
		t.Error("the first answer's prompt carries a correction")
	}
	for i, want := range []string{"| invalid_plan: the answer does not match plan.v1: (document): ", "| invalid_plan: the answer does not match plan.v1: /steps/0: missing property 'args' (required)"} {
		pr := prompts[i+1].Prompt
		if !strings.Contains(pr, "## Your previous answer was refused\n") || !strings.Contains(pr, want) {
			t.Errorf("correction %d does not say why:\n%s", i+1, pr[strings.Index(pr, "## Your previous"):])
		}
	}
	p := packet(t, h, res)
	var first contextos.Plan
	if err := json.Unmarshal(p.PlannerOutput[0], &first); err != nil {
		t.Fatal(err)
	}
	if first.Usage.Tokens != 360 || first.Usage.CostCents != 3 {
		t.Errorf("turn 0 usage %+v, want three runs' (360 tokens, 3 cents)", first.Usage)
	}
}

// A turn whose every answer is invalid returns a plan asking to be
// replanned with the validation problems: the critic sends it back, and
// the next turn's prompt says exactly why (not the critic's generic
// reason).
func TestAgentPlannerInvalidTurnIsAReplan(t *testing.T) {
	be := newTestBackend("planner", answers(func(n int, prompt string) string {
		if n == 0 {
			return "```json\n{\"steps\": [\n```"
		}
		return abandonPlan
	}))
	h := newHarness(t, agent.NewPlanner(be, &agent.PlannerOptions{Attempts: 1}), repoRegistration())
	req, rc := planRequest(t)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	prompts := be.Requests()
	if len(prompts) != 2 {
		t.Fatalf("%d planner runs, want 2", len(prompts))
	}
	if !strings.Contains(prompts[1].Prompt, "## Why you are asked again\n| planner_replan: invalid_plan: the answer does not match plan.v1: (document): ") {
		t.Errorf("the replan prompt does not say why:\n%s", prompts[1].Prompt)
	}
	contextostest.AssertReplayEqual(t, h.Replay(res))
}

// A valid plan that calls a tool the run does not surface is the planner's
// to propose and the critic's to refuse: the next turn hears why, and no
// such call reaches an adapter.
func TestAgentPlannerUnsurfacedToolIsRefusedByTheCritic(t *testing.T) {
	be := newTestBackend("planner", answers(func(n int, prompt string) string {
		if n == 0 {
			return `{"steps":[{"capability_id":"adp_payments.issue_refund","args":{"amount":1}}]}`
		}
		return abandonPlan
	}))
	planner := agent.NewPlanner(be, nil)
	h := newHarness(t, planner, repoRegistration())
	req, rc := planRequest(t)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	if len(res.ToolResults) != 0 {
		t.Errorf("tool results %+v", res.ToolResults)
	}
	prompts := be.Requests()
	if len(prompts) != 2 || !strings.Contains(prompts[1].Prompt, "| violates_decision_spec: step 0 calls adp_payments.issue_refund, which is not in the tool manifest") {
		t.Fatalf("the critic's reason did not reach the planner (%d runs)", len(prompts))
	}
}

// A planner agent that fails (a non-zero exit) fails the turn: the run
// stops ESCALATED, without a crash, charged what the agent reported
// spending before it failed (nothing when it reported nothing).
func TestAgentPlannerFailedRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script script
		tokens int
		cents  float64
	}{
		{"reported nothing", exitScript(3), 0, 0},
		{"reported its usage", spendScript(3, `{"usage":{"input_tokens":700,"output_tokens":5},"cost_usd":0.02}`), 705, 2},
		// A run that answered a valid plan without saying what it spent
		// fails closed: the turn is not charged as free.
		{"succeeded without reporting its usage", func(ctx context.Context, p *agent.Prepared, out *agent.Emitter) (agent.Completion, error) {
			return agent.Completion{FinalText: abandonPlan}, nil
		}, 0, 0},
		{"succeeded with an unreadable usage", func(ctx context.Context, p *agent.Prepared, out *agent.Emitter) (agent.Completion, error) {
			return agent.Completion{FinalText: abandonPlan, Data: json.RawMessage(`{"usage":{"input_tokens":-4},"cost_usd":"free"}`)}, nil
		}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, agent.NewPlanner(newTestBackend("planner", tc.script), nil), repoRegistration())
			req, rc := planRequest(t)
			res := h.Invoke(req, rc)
			contextostest.AssertStatus(t, res, decision.Escalated)
			if !strings.Contains(res.Record.Rationale.Summary, "planner_failed") {
				t.Errorf("summary %q", res.Record.Rationale.Summary)
			}
			if strings.HasPrefix(tc.name, "succeeded") && !strings.Contains(res.Record.Rationale.Summary, "usage_unknown") {
				t.Errorf("summary %q, want usage_unknown", res.Record.Rationale.Summary)
			}
			if u := res.Record.BudgetUsage; u.Tokens != tc.tokens || u.CostUSDCents != tc.cents {
				t.Errorf("record budget %+v, want %d tokens and %v cents", u, tc.tokens, tc.cents)
			}
			contextostest.AssertReplayEqual(t, h.Replay(res))
		})
	}
}

// The prompt of each turn of a run, with the surfaced tools' argument
// schemas, the results so far and the replan reason, is byte for byte the
// golden one, and rendering is deterministic.
func TestPlannerPromptGolden(t *testing.T) {
	scripted := contextostest.NewPlanner(
		&contextos.Plan{Steps: []contextos.Step{{CapabilityID: "adp_repo.read", Args: map[string]any{"path": "internal/refund/calc.go"}}}},
		&contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "code.change.apply", Outcome: "abandoned"}},
	)
	coder := agent.NewAdapter(newTestBackend("coder", codingScript("x")), &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}})
	h := newHarness(t, scripted, repoRegistration(), coder.Registration())
	req, rc := planRequest(t)
	contextostest.AssertStatus(t, h.Invoke(req, rc), decision.Decided)
	planner := agent.NewPlanner(newTestBackend("planner", exitScript(1)), &agent.PlannerOptions{
		Instructions: "Decision code.change.apply: outcome applied once adp_coder.run completed the change, else abandoned."})
	reqs := scripted.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d plan requests", len(reqs))
	}
	for i, pr := range reqs {
		got := planner.Prompt(pr)
		if again := planner.Prompt(pr); again != got {
			t.Fatalf("turn %d renders differently twice", i)
		}
		golden := filepath.Join("testdata", "planner_prompt_turn"+string(rune('0'+i))+".golden")
		if *update {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run with -update)", err)
		}
		if got != string(want) {
			t.Errorf("turn %d prompt differs from %s (run with -update after checking the change):\n%s", i, golden, got)
		}
	}
}
