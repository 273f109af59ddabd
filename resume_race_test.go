package contextos_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/gateway"
)

// heldLoad is a checkpoint store whose next Load, once armed, returns
// only when let go: the resume that made it goes on with the checkpoint
// as it read it, after another runtime continued the run.
type heldLoad struct {
	*contextos.InMemoryCheckpoints
	armed           atomic.Bool
	loaded, release chan struct{}
}

func (s *heldLoad) Load(ctx context.Context, runID string) (*contextos.Checkpoint, error) {
	c, err := s.InMemoryCheckpoints.Load(ctx, runID)
	if s.armed.Swap(false) {
		close(s.loaded)
		<-s.release
	}
	return c, err
}

// A resume that read the run's checkpoint at its pause, while another
// resume of the same pause continued the run, is refused as a run no
// longer resumable (the run went on), not as a transcript chain broken
// by "no runtime of the run": the entries past the checkpoint it read
// are the other resume's. The call runs once. Before, the late resume
// reported gateway.ErrChain, an integrity failure, for an ordinary race
// between two resumes (a sweep and a worker, say).
func TestALateResumeOfAContinuedPauseIsNotAChainBreak(t *testing.T) {
	ctx := context.Background()
	store := &heldLoad{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints(), loaded: make(chan struct{}), release: make(chan struct{})}
	var o contextostest.Options
	o.Runtime.Checkpoints = store
	h := bareHarness(t, cardPlanner(), &o)
	scriptDefaults(h, "")
	paused := h.Invoke(requestFor(t, "req_late_resume", 4200))
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
	in := contextos.ResumeInput{Approvals: []gateway.Approval{a}, Pause: paused.Record.RecordID}
	store.armed.Store(true)
	late := make(chan error, 1)
	go func() { _, err := h.Runtime.Resume(ctx, paused.RunID, in); late <- err }()
	<-store.loaded
	if _, err := h.Runtime.Resume(ctx, paused.RunID, in); err != nil {
		t.Fatal(err)
	}
	close(store.release)
	if err := <-late; !errors.Is(err, contextos.ErrNotResumable) || errors.Is(err, gateway.ErrChain) {
		t.Errorf("the late resume: %v; want ErrNotResumable, not ErrChain", err)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
}
