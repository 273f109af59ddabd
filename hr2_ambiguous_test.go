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
	stopped := h.Invoke(req, rc)
	if stopped.Status != decision.Escalated {
		t.Fatalf("status %s, want the run stopped ESCALATED", stopped.Status)
	}
	_, err := h.Runtime.Resume(context.Background(), stopped.RunID, contextos.ResumeInput{})
	if errors.Is(err, gateway.ErrChain) {
		t.Fatalf("the stopped run cannot be resumed: %v", err)
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
