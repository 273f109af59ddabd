package contextos_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// A planner's own replan reason (Plan.Replan) is the next turn's
// ReplanReason, prefixed "planner_replan: ", and counts as a replan: a
// planner that only ever asks to be replanned ends ESCALATED with its
// reason in the record; the reason is kept bounded and valid UTF-8.
func TestPlannerReplanReason(t *testing.T) {
	t.Run("next turn sees it", func(t *testing.T) {
		p := contextostest.NewPlanner(&contextos.Plan{Replan: "no_tool_call: the model answered in text", Usage: contextos.PlanUsage{Tokens: 10}}, deniedPlan())
		h := harness(t, p, nil)
		req, rc := refundRequest(t, 1200, false)
		res := h.Invoke(req, rc)
		contextostest.AssertStatus(t, res, decision.Decided)
		reqs := p.Requests()
		if len(reqs) != 2 || reqs[1].ReplanReason != "planner_replan: no_tool_call: the model answered in text" {
			t.Fatalf("requests %d, second reason %q", len(reqs), reqs[len(reqs)-1].ReplanReason)
		}
	})
	t.Run("exhausted escalates", func(t *testing.T) {
		long := strings.Repeat("é", contextos.MaxReplanBytes) // 2 bytes each: over the bound
		var asked atomic.Int32
		p := contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
			asked.Add(1)
			return &contextos.Plan{Replan: "x" + long}, nil
		})
		h := harness(t, p, nil)
		req, rc := refundRequest(t, 1200, false)
		res := h.Invoke(req, rc)
		contextostest.AssertStatus(t, res, decision.Escalated)
		if int(asked.Load()) != rc.RunBudget.MaxReplanAttempts+1 {
			t.Errorf("asked %d times, max_replan_attempts %d", asked.Load(), rc.RunBudget.MaxReplanAttempts)
		}
		sum := res.Record.Rationale.Summary
		if !strings.Contains(sum, "replans exhausted") || !strings.Contains(sum, "planner_replan: xé") {
			t.Errorf("summary %q", sum)
		}
		if !utf8.ValidString(sum) || strings.Count(sum, "é") > contextos.MaxReplanBytes/2 {
			t.Errorf("the reason was not bounded to valid UTF-8: %d bytes", len(sum))
		}
	})
	t.Run("with steps is invalid", func(t *testing.T) {
		bad := lookupPlan()
		bad.Replan = "and also replan"
		h := harness(t, contextostest.NewPlanner(bad), nil)
		req, rc := refundRequest(t, 1200, false)
		res := h.Invoke(req, rc)
		if res.Status == decision.Decided {
			t.Fatalf("status %s", res.Status)
		}
		if !strings.Contains(res.Record.Rationale.Summary, "invalid_plan") {
			t.Errorf("summary %q", res.Record.Rationale.Summary)
		}
		if n := len(h.Adapter("adp_orders").Calls()); n != 0 {
			t.Errorf("the invalid plan's steps ran %d times", n)
		}
	})
}

// The usage breakdown is charged: a planner reporting only input and
// output tokens is charged their sum; Tokens larger than the sum is
// charged as is; bad counts make the turn a planner failure.
func TestPlannerUsageBreakdown(t *testing.T) {
	tests := []struct {
		name   string
		usage  contextos.PlanUsage
		tokens int
		bad    bool
	}{
		{"breakdown only", contextos.PlanUsage{InputTokens: 300, OutputTokens: 45, CachedInputTokens: 200}, 345, false},
		{"tokens larger", contextos.PlanUsage{Tokens: 500, InputTokens: 300, OutputTokens: 45}, 500, false},
		{"tokens smaller", contextos.PlanUsage{Tokens: 10, InputTokens: 300, OutputTokens: 45}, 345, false},
		{"cached over input", contextos.PlanUsage{InputTokens: 10, CachedInputTokens: 11}, 0, true},
		{"negative output", contextos.PlanUsage{InputTokens: 10, OutputTokens: -1}, 0, true},
		{"negative cached", contextos.PlanUsage{CachedInputTokens: -1}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := deniedPlan()
			plan.Usage = tc.usage
			h := harness(t, contextostest.NewPlanner(plan), nil)
			req, rc := refundRequest(t, 1200, false)
			res := h.Invoke(req, rc)
			if tc.bad {
				if res.Status == decision.Decided || !strings.Contains(res.Record.Rationale.Summary, "invalid_usage") {
					t.Fatalf("status %s, summary %q", res.Status, res.Record.Rationale.Summary)
				}
				return
			}
			contextostest.AssertStatus(t, res, decision.Decided)
			if got := res.Record.BudgetUsage.Tokens; got != tc.tokens {
				t.Errorf("charged %d tokens, want %d", got, tc.tokens)
			}
		})
	}
}

