package contextos_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// keepsThenFailsSpend is a checkpoint store whose first save of a
// planner's spend (version 4) is kept and then failed, as a store whose
// commit succeeded and whose answer was lost (a timeout, a dropped
// connection).
type keepsThenFailsSpend struct {
	*contextos.InMemoryCheckpoints
	failed atomic.Bool
}

func (s *keepsThenFailsSpend) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	if err := s.InMemoryCheckpoints.Save(ctx, cp); err != nil {
		return err
	}
	if cp.Version == 4 && !s.failed.Swap(true) {
		return errors.New("connection reset after commit")
	}
	return nil
}

// A save of the planner's spend that the store fails is logged and the
// run goes on (docs/guarantees.md, "Budgets are exact"). When the store
// kept it after all, the run's next save is over a revision the store has
// moved past: the run must not take that for a takeover and stop without
// a record (ErrRunInProgress), leaving the run to wait out its lease.
func TestASpendSaveTheStoreKeptButFailedDoesNotStopTheRun(t *testing.T) {
	store := &keepsThenFailsSpend{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Checkpoints: store}})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 1200, true)
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	if !store.failed.Load() {
		t.Fatal("the run saved no planner spend")
	}
	if err != nil {
		t.Fatalf("the run stopped: %v", err)
	}
	if res.Status != decision.Decided {
		t.Fatalf("status %s, want DECIDED", res.Status)
	}
}
