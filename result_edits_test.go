package contextos_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/contextos/contextos/internal/deepcheck"
)

// TestCallerEditingTheResultChangesNotLaterRuns: a caller may edit the
// Result Invoke returned, its compiled context included (the tool
// manifest and each capability's argument constraints). Doing so changes
// nothing a later run of the same pack enforces, records or replays: the
// compiled context a run returns shares nothing with the runtime's pack
// (its argument constraints were the pack's own map, so an edit reached
// the pack every later run compiles, which then no longer hashed to its
// verified content: later runs escalated and replays failed).
func TestCallerEditingTheResultChangesNotLaterRuns(t *testing.T) {
	t.Parallel()
	play := func(t *testing.T, amount int, edit bool) playRecord {
		planner := lookupThenRefund(amount)
		h := harness(t, planner, nil)
		src := sourcesOf(h)
		var o playRecord
		for _, runID := range []string{"run_a1b2c3d4e5f60718", "run_a1b2c3d4e5f60719"} {
			req, rc := refundRequest(t, amount, true)
			rc.RunID = runID
			res, err := h.Runtime.Invoke(context.Background(), req, rc)
			o.Runs = append(o.Runs, src.run(t, runID, nil, res, err))
			if edit && res != nil {
				deepcheck.Vandalize(reflect.ValueOf(res))
			}
		}
		src.finish(t, &o)
		return o
	}
	editsChangeNothing(t, "a caller that edits the result it was returned", play)
}
