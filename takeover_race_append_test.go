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

// heldClaims is the in-memory idempotency store whose first claim waits
// until release is closed (closing entered): a runtime frozen inside a
// write's checks, after its last claim renewal and before it records the
// call.
type heldClaims struct {
	*gateway.MemoryIdempotency
	once             sync.Once
	entered, release chan struct{}
}

func (h *heldClaims) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	first := false
	h.once.Do(func() { first = true })
	if first {
		close(h.entered)
		<-h.release
	}
	return h.MemoryIdempotency.Claim(ctx, key)
}

// A runtime frozen after its last claim renewal and before it records a
// call comes back after a takeover has read the run's transcript and
// before the takeover records anything: the runtime's entries get in
// first, and the takeover's first entry, at the position they took, is
// refused. The takeover must not stop the run over entries it did not
// read (a stopped run whose transcript holds entries past its checkpoint
// can never be resumed): the run is taken over again, from the
// transcript's end, and ends with the refund made once.
func TestATakeoverThatLosesTheRaceForAPositionLeavesTheRunToTheNext(t *testing.T) {
	planner := newTurnPlanner(1200, 3)
	req, rc := refundRequest(t, 1200, true)
	claims := &heldClaims{MemoryIdempotency: gateway.NewMemoryIdempotency(), entered: make(chan struct{}), release: make(chan struct{})}
	c := &takeoverCase{clock: newFakeClock(), runID: rc.RunID, stalled: make(chan error, 1)}
	var o contextostest.Options
	o.Now = c.clock.Now
	o.Runtime.Gateway.Idempotency = claims
	c.h = harness(t, planner, &o)
	ctx := context.Background()
	go func() {
		_, err := c.h.Runtime.Invoke(ctx, req, rc)
		c.stalled <- err
	}()
	<-claims.entered
	c.clock.Advance(contextos.DefaultHeartbeatTTL)
	type answer struct {
		res *contextos.Result
		err error
	}
	took := make(chan answer, 1)
	go func() {
		res, err := c.h.Runtime.Resume(ctx, c.runID, contextos.ResumeInput{Takeover: true})
		took <- answer{res, err}
	}()
	<-planner.entered // the takeover read the transcript, claimed the run, and plans
	close(claims.release)
	if err := <-c.stalled; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the frozen runtime, back after the takeover = %v, want ErrRunInProgress", err)
	}
	close(planner.release)
	first := <-took
	if !errors.Is(first.err, contextos.ErrRunInProgress) {
		status := decision.Status("")
		if first.res != nil {
			status = first.res.Status
		}
		t.Errorf("the takeover whose first entry was refused = %v (%s), want ErrRunInProgress and nothing recorded", first.err, status)
	}
	c.clock.Advance(contextos.DefaultHeartbeatTTL)
	res, err := c.h.Runtime.Resume(ctx, c.runID, contextos.ResumeInput{Takeover: true})
	if err != nil {
		t.Fatalf("the run cannot be continued after a takeover lost the race for a transcript position: %v", err)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	contextostest.AssertCalls(t, c.h.Adapter("adp_payments"), "issue_refund", 1)
	terminal := 0
	for _, r := range listRecords(t, c.h.Decisions, c.runID) {
		if r.Status == decision.Decided || r.Status == decision.Rejected || r.Status == decision.Escalated {
			terminal++
		}
	}
	if terminal != 1 {
		t.Errorf("the run has %d terminal records, want 1", terminal)
	}
	end, err := gateway.VerifyTranscript(runEntries(t, c.h, c.runID))
	if err != nil {
		t.Errorf("the transcript does not verify: %v", err)
	} else if end != res.Record.Lineage.ToolTranscriptChainHash {
		t.Errorf("the transcript ends at %s, the record names %s", end, res.Record.Lineage.ToolTranscriptChainHash)
	}
	contextostest.AssertReplayEqual(t, c.h.Replay(res))
}
