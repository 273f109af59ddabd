package contextos_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/replay"
)

// A run stopped because a tool call took it over its token (or cost)
// budget is still over it when resumed without a larger budget: the
// resume runs no further tool call of the plan in progress, and the run
// replays equal.
func TestResumeOverBudgetRunsNoCall(t *testing.T) {
	for _, dim := range []string{"tokens", "cost_cents"} {
		t.Run(dim, func(t *testing.T) {
			h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
			scriptDefaults(h, "adp_orders")
			t.Cleanup(func() { h.ReplayAll() })
			out := &gateway.Outcome{Output: map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}}
			if dim == "tokens" {
				out.Tokens = 50000 // the run's total_tokens is 12000
			} else {
				out.CostCents = 100 // the run's max_cost_cents is 25
			}
			h.Adapter("adp_orders").On("lookup").Return(out)
			req, rc := refundRequest(t, 1200, true)
			res := h.Invoke(req, rc)
			contextostest.AssertStatus(t, res, decision.Escalated)
			if s := res.Record.Rationale.Summary; !strings.Contains(s, "budget_exceeded") || !strings.Contains(s, dim) {
				t.Fatalf("rationale %q, want the %s budget named", s, dim)
			}
			contextostest.AssertCalls(t, h.Adapter("adp_policy"), "eval", 0)
			again, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{})
			if err != nil {
				t.Fatal(err)
			}
			if again.Status == decision.Decided {
				t.Errorf("a run over its %s budget was resumed to DECIDED", dim)
			}
			contextostest.AssertCalls(t, h.Adapter("adp_policy"), "eval", 0)
		})
	}
}

// spendingFailure fails every call after spending cost and tokens, and
// returns beside its error an outcome full of a secret.
type spendingFailure struct {
	secret string
	cost   float64
	tokens int
}

func (a spendingFailure) Call(context.Context, *gateway.Call) (*gateway.Outcome, error) {
	s := a.secret
	return &gateway.Outcome{Output: map[string]any{"card": s}, Mutations: []string{s}, Signals: []string{s}, Artifacts: []string{s}, RiskTags: []string{s},
		Citations: []gateway.Citation{{EvidenceRef: s}}, CostCents: a.cost, Tokens: a.tokens}, gateway.NewToolError(gateway.CodeExecutionFailed, false, "exit 3", nil)
}

// spendingHarness is the refund harness whose order lookup is ad.
func spendingHarness(t *testing.T, ad gateway.Adapter) *contextostest.Harness {
	t.Helper()
	policy, payments := gatewaytest.NewScriptedAdapter(), gatewaytest.NewScriptedAdapter()
	policy.On("eval").ReturnOutput(map[string]any{"eligible": true})
	payments.On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
	regs := []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: ad, Capabilities: map[string]gateway.Capability{"lookup": {HonorsContext: true}}},
		{AdapterID: "adp_policy", Adapter: policy, Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: payments, Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
	}
	return bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Adapters: regs}})
}

// Of an outcome returned beside an error only what it spent is kept:
// nothing else of it reaches the result, the transcript, the record, the
// checkpoint or the packet, which keeps the spend beside the error so the
// replay charges it again.
func TestFailedAttemptKeepsOnlyItsSpend(t *testing.T) {
	const secret = "SECRET_sk_live_zz9"
	h := spendingHarness(t, spendingFailure{secret: secret, cost: 1, tokens: 10})
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	ctx := context.Background()
	p, err := h.Replays.Get(ctx, res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := h.Checkpoints.Load(ctx, res.RunID)
	recs, _ := h.Decisions.List(ctx, decision.Filter{})
	for name, v := range map[string]any{"result": res, "transcript": h.Transcript.Entries(), "packet": p, "checkpoint": cp, "records": recs} {
		if b, _ := json.Marshal(v); strings.Contains(string(b), secret) {
			t.Errorf("the %s holds what the failed attempt returned", name)
		}
	}
	if pb, _ := json.Marshal(p.Outcomes); !strings.Contains(string(pb), `"outcome":{"cost_cents":1,"tokens":10}`) {
		t.Errorf("the packet does not keep the failed attempt's spend: %s", pb)
	}
	rep, err := h.Runtime.Replay(ctx, p)
	if err != nil || rep.Status != replay.ReplayEqual {
		t.Errorf("replay %v %+v", err, rep)
	}
}

// A failed attempt's spend that stops the run survives the checkpoint and
// a resume with a larger budget, and the whole run replays equal.
func TestFailedAttemptSpendSurvivesResume(t *testing.T) {
	h := spendingHarness(t, spendingFailure{cost: 1, tokens: 50000})
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Escalated)
	first := res.Record.BudgetUsage.Tokens
	if first < 50000 {
		t.Fatalf("first record tokens %d, want the failed attempt's 50000 included", first)
	}
	budget := rc.RunBudget
	budget.TotalTokens = 100000
	done, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{Budget: &budget})
	if err != nil {
		t.Fatal(err)
	}
	if done.Record.BudgetUsage.Tokens < first {
		t.Errorf("the failed attempt's tokens were lost across the resume: %d after %d", done.Record.BudgetUsage.Tokens, first)
	}
	if n := h.ReplayAll(); n == 0 {
		t.Error("no packet was replayed")
	}
}

