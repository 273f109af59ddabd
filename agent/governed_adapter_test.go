package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/schemas"
)

const fixPrompt = "Fix the rounding bug in internal/refund/calc.go and add a test."

// fixPlan calls the coding agent once and proposes the decision.
func fixPlan(args map[string]any) *contextos.Plan {
	return &contextos.Plan{
		Steps: []contextos.Step{{CapabilityID: "adp_coder.run", Args: args}},
		Decision: &contextos.DecisionProposal{DecisionKey: "code.change.apply", Outcome: "applied",
			Rationale: "The agent fixed the bug behind a reviewed approval.", Confidence: 0.9, SubjectIDs: []string{"repo:payments"}},
		Usage: contextos.PlanUsage{Tokens: 500, CostCents: 1},
	}
}

// A delegated agent run behind an approval gate: the first Invoke pauses
// before the agent runs, the approved resume runs it exactly once with
// the plan's prompt and the run's trace context, the record is DECIDED and
// the replay is equal without running the agent again.
func TestGovernedAgentCallBehindApprovalGate(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	be := newTestBackend("coder", codingScript("Fixed: round half away from zero; added TestRound."))
	ad := agent.NewAdapter(be, &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}, WorkingDir: t.TempDir(),
		Extensions: map[string]json.RawMessage{agent.CapNonInteractive: json.RawMessage("true")},
		Allow:      agent.CallLimits{Extensions: map[string][]json.RawMessage{agent.CapModel: {json.RawMessage(`"gpt-test"`)}}}})
	planner := contextostest.NewPlanner(fixPlan(map[string]any{"prompt": fixPrompt, "extensions": map[string]any{agent.CapModel: "gpt-test"}}))
	h := newHarness(t, planner, ad.Registration(), repoRegistration())
	req, rc := coderRequest(t)

	res := h.Invoke(req, rc)
	contextostest.AssertPending(t, res, "GATE_CODE_REVIEW")
	if n := len(be.Requests()); n != 0 {
		t.Fatalf("the agent ran %d times before the approval", n)
	}
	if res.Pending.ApproverRole != "tech_lead" {
		t.Errorf("approver role %q", res.Pending.ApproverRole)
	}

	done := h.Approve(res, techLead)
	contextostest.AssertStatus(t, done, decision.Decided)
	contextostest.AssertOutcome(t, done, "applied")
	runs := be.Requests()
	if len(runs) != 1 {
		t.Fatalf("the agent ran %d times, want 1", len(runs))
	}
	p := runs[0]
	if p.Prompt != fixPrompt {
		t.Errorf("prompt %q", p.Prompt)
	}
	if got, want := p.Env["TRACEPARENT"], "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; got != want {
		t.Errorf("TRACEPARENT %q, want %q", got, want)
	}
	if got := p.Env["TRACESTATE"]; got != "vendor=abc" {
		t.Errorf("TRACESTATE %q", got)
	}
	if p.Model != "gpt-test" || !p.NonInteractive || !p.NonInteractiveSet {
		t.Errorf("extensions not passed: model %q non-interactive %v/%v", p.Model, p.NonInteractive, p.NonInteractiveSet)
	}

	last := done.ToolResults[len(done.ToolResults)-1]
	if last.CapabilityID != "adp_coder.run" || last.Status != gateway.StatusCompleted {
		t.Fatalf("agent call %s %s %+v", last.CapabilityID, last.Status, last.Error)
	}
	if last.Metadata.Attempts != 1 || last.Metadata.CostCents != 25 {
		t.Errorf("attempts %d, cost %v cents (want 1, 25)", last.Metadata.Attempts, last.Metadata.CostCents)
	}
	out, _ := json.Marshal(last.Output)
	want := `{"agent_kind":"coder","cost_usd":0.25,"events":{"by_kind":{"error":1,"status":1,"text_output":1,"tool_call":3,"tool_result":1},` +
		`"channels":["assistant","error","status","tool"],"messages":[{"channel":"status","kind":"status","message":"session started"},` +
		`{"channel":"error","kind":"error","message":"retrying the build"}],"messages_dropped":0,"total":7},` +
		`"exit":{"code":0,"success":true},"final_text":"Fixed: round half away from zero; added TestRound.",` +
		`"tool_calls":2,"tool_names":["command_execution","file_change"],` +
		`"usage":{"cached_input_tokens":2000,"input_tokens":2400,"output_tokens":84}}`
	if string(out) != want {
		t.Errorf("output\n got %s\nwant %s", out, want)
	}
	if !strings.HasPrefix(strings.Join(last.Mutations, ","), "agent_run:coder:") {
		t.Errorf("mutations %v", last.Mutations)
	}
	// Nothing the agent said beyond the summary reaches the transcript.
	tr, _ := json.Marshal(h.Transcript.Entries())
	for _, s := range []string{rawTextSecret, rawDataSecret} {
		if strings.Contains(string(tr), s) {
			t.Errorf("the transcript holds %s", s)
		}
	}

	rep := h.Replay(done)
	contextostest.AssertReplayEqual(t, rep)
	if n := len(be.Requests()); n != 1 {
		t.Errorf("the replay ran the agent: %d runs", n)
	}
}

