package contextos_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// A transcript store whose append fails after it kept the entry (a
// network store's timeout after its commit) stops the run
// (stopTranscript) with a checkpoint one entry short of the store. The
// run's own gateway wrote that entry, and the stopped run resumes like a
// paused one: a resume must not refuse it forever as an entry "no runtime
// of the run recorded".
func TestResumeAfterATranscriptAppendThatFailedButKeptTheEntry(t *testing.T) {
	store := &keepThenFail{failAt: 2}
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), &contextostest.Options{Runtime: contextos.Options{Transcripts: store}})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 4200, true)
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	for i := 0; err == nil && res.Status != decision.Decided && i < 3; i++ {
		// The run stopped (the append failed) or paused at its gate: it
		// resumes, with the approval it awaits.
		var in contextos.ResumeInput
		if res.Pending != nil {
			in.Approvals = []gateway.Approval{contextostest.Approval(res.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())}
		}
		res, err = h.Runtime.Resume(context.Background(), res.RunID, in)
	}
	if err != nil {
		t.Fatalf("the run cannot go on: %v", err)
	}
	if res.Status != decision.Decided {
		t.Fatalf("status %s, want DECIDED", res.Status)
	}
	if _, err := gateway.VerifyTranscript(store.es); err != nil {
		t.Fatalf("the run's transcript does not verify: %v", err)
	}
}

// keepThenFail keeps every entry and fails its failAt-th append (1-based)
// after keeping it.
type keepThenFail struct {
	rewritableTranscript
	mu     sync.Mutex
	n      int
	failAt int
}

func (s *keepThenFail) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	if err := s.rewritableTranscript.Append(ctx, e); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if s.n == s.failAt {
		return errors.New("timeout after commit")
	}
	return nil
}
