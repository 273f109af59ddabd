package temporalrun_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/temporalrun"
)

// The run's wall clock is workflow time: a tool whose retries wait an
// hour each (durable timers) takes a run with a thirty-minute wall-clock
// budget over it, and the run ends ESCALATED with its record in the
// host's store.
func TestWallClockOnWorkflowTime(t *testing.T) {
	dir := t.TempDir()
	w := newWorld(t, dir, 0)
	w.lookupBackoff = time.Hour
	env := skipEnv(t, w)
	in := input(t, "budget", 4200, start)
	in.Run.RunBudget.WallClockMS = 30 * 60 * 1000
	env.ExecuteWorkflow(temporalrun.WorkflowName, in)
	out := result(t, env)
	if out.Status != decision.Escalated {
		t.Fatalf("run = %s %s (%s), want ESCALATED", out.Status, out.Record.Outcome, out.Record.Rationale.Summary)
	}
	if !strings.Contains(out.Record.Rationale.Summary, "wall_clock") {
		t.Errorf("rationale = %q, want the wall-clock budget", out.Record.Rationale.Summary)
	}
	if got := env.Now().Sub(start); got < time.Hour {
		t.Errorf("workflow time passed = %v, want the retries' hour", got)
	}
	recs, err := w.decisions.List(t.Context(), decision.Filter{RunID: out.RunID, Status: decision.Escalated})
	if err != nil || len(recs) != 1 {
		t.Fatalf("host's ESCALATED records = %d, %v", len(recs), err)
	}
	assertReplayEqual(t, w, out)
}

// A retried lookup whose first attempt spent something: the run saves
// that spend before the retry (in workflow code, in the run's own
// checkpoint store), and its record counts it once, with the planner's
// turns (900 and 700 tokens, 0.4 and 0.3 cents); the run replays equal.
func TestRetriedAttemptSpendOnWorkflow(t *testing.T) {
	dir := t.TempDir()
	w := newWorld(t, dir, 0)
	w.lookupSpent = &gateway.Outcome{Tokens: 1000, CostCents: 2}
	env := skipEnv(t, w)
	env.ExecuteWorkflow(temporalrun.WorkflowName, input(t, "retried", 1200, start))
	out := result(t, env)
	if out.Status != decision.Decided {
		t.Fatalf("run = %s (%s), want DECIDED", out.Status, out.Record.Rationale.Summary)
	}
	if u := out.Record.BudgetUsage; u.Tokens != 900+1000+700 || math.Abs(u.CostUSDCents-(0.4+2+0.3)) > 1e-9 {
		t.Errorf("the record counts %d tokens and %v cents, want 2600 and 2.7", u.Tokens, u.CostUSDCents)
	}
	assertReplayEqual(t, w, out)
}