// A plan calling the agent without a prompt, or with a field the schema
// does not know, is refused by the gateway before any approval or run.
func TestGovernedAgentArgsAreSchemaChecked(t *testing.T) {
	t.Parallel()
	for name, args := range map[string]map[string]any{
		"no prompt":     {"working_dir": "/tmp"},
		"empty prompt":  {"prompt": ""},
		"unknown field": {"prompt": "x", "shell": "rm -rf /"},
		"bad extension": {"prompt": "x", "extensions": map[string]any{"NOT A KEY": true}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			be := newTestBackend("coder", codingScript("done"))
			ad := agent.NewAdapter(be, &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}})
			bad := fixPlan(args)
			bad.Decision = nil
			planner := contextostest.NewPlanner(bad, &contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "code.change.apply", Outcome: "abandoned", Rationale: "the call was refused"}})
			h := newHarness(t, planner, ad.Registration())
			req, rc := coderRequest(t)
			res := h.Invoke(req, rc)
			if res.Pending != nil {
				t.Fatalf("paused for approval of a malformed call")
			}
			r := res.ToolResults[0]
			if r.Status != gateway.StatusRejected || r.Error == nil || r.Error.Code != gateway.CodeInvalidInput {
				t.Fatalf("result %s %+v, want rejected invalid_input", r.Status, r.Error)
			}
			if n := len(be.Requests()); n != 0 {
				t.Errorf("the agent ran %d times", n)
			}
		})
	}
}

// call runs the adapter once through a gateway run of the coder pack
// (approval granted in advance is not needed: the tests call the adapter
// directly with a gateway.Call).
func callAdapter(ctx context.Context, ad *agent.Adapter, args map[string]any) (*gateway.Outcome, error) {
	return ad.Call(ctx, &gateway.Call{Envelope: &gateway.ToolCallEnvelope{ToolCallID: "tc_1", CapabilityID: ad.CapabilityID(), Args: args},
		Capability: agent.AdapterCapability, Attempt: 1, IdempotencyKey: "idem_1"})
}

