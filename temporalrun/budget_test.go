package temporalrun_test

import (
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/decision"
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