// A breakdown past the token budget stops the run: the sum is what is
// charged, not the (zero) Tokens.
func TestPlannerUsageBreakdownOverBudget(t *testing.T) {
	plan := deniedPlan()
	plan.Usage = contextos.PlanUsage{InputTokens: 1 << 20, OutputTokens: 1}
	h := harness(t, contextostest.NewPlanner(plan), nil)
	req, rc := refundRequest(t, 1200, false)
	res := h.Invoke(req, rc)
	if res.Status == decision.Decided || !strings.Contains(res.Record.Rationale.Summary, "budget_exceeded") {
		t.Fatalf("status %s, summary %q", res.Status, res.Record.Rationale.Summary)
	}
}

// PlanRequest.Decisions lists the pack's decisions, sorted, with their
// effective refusal and escalation outcomes; the list is the caller's
// copy; a host-built request has none.
func TestPlanRequestDecisions(t *testing.T) {
	p := contextostest.NewPlanner(deniedPlan())
	h := harness(t, p, nil)
	req, rc := refundRequest(t, 1200, false)
	h.Invoke(req, rc)
	ds := p.Requests()[0].Decisions()
	got, _ := json.Marshal(ds)
	want := `[{"decision_key":"support.refund.execute","allowed_outcomes":["approved","denied","escalated"],"refusal_outcomes":["denied"],"escalation_outcomes":["escalated"],` +
		`"required_evidence":["identity_verified","order_lookup","policy_eval"]}]`
	if string(got) != want {
		t.Fatalf("decisions\n got %s\nwant %s", got, want)
	}
	ds[0].AllowedOutcomes[0] = "X"
	if again := p.Requests()[0].Decisions(); again[0].AllowedOutcomes[0] != "approved" {
		t.Error("a caller's change reached the runtime's decisions")
	}
	// The runtime's runs of the same pack share its list (made once):
	// the edit reaches no later run either.
	rc.RunID += "_again"
	h.Invoke(req, rc)
	if later := p.Requests()[len(p.Requests())-1].Decisions(); len(later) != 1 || later[0].AllowedOutcomes[0] != "approved" {
		t.Errorf("a later run's decisions: %+v", later)
	}
	if (&contextos.PlanRequest{}).Decisions() != nil || (*contextos.PlanRequest)(nil).Decisions() != nil {
		t.Error("a host-built request lists decisions")
	}
}

// A planner's deltas are plan_delta events of a Stream, in order, before
// its turn's plan event; under Invoke, Emit is a no-op and Streaming is
// false.
func TestPlanDeltaEvents(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var streaming []bool
	p := contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
		streaming = append(streaming, req.Streaming())
		if req.Turn == 0 && len(streaming) == 1 {
			req.Emit(contextos.PlanDelta{Text: "Looking up."})
			return lookupPlan(), nil
		}
		req.Emit(contextos.PlanDelta{Text: "Refusing: "})
		req.Emit(contextos.PlanDelta{Text: "not verified."})
		req.Emit(contextos.PlanDelta{ToolIndex: 0, ToolName: "propose_decision", ToolArgs: `{"decision_key":`})
		return deniedPlan(), nil
	})
	h := harness(t, p, nil)
	req, rc := refundRequest(t, 1200, false)
	var kinds []contextos.EventKind
	var deltas []contextos.PlanDelta
	deltaTurn := -1
	for e, err := range h.Runtime.Stream(context.Background(), req, rc) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == contextos.EventPlanDelta {
			if e.RunID != rc.RunID {
				t.Errorf("delta run id %q", e.RunID)
			}
			deltaTurn = e.Turn
			if e.Delta.Text == "Looking up." {
				continue
			}
			deltas = append(deltas, *e.Delta)
		}
		if e.Kind == contextos.EventPlan && e.Turn != deltaTurn {
			t.Errorf("a plan event of turn %d follows deltas of turn %d", e.Turn, deltaTurn)
		}
		if deltaTurn == 1 {
			kinds = append(kinds, e.Kind)
		}
	}
	want := []contextos.EventKind{contextos.EventPlanDelta, contextos.EventPlanDelta, contextos.EventPlanDelta, contextos.EventPlan}
	if len(kinds) < len(want) {
		t.Fatalf("turn 1 events %v", kinds)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("turn 1 events %v, want them to start %v", kinds, want)
		}
	}
	if len(deltas) != 3 || deltas[0].Text != "Refusing: " || deltas[1].Text != "not verified." || deltas[2].ToolName != "propose_decision" {
		t.Errorf("deltas %+v", deltas)
	}
	req, rc = refundRequest(t, 1200, false)
	rc.RunID = "run_b1b2c3d4e5f60719"
	contextostest.AssertStatus(t, h.Invoke(req, rc), decision.Decided)
	if len(streaming) != 3 || !streaming[0] || !streaming[1] || streaming[2] {
		t.Errorf("Streaming() %v, want [true true false]", streaming)
	}
}