// How each way a run ends maps to the call's result.
func TestAdapterFailures(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Run("non-zero exit", func(t *testing.T) {
		ad := agent.NewAdapter(newTestBackend("coder", exitScript(2)), nil)
		_, err := callAdapter(context.Background(), ad, map[string]any{"prompt": "x"})
		var te *gateway.ToolError
		if !errors.As(err, &te) || te.Code != gateway.CodeExecutionFailed || te.Retryable {
			t.Fatalf("err %v, want a non-retryable execution_failed", err)
		}
		if te.Message != "the agent run ended with exit status 2" {
			t.Errorf("message %q", te.Message)
		}
		d, _ := json.Marshal(te.Details)
		if !strings.Contains(string(d), `"exit":{"code":2,"success":false}`) || !strings.Contains(string(d), `"message":"tests failed"`) || strings.Contains(string(d), rawTextSecret) {
			t.Errorf("details %s", d)
		}
	})
	t.Run("invalid request", func(t *testing.T) {
		ad := agent.NewAdapter(newTestBackend("coder", codingScript("x")), nil)
		_, err := callAdapter(context.Background(), ad, map[string]any{"prompt": "   "})
		var te *gateway.ToolError
		if !errors.As(err, &te) || te.Code != gateway.CodeInvalidInput || te.Retryable || te.Message != "invalid request: prompt must not be empty" {
			t.Fatalf("err %#v", err)
		}
	})
	t.Run("unsupported capability", func(t *testing.T) {
		// The host allows the key; the backend does not know it.
		ad := agent.NewAdapter(newTestBackend("coder", codingScript("x")), &agent.AdapterOptions{
			Allow: agent.CallLimits{Extensions: map[string][]json.RawMessage{"backend.coder.sandbox": {json.RawMessage(`"none"`)}}}})
		_, err := callAdapter(context.Background(), ad, map[string]any{"prompt": "x", "extensions": map[string]any{"backend.coder.sandbox": "none"}})
		var te *gateway.ToolError
		if !errors.As(err, &te) || te.Code != gateway.CodeInvalidInput || te.Retryable || te.Message != "unsupported capability for coder: backend.coder.sandbox" {
			t.Fatalf("err %#v", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		ad := agent.NewAdapter(newTestBackend("coder", blockScript), nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := callAdapter(ctx, ad, map[string]any{"prompt": "x"})
		var te *gateway.ToolError
		if !errors.As(err, &te) || te.Code != gateway.CodeTimeout || te.Retryable {
			t.Fatalf("err %v, want a non-retryable timeout", err)
		}
	})
	t.Run("backend timeout", func(t *testing.T) {
		// The backend's own run timeout (its default) passes first.
		ad := agent.NewAdapter(&timeoutBackend{newTestBackend("coder", blockScript)}, nil)
		_, err := callAdapter(context.Background(), ad, map[string]any{"prompt": "x"})
		var te *gateway.ToolError
		if !errors.As(err, &te) || te.Code != gateway.CodeTimeout || te.Retryable {
			t.Fatalf("err %v, want a non-retryable timeout", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		be := newTestBackend("coder", blockScript)
		be.started = make(chan struct{}, 1)
		ad := agent.NewAdapter(be, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := callAdapter(ctx, ad, map[string]any{"prompt": "x"})
			done <- err
		}()
		<-be.started
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	})
}

// timeoutBackend runs its backend with a short default timeout.
type timeoutBackend struct{ *testBackend }

func (b *timeoutBackend) Run(ctx context.Context, req agent.RunRequest) (*agent.Run, error) {
	req.Timeout = agent.Timeout(20 * time.Millisecond)
	return b.testBackend.Run(ctx, req)
}

// The gateway's attempt timeout cancels the agent: the call fails with a
// timeout, once (never retried), and the run goes on to a record.
func TestGovernedAgentTimeout(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	be := newTestBackend("coder", blockScript)
	ad := agent.NewAdapter(be, &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}, Timeout: 50 * time.Millisecond})
	planner := contextostest.NewPlanner(fixPlan(map[string]any{"prompt": fixPrompt}))
	h := newHarness(t, planner, ad.Registration())
	req, rc := coderRequest(t)
	done := h.Approve(h.Invoke(req, rc), techLead)
	last := done.ToolResults[len(done.ToolResults)-1]
	if last.Status != gateway.StatusFailed || last.Error == nil || last.Error.Code != gateway.CodeTimeout || last.Error.Retryable || last.Metadata.Attempts != 1 {
		t.Fatalf("result %s %+v attempts %d", last.Status, last.Error, last.Metadata.Attempts)
	}
	if n := len(be.Requests()); n != 1 {
		t.Errorf("the agent ran %d times, want 1", n)
	}
	if done.Status == decision.Decided && done.Record.Outcome == "applied" {
		t.Errorf("a timed-out change was decided applied")
	}
}

// Cancelling the run's context while the agent works cancels the agent:
// the resume returns, the run stops resumable, no goroutine is left.
func TestGovernedAgentCancelledWithTheRun(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	be := newTestBackend("coder", blockScript)
	be.started = make(chan struct{}, 1)
	ad := agent.NewAdapter(be, &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}})
	planner := contextostest.NewPlanner(fixPlan(map[string]any{"prompt": fixPrompt}))
	h := newHarness(t, planner, ad.Registration())
	req, rc := coderRequest(t)
	res := h.Invoke(req, rc)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-be.started
		cancel()
	}()
	done, err := h.Runtime.Resume(ctx, res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{contextostest.Approval(res.Pending, techLead, contextostest.FixedTime())}})
	if err != nil {
		t.Fatal(err)
	}
	if done.Status == decision.Decided {
		t.Fatalf("a cancelled run was decided")
	}
	var r *gateway.ToolResultEnvelope
	for _, x := range done.ToolResults {
		if x.CapabilityID == "adp_coder.run" {
			r = x
		}
	}
	if r == nil || r.Status != gateway.StatusFailed || r.Error == nil || r.Error.Code != gateway.CodeCanceled {
		t.Fatalf("agent result %+v", r)
	}
	if n := len(be.Requests()); n != 1 {
		t.Errorf("the agent ran %d times, want 1", n)
	}
}

