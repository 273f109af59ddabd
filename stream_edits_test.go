package contextos_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

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
	type runOutcome struct {
		Events                                        []string
		Status, Record, Pending, Compiled, Checkpoint string
	}
	type outcome struct {
		Runs                []runOutcome
		Transcript, Packets string
		Refunds             int
	}
	asJSON := func(t *testing.T, v any) string {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// play streams two refunds of amount; with edit the consumer records
	// each event and then edits everything it reaches.
	play := func(t *testing.T, amount int, edit bool) outcome {
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
		var o outcome
		for _, runID := range []string{"run_a1b2c3d4e5f60718", "run_a1b2c3d4e5f60719"} {
			req, rc := refundRequest(t, amount, true)
			rc.RunID = runID
			var ro runOutcome
			var res *contextos.Result
			for ev, err := range h.Runtime.Stream(context.Background(), req, rc) {
				if err != nil {
					ro.Status = "error: " + err.Error()
					break
				}
				if ev.Kind == contextos.EventResult {
					res = ev.Final
					continue
				}
				ro.Events = append(ro.Events, asJSON(t, ev))
				if edit {
					deepcheck.Vandalize(reflect.ValueOf(&ev))
				}
			}
			if res != nil {
				ro.Status, ro.Record, ro.Pending, ro.Compiled = string(res.Status), asJSON(t, res.Record), asJSON(t, res.Pending), asJSON(t, res.Compiled)
			}
			if c, err := h.Checkpoints.Load(context.Background(), rc.RunID); err == nil {
				ro.Checkpoint = string(c.Data)
			}
			o.Runs = append(o.Runs, ro)
		}
		o.Transcript, o.Refunds = asJSON(t, h.Transcript.Entries()), h.Adapter("adp_payments").CallCount("issue_refund")
		for _, id := range h.PacketIDs() {
			p, err := h.Replays.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			o.Packets += asJSON(t, p)
		}
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
			if tc.amount > 3000 && (want.Runs[0].Status != "DEFERRED" || want.Refunds != 0) {
				t.Fatalf("the plain run is %s with %d refunds: the gate does not hold it", want.Runs[0].Status, want.Refunds)
			}
			if tc.amount < 3000 && want.Refunds == 0 {
				t.Fatalf("the plain run is %s with no refund", want.Runs[0].Status)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("a Stream consumer that edits its events changed the run (-plain +editing):\n%s", diff)
			}
		})
	}
}
