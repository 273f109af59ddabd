package contextos_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/gateway/gatewaytest"
)

// The tests that outside code's edits change nothing compare two plays of
// the same runs, one with plug-ins (or callers) that edit what they are
// given or returned and one with plug-ins that edit nothing, by what the
// plays record, enforce and replay (playRecord).

// runRecord is what one run records, as JSON: the events a Stream
// consumer was given (before the result), the run's status (or its
// error), its result (record, tool results, pending approval, notices),
// decision record, pending approval, compiled context and checkpoint.
type runRecord struct {
	Events                                                []string
	Status, Result, Record, Pending, Compiled, Checkpoint string
}

// playRecord is what a play of runs records, enforces and replays: each
// run's runRecord, the transcript (with the calls' arguments, results and
// chain hashes), the replay packets, how many refunds the payment adapter
// issued, and anything a play adds to Extra (the replays' reports, say).
type playRecord struct {
	Runs                []runRecord
	Transcript, Packets string
	Refunds             int
	Extra               []string
}

// playSources are where a play's checkpoints, transcript and packets are
// read back from, and its payment adapter: the harness's unless a play
// set its own.
type playSources struct {
	H           *contextostest.Harness
	Checkpoints contextos.CheckpointStore
	Transcript  *gatewaytest.Recorder
	Packets     contextos.PacketStore
	Payments    *gatewaytest.ScriptedAdapter
}

// sourcesOf are the harness's own stores.
func sourcesOf(h *contextostest.Harness) playSources {
	return playSources{H: h, Checkpoints: h.Checkpoints, Transcript: h.Transcript, Packets: h.Replays, Payments: h.Adapter("adp_payments")}
}

// asJSON is v's JSON, failing the test when v has none.
func asJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// run is the runRecord of run runID, whose Invoke, Resume or Stream
// returned res and err (events are those a Stream consumer was given).
// It is taken at once, before anyone can edit res.
func (s playSources) run(t testing.TB, runID string, events []string, res *contextos.Result, err error) runRecord {
	t.Helper()
	r := runRecord{Events: events}
	switch {
	case err != nil:
		r.Status = "error: " + err.Error()
	case res != nil:
		r.Status, r.Result, r.Record, r.Pending, r.Compiled = string(res.Status), asJSON(t, res), asJSON(t, res.Record), asJSON(t, res.Pending), asJSON(t, res.Compiled)
	}
	if c, err := s.Checkpoints.Load(context.Background(), runID); err == nil {
		r.Checkpoint = string(c.Data)
	}
	return r
}

// finish adds to o the transcript, the refunds issued and every replay
// packet the runtime saved.
func (s playSources) finish(t testing.TB, o *playRecord) {
	t.Helper()
	o.Transcript, o.Refunds = asJSON(t, s.Transcript.Entries()), s.Payments.CallCount("issue_refund")
	for _, id := range s.H.PacketIDs() {
		p, err := s.Packets.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		o.Packets += asJSON(t, p)
	}
}

// checkPlain fails the test when the plain play of a refund of amount is
// not what the comparison needs: the finance gate (3000 INR) holds a
// refund above it (the first run DEFERRED, no refund issued), and one
// under it is issued.
func checkPlain(t testing.TB, amount int, plain playRecord) {
	t.Helper()
	if amount > 3000 && (plain.Runs[0].Status != "DEFERRED" || plain.Refunds != 0) {
		t.Fatalf("the plain run is %s with %d refunds: the gate does not hold it", plain.Runs[0].Status, plain.Refunds)
	}
	if amount < 3000 && plain.Refunds == 0 {
		t.Fatalf("the plain run is %s with no refund", plain.Runs[0].Status)
	}
}

// samePlays fails the test when the editing play recorded, enforced or
// replayed anything other than the plain one; who names the editor.
func samePlays(t testing.TB, who string, plain, editing playRecord) {
	t.Helper()
	if diff := cmp.Diff(plain, editing); diff != "" {
		t.Errorf("%s changed the run (-plain +editing):\n%s", who, diff)
	}
}

// lookupThenRefund is the planner of the edit tests: the order lookup at
// the first turn, the refund of amount at every later one.
func lookupThenRefund(amount int) contextos.Planner {
	return contextos.PlannerFunc(func(_ context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
		if req.Turn > 0 {
			return refundPlan(amount), nil
		}
		return lookupPlan(), nil
	})
}

// editsChangeNothing plays a refund under the finance gate (1200) and one
// above it (5000), each without and with the edits (play's edit), and
// requires the plain play to hold or issue the refund as the gate says
// and the edited play to record, enforce and replay what it does. what
// names the editing party in failures.
func editsChangeNothing(t *testing.T, what string, play func(t *testing.T, amount int, edit bool) playRecord) {
	t.Helper()
	for _, amount := range []int{1200, 5000} {
		want, got := play(t, amount, false), play(t, amount, true)
		checkPlain(t, amount, want)
		samePlays(t, what, want, got)
	}
}
