package contextos_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
)

// frozenCalls is the in-memory transcript whose append of the first call
// entry of capability waits until release is closed (closing entered): a
// runtime frozen in the middle of that append, after its claim checks.
type frozenCalls struct {
	*gatewaytest.Recorder
	capability       string
	once             sync.Once
	entered, release chan struct{}
}

func (f *frozenCalls) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	if e.Call != nil && e.Call.CapabilityID == f.capability {
		f.once.Do(func() {
			close(f.entered)
			<-f.release
		})
	}
	return f.Recorder.Append(ctx, e)
}

// A runtime frozen in the append of a call entry (after its claim
// checks: one frozen in a write's checks or idempotency claim is stopped
// by the check before the call entry,
// TestARuntimeFrozenInAWritesClaimPaysNothingOnceTakenOver) comes back
// after a takeover has read the run's transcript and before the takeover
// records anything: the runtime's entry gets in first (the runtime then
// finds the run another's, and makes no attempt), and the takeover's
// first entry, at the position it took, is refused. The takeover must not stop the run over entries it did not
// read (a stopped run whose transcript holds entries past its checkpoint
// can never be resumed): the run is taken over again, from the
// transcript's end, and ends with the refund made once.
func TestATakeoverThatLosesTheRaceForAPositionLeavesTheRunToTheNext(t *testing.T) {
	planner := newTurnPlanner(1200, 3)
	req, rc := refundRequest(t, 1200, true)
	claims := &frozenCalls{Recorder: &gatewaytest.Recorder{}, capability: "adp_payments.issue_refund", entered: make(chan struct{}), release: make(chan struct{})}
	c := &takeoverCase{clock: newFakeClock(), runID: rc.RunID, stalled: make(chan error, 1)}
	var o contextostest.Options
	o.Now = c.clock.Now
	o.Runtime.Transcripts = claims
	c.h = harness(t, planner, &o)
	c.h.Transcript = claims.Recorder
	ctx := context.Background()
	c.invoke(req, rc)
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

// frozenResults is the in-memory transcript whose append of the first
// result of capability waits until release is closed (closing entered):
// a runtime frozen in the middle of that append, after its last claim
// renewal.
type frozenResults struct {
	*gatewaytest.Recorder
	capability       string
	once             sync.Once
	entered, release chan struct{}
}

func (f *frozenResults) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	if e.Result != nil && e.Result.CapabilityID == f.capability {
		f.once.Do(func() {
			close(f.entered)
			<-f.release
		})
	}
	return f.Recorder.Append(ctx, e)
}

// The same race over a retried read: the runtime saved its lookup's
// first attempt (5,000 tokens, 2 cents), made its last one and froze in
// the append of the call's result; the takeover read the transcript (the
// call, no result), charged that attempt, claimed the run and planned;
// the runtime's append of the call's result, which carries both
// attempts, then went through before the takeover recorded anything, so
// the takeover stopped. The next takeover
// continues from the transcript's end: it must not charge the first
// attempt again with the result the earlier takeover's usage already
// holds it in (it charged 5,000 tokens twice, and the run ended over
// total_tokens). The result's last attempt, in progress when the run was
// taken over, is what the runtime's death loses (the bound).
func TestTheNextTakeoverChargesTheRaceWinnersResultOnce(t *testing.T) {
	entered, freeze := make(chan struct{}), make(chan struct{})
	a := &attemptsAdapter{lookups: []lookupAttempt{{cents: 2, tokens: 5000}, {cents: 1, tokens: 1}}}
	transcript := &frozenResults{Recorder: &gatewaytest.Recorder{}, capability: "adp_orders.lookup", entered: entered, release: freeze}
	planner := newTurnPlanner(1200, 2)
	c := sameAdapterCase(t, planner, a, 2, func(o *contextostest.Options) { o.Runtime.Transcripts = transcript })
	c.h.Transcript = transcript.Recorder
	ctx := context.Background()
	c.invoke(refundRequest(t, 1200, true))
	<-entered
	c.clock.Advance(contextos.DefaultHeartbeatTTL)
	took := make(chan error, 1)
	go func() {
		_, err := c.h.Runtime.Resume(ctx, c.runID, contextos.ResumeInput{Takeover: true})
		took <- err
	}()
	<-planner.entered // the takeover read the transcript, claimed the run, and plans
	close(freeze)
	if err := <-c.stalled; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the frozen runtime, back after the takeover = %v, want ErrRunInProgress", err)
	}
	close(planner.release)
	if err := <-took; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the takeover whose first entry was refused = %v, want ErrRunInProgress", err)
	}
	c.clock.Advance(contextos.DefaultHeartbeatTTL)
	res, err := c.h.Runtime.Resume(ctx, c.runID, contextos.ResumeInput{Takeover: true})
	if err != nil {
		t.Fatal(err)
	}
	// The runtime's turn 0 and its first attempt, the first takeover's
	// turn 0, the second's turns 0 and 1: the attempt the runtime was in
	// when the run was taken over (1 token, 1 cent) is what a death loses.
	const tokens, cents = 900 + 5000 + 900 + 900 + 700, 0.4 + 2 + 0.4 + 0.4 + 0.3
	if u := res.Record.BudgetUsage; u.Tokens != tokens || math.Abs(u.CostUSDCents-cents) > 1e-9 {
		t.Errorf("the run's record counts %d tokens and %v cents, want %d and %v", u.Tokens, u.CostUSDCents, tokens, cents)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	if _, err := gateway.VerifyTranscript(runEntries(t, c.h, c.runID)); err != nil {
		t.Errorf("the transcript does not verify: %v", err)
	}
	contextostest.AssertReplayEqual(t, c.h.Replay(res))
}
