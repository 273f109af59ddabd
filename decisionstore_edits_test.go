package contextos_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/deepcheck"
)

// editingDecisions is a decision store that, with edit set, edits the
// record each Append is given once it has stored it, and keeps the
// records it returned to edit them later (at its next append, and when
// the test says).
type editingDecisions struct {
	*decision.MemoryStore
	edit     bool
	returned []*decision.Record
}

func (s *editingDecisions) vandalize() {
	if s.edit {
		deepcheck.Vandalize(reflect.ValueOf(s.returned))
	}
}

func (s *editingDecisions) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	s.vandalize()
	out, err := s.MemoryStore.Append(ctx, r)
	if s.edit {
		deepcheck.Vandalize(reflect.ValueOf(r))
	}
	if out != nil {
		s.returned = append(s.returned, out)
	}
	return out, err
}

// TestDecisionStoreEditingRecordsChangesNotTheRun: the decision store is
// given each record to append, and returns the record it stored. One
// that edits the record it is given once it has stored it, and edits
// the records it returned later (at its next append, after the run
// returns), changes nothing the run enforces, records or replays: the
// run's status, result (its record included), compiled context,
// checkpoint, transcript and replay packets are those of a run whose
// store edits nothing. (The record given shared the run's compiled
// context and plan, and the result carried the store's own record.)
func TestDecisionStoreEditingRecordsChangesNotTheRun(t *testing.T) {
	t.Parallel()
	play := func(t *testing.T, amount int, edit bool) playRecord {
		planner := lookupThenRefund(amount)
		store := &editingDecisions{MemoryStore: decision.NewMemoryStore(), edit: edit}
		h := harness(t, planner, &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
		src := sourcesOf(h)
		var o playRecord
		for _, runID := range []string{"run_a1b2c3d4e5f60718", "run_a1b2c3d4e5f60719"} {
			req, rc := refundRequest(t, amount, true)
			rc.RunID = runID
			res, err := h.Runtime.Invoke(context.Background(), req, rc)
			store.vandalize()
			o.Runs = append(o.Runs, src.run(t, runID, nil, res, err))
		}
		src.finish(t, &o)
		return o
	}
	editsChangeNothing(t, "a decision store that edits the records it was given and returned", play)
}