// A planner that goes on emitting after its turn is over (its deadline
// passed) is never blocked: its deltas are dropped, no event follows the
// turn's end, and nothing leaks.
func TestPlanDeltaAfterTurnDropped(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	finished := make(chan int, 1)
	p := contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
		req.Emit(contextos.PlanDelta{Text: "thinking"})
		<-ctx.Done()
		for range 100 {
			req.Emit(contextos.PlanDelta{Text: "late"}) // returns at once
		}
		finished <- 100
		return nil, ctx.Err()
	})
	h := harness(t, p, nil)
	req, rc := refundRequest(t, 1200, false)
	rc.RunBudget.PlanTimeoutMS = 50
	var late int
	var status decision.Status
	for e, err := range h.Runtime.Stream(context.Background(), req, rc) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == contextos.EventPlanDelta && e.Delta.Text == "late" {
			late++
		}
		if e.Kind == contextos.EventResult {
			status = e.Final.Status
		}
	}
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("the planner's late Emit calls blocked")
	}
	if late != 0 {
		t.Errorf("%d late deltas were emitted after the turn", late)
	}
	if status == decision.Decided {
		t.Errorf("status %s", status)
	}
}

// A replan reason travels through checkpoints and replay packets: a run
// with a planner replan replays equal (the recorded plan carries it).
func TestPlannerReplanReplays(t *testing.T) {
	p := contextostest.NewPlanner(&contextos.Plan{Replan: "length_limit: cut off"}, deniedPlan())
	h := harness(t, p, nil) // the harness replays every run at cleanup
	req, rc := refundRequest(t, 1200, false)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	rep := h.Replay(res)
	contextostest.AssertReplayEqual(t, rep)
	pkt, err := h.Runtime.Packets().Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkt.PlannerOutput) != 2 || !strings.Contains(string(pkt.PlannerOutput[0]), `"replan":"length_limit: cut off"`) {
		t.Errorf("planner outputs %s", pkt.PlannerOutput)
	}
}

// Counts at the top of what a record holds saturate instead of wrapping to
// a small charge: the run stops over its token budget, charged 2^53−1.
// Counts beyond it are no usage at all: the turn fails with invalid_usage,
// charging nothing.
func TestPlannerUsageSaturates(t *testing.T) {
	for _, tc := range []struct {
		u       contextos.PlanUsage
		reason  string
		charged int
	}{
		{contextos.PlanUsage{InputTokens: 1<<53 - 1, OutputTokens: 1<<53 - 1}, "budget_exceeded", 1<<53 - 1},
		{contextos.PlanUsage{InputTokens: 1<<53 - 2, OutputTokens: 2, CachedInputTokens: 5}, "budget_exceeded", 1<<53 - 1},
		{contextos.PlanUsage{InputTokens: math.MaxInt, OutputTokens: math.MaxInt}, "invalid_usage", 0},
		{contextos.PlanUsage{InputTokens: math.MaxInt - 1, OutputTokens: 2, CachedInputTokens: 5}, "invalid_usage", 0},
	} {
		plan := deniedPlan()
		plan.Usage = tc.u
		h := harness(t, contextostest.NewPlanner(plan), nil)
		req, rc := refundRequest(t, 1200, false)
		res := h.Invoke(req, rc)
		if res.Status == decision.Decided || !strings.Contains(res.Record.Rationale.Summary, tc.reason) || res.Record.BudgetUsage.Tokens != tc.charged {
			t.Errorf("usage %+v: status %s, charged %d tokens, summary %q; want %s and %d tokens", tc.u, res.Status, res.Record.BudgetUsage.Tokens, res.Record.Rationale.Summary, tc.reason, tc.charged)
		}
	}
}

// A decision's confidence outside 0 to 1 is an invalid plan: it never
// reaches a record as a confidence.
func TestPlannerConfidenceRange(t *testing.T) {
	for _, c := range []float64{7, -0.5} {
		plan := deniedPlan()
		plan.Decision.Confidence = c
		h := harness(t, contextostest.NewPlanner(plan), nil)
		req, rc := refundRequest(t, 1200, false)
		res := h.Invoke(req, rc)
		if res.Status == decision.Decided || !strings.Contains(res.Record.Rationale.Summary, "invalid_plan") || res.Record.Confidence == c {
			t.Errorf("confidence %v: status %s, record confidence %v, summary %q", c, res.Status, res.Record.Confidence, res.Record.Rationale.Summary)
		}
	}
}
