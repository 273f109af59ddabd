package contextos_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// A turn that fails after the model answered is charged the usage the
// planner reports with its error, once, and replays equal (the harness
// replays every run); a turn of unknown usage fails closed.
func TestFailedTurnUsageCharged(t *testing.T) {
	u := contextos.PlanUsage{InputTokens: 1500, OutputTokens: 90, CachedInputTokens: 1000, CostCents: 0.75}
	bad := refundPlan(1200)
	bad.Decision.Confidence = 1.5
	bad.Usage = u
	tests := []struct {
		name       string
		answer     func() (*contextos.Plan, error)
		wantTokens int
		wantCents  float64
		wantReason string
	}{
		{"usage error", func() (*contextos.Plan, error) {
			return nil, &contextos.PlanUsageError{Usage: u, Err: errors.New("the reply did not parse")}
		}, 1590, 0.75, "planner_failed: the planner returned an error"},
		{"wrapped usage error", func() (*contextos.Plan, error) {
			return nil, fmt.Errorf("provider: %w", &contextos.PlanUsageError{Usage: u, Err: errors.New("stream broke")})
		}, 1590, 0.75, "planner_failed"},
		{"invalid plan", func() (*contextos.Plan, error) { return bad, nil }, 1590, 0.75, "invalid_plan: the decision's confidence"},
		{"usage error with invalid usage", func() (*contextos.Plan, error) {
			return nil, &contextos.PlanUsageError{Usage: contextos.PlanUsage{InputTokens: -3}, Err: errors.New("x")}
		}, 0, 0, "invalid_usage"},
		{"usage unknown", func() (*contextos.Plan, error) {
			return nil, fmt.Errorf("openai: %w", contextos.ErrUsageUnknown)
		}, 0, 0, "planner_failed: usage_unknown"},
		{"plain error", func() (*contextos.Plan, error) { return nil, errors.New("boom") }, 0, 0, "planner_failed: the planner returned an error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) { return tc.answer() })
			h := harness(t, p, nil)
			req, rc := refundRequest(t, 1200, true)
			res := h.Invoke(req, rc)
			contextostest.AssertStatus(t, res, decision.Escalated)
			if !strings.Contains(res.Record.Rationale.Summary, tc.wantReason) {
				t.Errorf("rationale %q, want %q", res.Record.Rationale.Summary, tc.wantReason)
			}
			if b := res.Record.BudgetUsage; b.Tokens != tc.wantTokens || math.Abs(b.CostUSDCents-tc.wantCents) > 1e-9 {
				t.Errorf("charged %d tokens and %v cents, want %d and %v", b.Tokens, b.CostUSDCents, tc.wantTokens, tc.wantCents)
			}
			if len(h.Transcript.Results()) != 0 {
				t.Errorf("a failed turn ran %d tool calls", len(h.Transcript.Results()))
			}
		})
	}
}

// A failed turn's usage that exceeds the budget is charged in full (the
// record shows the overrun) and named in the stop reason.
func TestFailedTurnUsageOverBudget(t *testing.T) {
	p := contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) {
		return nil, &contextos.PlanUsageError{Usage: contextos.PlanUsage{Tokens: 1 << 20, CostCents: 2}, Err: errors.New("cut")}
	})
	h := harness(t, p, nil)
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Escalated)
	if s := res.Record.Rationale.Summary; !strings.Contains(s, "planner_failed") || !strings.Contains(s, "budget_exceeded") {
		t.Errorf("rationale %q, want the planner failure and the exceeded budget", s)
	}
	if res.Record.BudgetUsage.Tokens != 1<<20 {
		t.Errorf("charged %d tokens, want %d (all of it)", res.Record.BudgetUsage.Tokens, 1<<20)
	}
}

// A plan that arrives after plan_timeout_ms is not used, but its usage is
// charged when it comes within LateTurnGrace; one that comes later is
// not, and the stop reason says its usage is unknown. The bubble's
// virtual time makes the waits exact.
func TestLateTurnUsage(t *testing.T) {
	const planTimeout = 20 * time.Millisecond
	tests := []struct {
		name        string
		late        time.Duration // after the plan timeout
		err         bool          // answer with a PlanUsageError wrapping ctx's error
		wantTokens  int
		wantElapsed time.Duration
		wantUnknown bool
	}{
		{"plan within the grace", 10 * time.Millisecond, false, 700, planTimeout + 10*time.Millisecond, false},
		{"usage error within the grace", contextos.LateTurnGrace - time.Millisecond, true, 700, planTimeout + contextos.LateTurnGrace - time.Millisecond, false},
		{"plan after the grace", contextos.LateTurnGrace + time.Millisecond, false, 0, planTimeout + contextos.LateTurnGrace, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				slow := contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
					time.Sleep(planTimeout + tc.late) // ignores ctx
					if tc.err {
						return nil, &contextos.PlanUsageError{Usage: contextos.PlanUsage{Tokens: 700}, Err: ctx.Err()}
					}
					return refundPlan(1200), nil
				})
				h := harness(t, slow, nil)
				req, rc := refundRequest(t, 1200, true)
				rc.RunBudget.PlanTimeoutMS = planTimeout.Milliseconds()
				start := time.Now()
				res := h.Invoke(req, rc)
				if elapsed := time.Since(start); elapsed != tc.wantElapsed {
					t.Errorf("the run waited %v, want %v", elapsed, tc.wantElapsed)
				}
				contextostest.AssertStatus(t, res, decision.Escalated)
				s := res.Record.Rationale.Summary
				if !strings.Contains(s, "plan_timeout") || strings.Contains(s, "usage is unknown") != tc.wantUnknown {
					t.Errorf("rationale %q (want usage unknown named: %v)", s, tc.wantUnknown)
				}
				if res.Record.BudgetUsage.Tokens != tc.wantTokens {
					t.Errorf("charged %d tokens, want %d", res.Record.BudgetUsage.Tokens, tc.wantTokens)
				}
				if len(h.Transcript.Results()) != 0 {
					t.Errorf("the late plan ran %d tool calls", len(h.Transcript.Results()))
				}
				time.Sleep(time.Second) // the abandoned planner returns
			})
		})
	}
}