// spendScript ends with exit code code after reporting what the run spent.
func spendScript(code int, data string) script {
	return func(ctx context.Context, p *agent.Prepared, out *agent.Emitter) (agent.Completion, error) {
		out.Emit(agent.Event{Kind: agent.EventError, Channel: "error", Message: "tests failed"})
		return agent.Completion{Status: agent.ExitStatus{Code: code}, FinalText: "done", Data: json.RawMessage(data)}, nil
	}
}

// What an agent run spent is charged to the run's budget, whether the run
// succeeded or failed: its cost and its input and output tokens reach the
// call's metadata, the meter and the record, and the replay charges them
// again as the run did.
func TestGovernedAgentSpendIsCharged(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const spent = `{"usage":{"input_tokens":2400,"output_tokens":84,"cached_input_tokens":2000},"cost_usd":0.25}`
	// baseline is a run whose agent reports no spend.
	baseline := func(t *testing.T, code int) decision.BudgetUsage {
		ad := agent.NewAdapter(newTestBackend("coder", spendScript(code, `{}`)), &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}})
		h := newHarness(t, contextostest.NewPlanner(fixPlan(map[string]any{"prompt": fixPrompt})), ad.Registration())
		req, rc := coderRequest(t)
		return h.Approve(h.Invoke(req, rc), techLead).Record.BudgetUsage
	}
	for _, tc := range []struct {
		name   string
		code   int
		status gateway.Status
	}{
		{"succeeded", 0, gateway.StatusCompleted},
		{"non-zero exit", 3, gateway.StatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := baseline(t, tc.code)
			ad := agent.NewAdapter(newTestBackend("coder", spendScript(tc.code, spent)), &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}})
			h := newHarness(t, contextostest.NewPlanner(fixPlan(map[string]any{"prompt": fixPrompt})), ad.Registration())
			req, rc := coderRequest(t)
			done := h.Approve(h.Invoke(req, rc), techLead)
			last := done.ToolResults[len(done.ToolResults)-1]
			if last.Status != tc.status || last.Metadata.Tokens != 2484 || last.Metadata.CostCents != 25 {
				t.Fatalf("result %s: tokens %d, cost %v cents (want %s, 2484, 25)", last.Status, last.Metadata.Tokens, last.Metadata.CostCents, tc.status)
			}
			got := done.Record.BudgetUsage
			if got.Tokens != base.Tokens+2484 || got.CostUSDCents != base.CostUSDCents+25 {
				t.Errorf("record budget %+v, want the baseline %+v plus 2484 tokens and 25 cents", got, base)
			}
			rep := h.Replay(done)
			contextostest.AssertReplayEqual(t, rep)
		})
	}
	t.Run("over the token budget", func(t *testing.T) {
		base := baseline(t, 0)
		const big = `{"usage":{"input_tokens":1000000,"output_tokens":1}}`
		ad := agent.NewAdapter(newTestBackend("coder", spendScript(0, big)), &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}})
		h := newHarness(t, contextostest.NewPlanner(fixPlan(map[string]any{"prompt": fixPrompt})), ad.Registration())
		req, rc := coderRequest(t)
		if base.Tokens+1000001 <= rc.RunBudget.TotalTokens {
			t.Fatalf("the agent's tokens fit the budget of %d", rc.RunBudget.TotalTokens)
		}
		done := h.Approve(h.Invoke(req, rc), techLead)
		contextostest.AssertStatus(t, done, decision.Escalated)
		if !strings.Contains(done.Record.Rationale.Summary, "tokens") {
			t.Errorf("rationale %q does not name the token budget", done.Record.Rationale.Summary)
		}
		if done.Record.BudgetUsage.Tokens != base.Tokens+1000001 {
			t.Errorf("record tokens %d, want %d", done.Record.BudgetUsage.Tokens, base.Tokens+1000001)
		}
		contextostest.AssertReplayEqual(t, h.Replay(done))
	})
}