// TestResumeOverBudgetStaysStopped: whichever turn or step took a run over
// its token or cost budget — the planner's turn, a plan's first step, or
// the last step of the plan that decides — a resume without a larger
// budget asks the planner nothing, calls no tool and ends ESCALATED again
// with the same usage (never DECIDED); a resume with a larger budget then
// finishes the run, the refund issued once; every run replays equal.
func TestResumeOverBudgetStaysStopped(t *testing.T) {
	for _, where := range []string{"planner turn", "first step", "last step"} {
		for _, dim := range []string{"tokens", "cost_cents"} {
			t.Run(where+"/"+dim, func(t *testing.T) {
				big := contextos.PlanUsage{Tokens: 50000} // total_tokens is 12000
				if dim == "cost_cents" {
					big = contextos.PlanUsage{CostCents: 100} // max_cost_cents is 25
				}
				plans := []*contextos.Plan{lookupPlan(), refundPlan(1200)}
				if where == "planner turn" {
					// The turn's plan is not verified: the resume that
					// may spend more plans again.
					spent := lookupPlan()
					spent.Usage = big
					plans = append([]*contextos.Plan{spent}, plans...)
				}
				p := contextostest.NewPlanner(plans...).RepeatLast()
				h := bareHarness(t, p, nil)
				scriptDefaults(h, map[string]string{"first step": "adp_orders", "last step": "adp_payments"}[where])
				t.Cleanup(func() { h.ReplayAll() })
				out := &gateway.Outcome{Tokens: big.Tokens, CostCents: big.CostCents}
				switch where {
				case "first step":
					out.Output = map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}
					h.Adapter("adp_orders").On("lookup").Return(out)
				case "last step":
					out.Output, out.Mutations = map[string]any{"transaction_id": "txn_q9"}, []string{"refund:txn_q9"}
					h.Adapter("adp_payments").On("issue_refund").Return(out)
				}
				req, rc := refundRequest(t, 1200, true)
				res := h.Invoke(req, rc)
				contextostest.AssertStatus(t, res, decision.Escalated)
				if s := res.Record.Rationale.Summary; !strings.Contains(s, "budget_exceeded") || !strings.Contains(s, dim) {
					t.Fatalf("rationale %q, want the %s budget named", s, dim)
				}
				turns := len(p.Requests())
				calls := func() [3]int {
					return [3]int{h.Adapter("adp_orders").CallCount("lookup"), h.Adapter("adp_policy").CallCount("eval"), h.Adapter("adp_payments").CallCount("issue_refund")}
				}
				before, usage := calls(), res.Record.BudgetUsage
				for range 2 {
					again, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{})
					if err != nil {
						t.Fatal(err)
					}
					contextostest.AssertStatus(t, again, decision.Escalated)
					if s := again.Record.Rationale.Summary; !strings.Contains(s, "budget_exceeded") {
						t.Errorf("resumed rationale %q, want budget_exceeded", s)
					}
					if n := len(p.Requests()); n != turns {
						t.Errorf("the planner was asked %d more times on a resume over the budget", n-turns)
					}
					if got := calls(); got != before {
						t.Errorf("tool calls %v after the resume, %v before", got, before)
					}
					if got := again.Record.BudgetUsage; got.Tokens != usage.Tokens || got.CostUSDCents != usage.CostUSDCents {
						t.Errorf("usage %+v after the resume, %+v before", got, usage)
					}
				}
				budget := rc.RunBudget
				budget.TotalTokens, budget.MaxCostCents = 100000, 1000
				done, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{Budget: &budget})
				if err != nil {
					t.Fatal(err)
				}
				contextostest.AssertStatus(t, done, decision.Decided)
				contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
			})
		}
	}
}