// turnKind is what a generated planner turn does.
type turnKind int

const (
	turnReplan    turnKind = iota // a plan asking to be replanned, with usage
	turnUsageErr                  // a PlanUsageError
	turnInvalid                   // an invalid plan, with usage
	turnUnknown                   // ErrUsageUnknown, no usage
	turnLate                      // a plan after plan_timeout, within the grace
	turnAbandoned                 // a plan after the grace: not reported in time
	turnPlainErr                  // an error without usage
	numTurnKinds
)

// usagePlanner answers the turns of a generated script and sums the usage
// it reported in time (what the run must have been charged).
type usagePlanner struct {
	mu       sync.Mutex
	kinds    []turnKind
	usages   []contextos.PlanUsage
	next     int
	reported contextos.PlanUsage // tokens as charged, and cost
}

const usagePlanTimeout = 30 * time.Millisecond

func (p *usagePlanner) Plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	p.mu.Lock()
	i := p.next
	p.next++
	p.mu.Unlock()
	if i >= len(p.kinds) {
		d := deniedPlan()
		d.Usage = contextos.PlanUsage{InputTokens: 300, OutputTokens: 20, CostCents: 0.05}
		p.count(d.Usage)
		return d, nil
	}
	u := p.usages[i]
	switch p.kinds[i] {
	case turnReplan:
		p.count(u)
		return &contextos.Plan{Replan: "length_limit: cut off", Usage: u}, nil
	case turnUsageErr:
		p.count(u)
		return nil, &contextos.PlanUsageError{Usage: u, Err: errors.New("the reply did not parse")}
	case turnInvalid:
		p.count(u)
		plan := deniedPlan()
		plan.Decision.Confidence = -1
		plan.Usage = u
		return plan, nil
	case turnUnknown:
		return nil, contextos.ErrUsageUnknown
	case turnLate, turnAbandoned:
		late := contextos.LateTurnGrace / 2
		if p.kinds[i] == turnAbandoned {
			late = contextos.LateTurnGrace * 2
		} else {
			p.count(u)
		}
		time.Sleep(usagePlanTimeout + late)
		return &contextos.Plan{Replan: "late", Usage: u}, nil
	default:
		return nil, errors.New("connection reset")
	}
}

func (p *usagePlanner) count(u contextos.PlanUsage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reported.Tokens += max(u.Tokens, u.InputTokens+u.OutputTokens)
	p.reported.CostCents += u.CostCents
}

// Over many generated runs of random turns (plans, failures after the
// model answered, invalid plans, unknown usage, late and abandoned
// answers), each failed turn resumed: the run is charged exactly the
// usage the planner reported in time — never less, never twice across
// resumes, never negative — and every packet replays equal.
func TestUsageChargedExactlyOnceProperty(t *testing.T) {
	runs := 40
	if testing.Short() {
		runs = 10
	}
	for seed := range runs {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(seed), 19))
				p := &usagePlanner{}
				for range 1 + rng.IntN(8) {
					p.kinds = append(p.kinds, turnKind(rng.IntN(int(numTurnKinds))))
					in := rng.IntN(3000)
					p.usages = append(p.usages, contextos.PlanUsage{InputTokens: in, CachedInputTokens: rng.IntN(in + 1),
						OutputTokens: rng.IntN(400), Tokens: rng.IntN(2) * rng.IntN(4000), CostCents: float64(rng.IntN(500)) / 100})
				}
				h := harness(t, p, nil)
				req, rc := refundRequest(t, 1200, false)
				rc.RunBudget.PlanTimeoutMS = usagePlanTimeout.Milliseconds()
				rc.RunBudget.TotalTokens, rc.RunBudget.MaxCostCents, rc.RunBudget.MaxReplanAttempts = 1<<30, 1e6, 100
				ctx := context.Background()
				res := h.Invoke(req, rc)
				for range len(p.kinds) {
					cp, err := loadState(ctx, h.Checkpoints, res.RunID)
					if err != nil {
						t.Fatal(err)
					}
					if cp.Terminal || cp.Stopped == "" {
						break
					}
					if res, err = h.Runtime.Resume(ctx, res.RunID, contextos.ResumeInput{}); err != nil {
						t.Fatalf("resume after %q: %v", cp.Stopped, err)
					}
				}
				contextostest.AssertStatus(t, res, decision.Decided)
				b := res.Record.BudgetUsage
				if b.Tokens < 0 || b.CostUSDCents < 0 {
					t.Errorf("negative usage %+v", b)
				}
				if b.Tokens != p.reported.Tokens || math.Abs(b.CostUSDCents-p.reported.CostCents) > 1e-6 {
					t.Errorf("kinds %v: charged %d tokens and %v cents, the planner reported %d and %v",
						p.kinds, b.Tokens, b.CostUSDCents, p.reported.Tokens, p.reported.CostCents)
				}
				time.Sleep(time.Second) // abandoned planners return
			})
		})
	}
}