// bigAnswerScript succeeds with a final text too large for a small
// max_payload_bytes after reporting what the run spent.
func bigAnswerScript(data string) script {
	return func(ctx context.Context, p *agent.Prepared, out *agent.Emitter) (agent.Completion, error) {
		return agent.Completion{Status: agent.ExitStatus{Code: 0}, FinalText: strings.Repeat("x", 8000), Data: json.RawMessage(data)}, nil
	}
}

// An agent run whose result the gateway refuses for its size still ran:
// what it spent is charged, and spending past the token budget stops the
// run ESCALATED on that budget.
func TestOversizeAgentResultIsCharged(t *testing.T) {
	t.Run("charged", func(t *testing.T) {
		ad := agent.NewAdapter(newTestBackend("coder", bigAnswerScript(`{"usage":{"input_tokens":2400,"output_tokens":84},"cost_usd":0.25}`)), &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}})
		h := newHarness(t, contextostest.NewPlanner(fixPlan(map[string]any{"prompt": fixPrompt})), ad.Registration())
		req, rc := coderRequest(t)
		rc.RunBudget.MaxPayloadBytes = 4096
		done := h.Approve(h.Invoke(req, rc), techLead)
		last := done.ToolResults[len(done.ToolResults)-1]
		if last.Error == nil || last.Metadata.Tokens != 2484 || last.Metadata.CostCents != 25 {
			t.Errorf("result %s %+v: %d tokens, %v cents charged; want a refusal charged 2484 tokens and 25 cents", last.Status, last.Error, last.Metadata.Tokens, last.Metadata.CostCents)
		}
		contextostest.AssertReplayEqual(t, h.Replay(done))
	})
	t.Run("over the token budget", func(t *testing.T) {
		ad := agent.NewAdapter(newTestBackend("coder", bigAnswerScript(`{"usage":{"input_tokens":1000000,"output_tokens":1}}`)), &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}})
		again := fixPlan(nil)
		again.Steps = nil
		h := newHarness(t, contextostest.NewPlanner(fixPlan(map[string]any{"prompt": fixPrompt}), again, again, again, again), ad.Registration())
		req, rc := coderRequest(t)
		rc.RunBudget.MaxPayloadBytes = 4096
		done := h.Approve(h.Invoke(req, rc), techLead)
		contextostest.AssertStatus(t, done, decision.Escalated)
		if s := done.Record.Rationale.Summary; !strings.Contains(s, "budget_exceeded") || !strings.Contains(s, "tokens") {
			t.Errorf("the agent spent 1000001 tokens past the budget; the run stopped for %q", s)
		}
		if done.Record.BudgetUsage.Tokens < 1000001 {
			t.Errorf("record tokens %d, want the agent's 1000001 included", done.Record.BudgetUsage.Tokens)
		}
		contextostest.AssertReplayEqual(t, h.Replay(done))
	})
}

// Hostile token counts and cost saturate instead of wrapping: the run
// stops on its token budget, its packet is valid against replay-packet.v1
// and it replays equal, whether the agent succeeded or failed.
func TestAgentMaximalSpend(t *testing.T) {
	t.Parallel()
	const spent = `{"usage":{"input_tokens":9223372036854775807,"output_tokens":9223372036854775807},"cost_usd":1e308}`
	for _, code := range []int{0, 3} {
		t.Run(fmt.Sprintf("exit %d", code), func(t *testing.T) {
			t.Parallel()
			ad := agent.NewAdapter(newTestBackend("coder", spendScript(code, spent)), &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}})
			h := newHarness(t, contextostest.NewPlanner(fixPlan(map[string]any{"prompt": fixPrompt})), ad.Registration())
			req, rc := coderRequest(t)
			done := h.Approve(h.Invoke(req, rc), techLead)
			contextostest.AssertStatus(t, done, decision.Escalated)
			if done.Record.BudgetUsage.Tokens <= 0 {
				t.Errorf("record tokens %d: wrapped", done.Record.BudgetUsage.Tokens)
			}
			contextostest.AssertReplayEqual(t, h.Replay(done))
			p, err := h.Replays.Get(context.Background(), done.ReplayPacketID)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(p)
			if err := schemas.Validate("replay-packet.v1.schema.json", b); err != nil {
				t.Errorf("packet schema: %v", err)
			}
		})
	}
}
