package agent_test

// Regressions found by a hostile review of the governed side (Adapter,
// Planner): each failed before its fix.

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/agenttest"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/gateway"
)

func TestPlannerTokenCountsSaturate(t *testing.T) {
	be := newTestBackend("planner", func(ctx context.Context, p *agent.Prepared, out *agent.Emitter) (agent.Completion, error) {
		return agent.Completion{FinalText: abandonPlan,
			Data: json.RawMessage(`{"usage":{"input_tokens":9223372036854775807,"output_tokens":1}}`)}, nil
	})
	plan, err := agent.NewPlanner(be, nil).Plan(context.Background(), &contextos.PlanRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Usage.Tokens != math.MaxInt32 {
		t.Fatalf("planner reports %d tokens, want the saturated %d", plan.Usage.Tokens, math.MaxInt32)
	}
	if got := (agent.Usage{InputTokens: math.MaxInt64, OutputTokens: 1}).Tokens(); got != math.MaxInt64 {
		t.Fatalf("Tokens() = %d", got)
	}
}

func TestHugeCostIsChargedNotDropped(t *testing.T) {
	huge := func(ctx context.Context, p *agent.Prepared, out *agent.Emitter) (agent.Completion, error) {
		return agent.Completion{FinalText: abandonPlan, Data: json.RawMessage(`{"cost_usd":1e307}`)}, nil
	}
	o, err := callAdapter(context.Background(), agent.NewAdapter(newTestBackend("coder", huge), nil), map[string]any{"prompt": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if o.CostCents != math.MaxFloat64 {
		t.Fatalf("adapter: cost_usd 1e307 charged %v cents", o.CostCents)
	}
	plan, err := agent.NewPlanner(newTestBackend("planner", huge), nil).Plan(context.Background(), &contextos.PlanRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Usage.CostCents != math.MaxFloat64 {
		t.Fatalf("planner: cost_usd 1e307 charged %v cents", plan.Usage.CostCents)
	}
}

// Plan returns only after its agent's process ended, even when its
// context ends first (the plan timeout).
func TestPlannerWaitsForItsAgentAfterTheContextEnds(t *testing.T) {
	var exited atomic.Bool
	be := newTestBackend("planner", func(ctx context.Context, p *agent.Prepared, out *agent.Emitter) (agent.Completion, error) {
		out.Emit(agent.Event{Kind: agent.EventStatus, Message: "planning"})
		<-ctx.Done()
		time.Sleep(300 * time.Millisecond) // a CLI's own shutdown
		exited.Store(true)
		return agent.Completion{Status: agent.ExitStatus{Code: -1, Signal: "killed"}}, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := agent.NewPlanner(be, nil).Plan(ctx, &contextos.PlanRequest{}); err == nil {
		t.Fatal("a cancelled planning run returned a plan")
	}
	if !exited.Load() {
		t.Fatal("Plan returned while the planner agent was still running")
	}
}

// A pack that marks the agent read_only does not get an ungoverned agent
// run: the adapter refuses a call the gateway did not treat as a write.
func TestReadOnlyAgentToolIsRefused(t *testing.T) {
	pk := strings.Replace(string(coderPack), `"capabilities": ["run"], "approval_mode": "delegated"`, `"capabilities": ["run"], "approval_mode": "read_only"`, 1)
	pk = strings.Replace(pk, `"allow": true, "approval_mode": "delegated", "requires_approval_gate": "GATE_CODE_REVIEW",
        "arg_constraints": { "idempotency_key": { "required": true } } }`, `"allow": true }`, 1)
	if pk == string(coderPack) {
		t.Fatal("pack not changed")
	}
	be := newTestBackend("coder", codingScript("done"))
	ad := agent.NewAdapter(be, &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}})
	step := contextos.Step{CapabilityID: "adp_coder.run", Args: map[string]any{"prompt": fixPrompt}}
	pl := contextostest.NewPlanner(&contextos.Plan{Steps: []contextos.Step{step, step},
		Decision: &contextos.DecisionProposal{DecisionKey: "code.change.apply", Outcome: "applied", Rationale: "x"}})
	h := contextostest.New(t, pl, [][]byte{[]byte(pk)}, &contextostest.Options{Runtime: contextos.Options{Adapters: []gateway.Registration{ad.Registration()}, ReplaySampleRate: 1}})
	req, rc := coderRequest(t)
	res := h.Invoke(req, rc)
	if n := len(be.Requests()); n > 0 {
		t.Fatalf("the agent ran %d times as a read_only tool", n)
	}
	for _, r := range res.ToolResults {
		if r.CapabilityID == "adp_coder.run" && (r.Error == nil || r.Error.Code != gateway.CodePermissionDenied) {
			t.Fatalf("result %s %+v, want permission_denied", r.Status, r.Error)
		}
	}
}

func TestParsePlanKeepsIntegerArgs(t *testing.T) {
	p, why := agent.ParsePlan(`{"steps":[{"capability_id":"adp_payments.refund","args":{"order_id":9007199254740993}}]}`)
	if why != "" {
		t.Fatal(why)
	}
	b, _ := json.Marshal(p.Steps[0].Args)
	if string(b) != `{"order_id":9007199254740993}` {
		t.Fatalf("args %s, the agent proposed order_id 9007199254740993", b)
	}
}

// A proposed step cannot loosen what the host fixed: another working
// directory or a fixed extension with another value refuses the call, and
// the agent never runs; the same values pass.
func TestHostFixedOptionsCannotBeOverridden(t *testing.T) {
	t.Parallel()
	const sandbox = "backend.coder.exec.sandbox_mode"
	caps := agent.NewCapabilities(agent.CapFinalText, agent.CapNonInteractive, sandbox)
	host := t.TempDir()
	for _, tc := range []struct {
		name string
		args map[string]any
		runs int
	}{
		{"working_dir", map[string]any{"prompt": fixPrompt, "working_dir": "/"}, 0},
		{"sandbox", map[string]any{"prompt": fixPrompt, "extensions": map[string]any{sandbox: "danger-full-access"}}, 0},
		{"interactive", map[string]any{"prompt": fixPrompt, "extensions": map[string]any{agent.CapNonInteractive: false}}, 0},
		{"same_values", map[string]any{"prompt": fixPrompt, "working_dir": host + "/.", "extensions": map[string]any{sandbox: "read-only"}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			be := agenttest.New("coder", caps, agenttest.Script{Defaults: agent.Defaults{Keys: []string{sandbox}},
				Completion: agent.Completion{FinalText: "done"}})
			ad := agent.NewAdapter(be, &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}, WorkingDir: host,
				Extensions: map[string]json.RawMessage{agent.CapNonInteractive: json.RawMessage("true"), sandbox: json.RawMessage(`"read-only"`)}})
			o, err := callAdapter(context.Background(), ad, tc.args)
			if n := len(be.Requests()); n != tc.runs {
				t.Fatalf("%d runs, want %d (err %v)", n, tc.runs, err)
			}
			if tc.runs == 0 {
				var te *gateway.ToolError
				if o != nil || !errors.As(err, &te) || te.Code != gateway.CodeInvalidInput || te.Retryable {
					t.Fatalf("err %v, want a non-retryable invalid_input", err)
				}
				return
			}
			p := be.Requests()[0]
			if err != nil || string(p.Extensions[sandbox]) != `"read-only"` || !p.NonInteractive || p.WorkingDir != host {
				t.Fatalf("ran with %s %v %s, %v", p.Extensions[sandbox], p.NonInteractive, p.WorkingDir, err)
			}
		})
	}
}

func TestUsageOfReadsWholeFloats(t *testing.T) {
	u, ok := agent.UsageOf(agent.Completion{Data: json.RawMessage(`{"usage":{"input_tokens":2400.0,"output_tokens":1e2,"cached_input_tokens":1e30}}`)})
	if !ok || u.InputTokens != 2400 || u.OutputTokens != 100 || u.CachedInputTokens != math.MaxInt64 {
		t.Fatalf("whole-number token counts read as %+v ok=%v", u, ok)
	}
	if u, _ := agent.UsageOf(agent.Completion{Data: json.RawMessage(`{"usage":{"input_tokens":2.5}}`)}); u.InputTokens != 0 {
		t.Fatalf("2.5 tokens read as %d", u.InputTokens)
	}
}
