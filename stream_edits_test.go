package contextos_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/internal/deepcheck"
)

// TestStreamConsumerEditingEventsChangesNotTheRun: a Stream consumer is
// handed each event as the run goes: the compiled summary, the plans,
// verdicts, tool calls and results, the pause and the records. One that
// edits every member of every event it can reach (before the result
// event) changes nothing the run executes, enforces or records: the
// tool calls made (the transcript, with their arguments), the events
// that follow, the run's status, decision record, pending approval,
// compiled context, checkpoint and replay packet are those of a run
// whose consumer edits nothing. (The harness replays every run at the
// end of the test: the replay is equal too.)
func TestStreamConsumerEditingEventsChangesNotTheRun(t *testing.T) {
	t.Parallel()
	// play streams two refunds of amount; with edit the consumer records
	// each event and then edits everything it reaches.
	play := func(t *testing.T, amount int, edit bool) playRecord {
		plans := []*contextos.Plan{lookupPlan(), refundPlan(amount)}
		planner := contextos.PlannerFunc(func(_ context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
			b, err := json.Marshal(plans[min(req.Turn, len(plans)-1)])
			if err != nil {
				return nil, err
			}
			var c contextos.Plan
			return &c, json.Unmarshal(b, &c)
		})
		h := harness(t, planner, nil)
		src := sourcesOf(h)
		var o playRecord
		for _, runID := range []string{"run_a1b2c3d4e5f60718", "run_a1b2c3d4e5f60719"} {
			req, rc := refundRequest(t, amount, true)
			rc.RunID = runID
			var events []string
			var res *contextos.Result
			var runErr error
			for ev, err := range h.Runtime.Stream(context.Background(), req, rc) {
				if err != nil {
					runErr = err
					break
				}
				if ev.Kind == contextos.EventResult {
					res = ev.Final
					continue
				}
				events = append(events, asJSON(t, ev))
				if edit {
					deepcheck.Vandalize(reflect.ValueOf(&ev))
				}
			}
			o.Runs = append(o.Runs, src.run(t, runID, events, res, runErr))
		}
		src.finish(t, &o)
		return o
	}
	tests := []struct {
		name   string
		amount int
	}{
		{"a refund the finance gate holds", 5000},
		{"a refund under the gate", 1200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := play(t, tc.amount, false)
			got := play(t, tc.amount, true)
			checkPlain(t, tc.amount, want)
			samePlays(t, "a Stream consumer that edits its events", want, got)
		})
	}
}
