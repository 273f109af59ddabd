package contextos_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/internal/deepcheck"
)

// TestPlannerEditingThePlansItReturnedChangesNotTheRun: a planner hands
// the run its plan and may keep a reference to it. One that edits the
// plans it returned later (every member, at its next turn and after the
// run has returned), or a host critic that shares the planner's
// reference and raises the refund of the plan it has just verified
// (time of check, time of use), changes nothing the run executes,
// enforces or records: the tool calls made (the transcript, with their
// arguments), the run's status, decision record, pending approval,
// checkpoint and replay packet are those of a run whose planner edits
// nothing. (The harness replays every run at the end of the test: the
// replay is equal too.)
func TestPlannerEditingThePlansItReturnedChangesNotTheRun(t *testing.T) {
	t.Parallel()
	vandalize := func(plans []*contextos.Plan) {
		for _, p := range plans {
			deepcheck.Vandalize(reflect.ValueOf(p))
		}
	}
	// play runs a refund of amount: its planner plans the lookups and
	// then the refund, and keeps every plan it returned. With editTurns
	// it edits them all at every turn and after each run returns; with
	// criticRaises the host critic raises the refund of the plan the
	// planner returned last, at each verdict.
	play := func(t *testing.T, amount int, editTurns, criticRaises bool) playRecord {
		var kept []*contextos.Plan
		planner := contextos.PlannerFunc(func(_ context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
			if editTurns {
				vandalize(kept)
			}
			p := lookupPlan()
			if req.Turn > 0 {
				p = refundPlan(amount)
			}
			kept = append(kept, p)
			return p, nil
		})
		var opts contextostest.Options
		if criticRaises {
			opts.Runtime.Critic = editingCritic(func(*contextos.CriticInput) {
				for _, s := range kept[len(kept)-1].Steps {
					if _, ok := s.Args["amount_inr"]; ok {
						s.Args["amount_inr"] = 2999
					}
				}
			})
		}
		h := harness(t, planner, &opts)
		src := sourcesOf(h)
		var o playRecord
		for _, runID := range []string{"run_a1b2c3d4e5f60718", "run_a1b2c3d4e5f60719"} {
			req, rc := refundRequest(t, amount, true)
			rc.RunID = runID
			res, err := h.Runtime.Invoke(context.Background(), req, rc)
			if editTurns {
				vandalize(kept)
			}
			o.Runs = append(o.Runs, src.run(t, runID, nil, res, err))
		}
		src.finish(t, &o)
		return o
	}
	tests := []struct {
		name                    string
		amount                  int
		editTurns, criticRaises bool
	}{
		{"the planner edits its earlier plans, a refund the finance gate holds", 5000, true, false},
		{"the planner edits its earlier plans, a refund under the gate", 1200, true, false},
		{"a critic raises the refund of the planner's plan it verified", 1200, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := play(t, tc.amount, false, false)
			got := play(t, tc.amount, tc.editTurns, tc.criticRaises)
			checkPlain(t, tc.amount, want)
			samePlays(t, "a planner that edits the plans it returned", want, got)
		})
	}
}
