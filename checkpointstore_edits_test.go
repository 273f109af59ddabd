package contextos_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
)

// scribblingCheckpoints is a checkpoint store that, with edit set,
// overwrites the bytes of each checkpoint's Data it is handed once it has
// stored its copy (as a store that encrypts or scrubs a buffer in place
// might), and again at its next save.
type scribblingCheckpoints struct {
	*contextos.InMemoryCheckpoints
	edit   bool
	handed [][]byte
}

func (s *scribblingCheckpoints) scribble() {
	if !s.edit {
		return
	}
	for _, b := range s.handed {
		for i := range b {
			b[i] = '#'
		}
	}
}

func (s *scribblingCheckpoints) Save(ctx context.Context, c *contextos.Checkpoint) error {
	s.scribble()
	err := s.InMemoryCheckpoints.Save(ctx, c)
	s.handed = append(s.handed, c.Data)
	s.scribble()
	return err
}

// TestCheckpointStoreEditingDataChangesNotTheRun: a checkpoint store is
// handed each save's Checkpoint and keeps a copy of its Data. One that
// then overwrites the Data it was handed (at once, and at its next save)
// changes nothing the run enforces, records or replays: every later save
// of the run writes the bytes it writes with a store that edits nothing.
func TestCheckpointStoreEditingDataChangesNotTheRun(t *testing.T) {
	t.Parallel()
	play := func(t *testing.T, amount int, edit bool) playRecord {
		cps := contextos.NewInMemoryCheckpoints()
		store := &scribblingCheckpoints{InMemoryCheckpoints: cps, edit: edit}
		h := harness(t, lookupThenRefund(amount), &contextostest.Options{Runtime: contextos.Options{Checkpoints: store}})
		src := sourcesOf(h)
		src.Checkpoints = cps
		var o playRecord
		for _, runID := range []string{"run_a1b2c3d4e5f60718", "run_a1b2c3d4e5f60719"} {
			req, rc := refundRequest(t, amount, true)
			rc.RunID = runID
			res, err := h.Runtime.Invoke(context.Background(), req, rc)
			o.Runs = append(o.Runs, src.run(t, runID, nil, res, err))
		}
		src.finish(t, &o)
		return o
	}
	editsChangeNothing(t, "a checkpoint store that overwrites the Data it was handed", play)
}
