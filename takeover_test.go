package contextos_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// turnPlanner plans by turn: the lookup, then the refund of amount with
// the approved decision. Its freezeAt-th call (from 1; 0: none) waits
// until released, as a runtime that stopped while planning.
type turnPlanner struct {
	amount           int
	freezeAt         int32
	calls            atomic.Int32
	entered, release chan struct{}
}

func newTurnPlanner(amount int, freezeAt int32) *turnPlanner {
	return &turnPlanner{amount: amount, freezeAt: freezeAt, entered: make(chan struct{}), release: make(chan struct{})}
}

func (p *turnPlanner) Plan(_ context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	if p.calls.Add(1) == p.freezeAt {
		close(p.entered)
		<-p.release
	}
	if req.Turn == 0 {
		return lookupPlan(), nil
	}
	return refundPlan(p.amount), nil
}

// refundFrozenCritic is a host critic that passes everything; its first
// score of a plan whose results include the refund waits until released,
// as a runtime that stopped after the refund ran and before it recorded
// the run's decision.
type refundFrozenCritic struct {
	entered, release chan struct{}
	frozen           atomic.Bool
}

func (c *refundFrozenCritic) Verify(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	return contextos.Judgement{Verdict: contextos.VerdictOK}, nil
}

func (c *refundFrozenCritic) Score(_ context.Context, in *contextos.CriticInput) (contextos.Judgement, error) {
	refunded := slices.ContainsFunc(in.Results, func(s contextos.StepResult) bool {
		return s.Result.CapabilityID == "adp_payments.issue_refund" && s.Result.Status.Succeeded()
	})
	if refunded && !c.frozen.Swap(true) {
		close(c.entered)
		<-c.release
	}
	return contextos.Judgement{Verdict: contextos.VerdictOK}, nil
}

// takeoverCase is a runtime that stops mid-run (frozen where its test
// says) and the takeover of its run once its claim's lease has lapsed.
type takeoverCase struct {
	h       *contextostest.Harness
	clock   *fakeClock
	runID   string
	stalled chan error // the frozen runtime's Invoke, once it comes back
}

// startFrozen invokes req on a harness with planner and critic, on a fake
// clock, and returns once the run's runtime is frozen (entered closed).
func startFrozen(t testing.TB, planner contextos.Planner, critic contextos.Critic, entered <-chan struct{}, req *runcontext.InvokeRequest, rc *runcontext.RunContext) *takeoverCase {
	t.Helper()
	c := &takeoverCase{clock: newFakeClock(), runID: rc.RunID, stalled: make(chan error, 1)}
	var o contextostest.Options
	o.Now = c.clock.Now
	o.Runtime.Critic = critic
	c.h = harness(t, planner, &o)
	c.invoke(req, rc)
	<-entered
	return c
}

// invoke runs req on the case's runtime on a goroutine of its own (the
// runtime to freeze): c.stalled gets Invoke's error once it returns.
func (c *takeoverCase) invoke(req *runcontext.InvokeRequest, rc *runcontext.RunContext) {
	c.runID = rc.RunID
	go func() {
		_, err := c.h.Runtime.Invoke(context.Background(), req, rc)
		c.stalled <- err
	}()
}

// takeOver lets the frozen runtime's lease lapse and takes the run over.
func (c *takeoverCase) takeOver(t testing.TB) *contextos.Result {
	t.Helper()
	ctx := context.Background()
	if _, err := c.h.Runtime.Resume(ctx, c.runID, contextos.ResumeInput{Takeover: true}); !errors.Is(err, contextos.ErrLeaseHeld) {
		t.Fatalf("takeover while the frozen runtime's lease lasts = %v, want ErrLeaseHeld", err)
	}
	c.clock.Advance(contextos.DefaultHeartbeatTTL)
	res, err := c.h.Runtime.Resume(ctx, c.runID, contextos.ResumeInput{Takeover: true})
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	return res
}

// checkWhole checks a taken-over run is whole: its transcript chain
// verifies from genesis and ends at its record's chain hash, the
// frozen runtime (released) stopped without recording anything, the run
// has one terminal record, its packet says where the takeover began and
// replays equal, and Capture of it works and replays equal.
func (c *takeoverCase) checkWhole(t *testing.T, res *contextos.Result, release func(), refunds int) {
	t.Helper()
	ctx := context.Background()
	contextostest.AssertStatus(t, res, decision.Decided)
	release()
	if err := <-c.stalled; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the frozen runtime, back after the takeover = %v, want ErrRunInProgress", err)
	}
	entries := runEntries(t, c.h, c.runID)
	end, err := gateway.VerifyTranscript(entries)
	if err != nil {
		t.Errorf("the transcript of the taken-over run does not verify from genesis: %v", err)
	} else if end != res.Record.Lineage.ToolTranscriptChainHash {
		t.Errorf("the transcript ends at %s, the record names %s", end, res.Record.Lineage.ToolTranscriptChainHash)
	}
	contextostest.AssertCalls(t, c.h.Adapter("adp_payments"), "issue_refund", refunds)
	terminal := 0
	for _, r := range listRecords(t, c.h.Decisions, c.runID) {
		if r.Status == decision.Decided || r.Status == decision.Rejected || r.Status == decision.Escalated {
			terminal++
		}
	}
	if terminal != 1 {
		t.Errorf("the run has %d terminal records, want 1", terminal)
	}
	p, err := c.h.Replays.Get(ctx, res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Resumes) == 0 || p.Resumes[len(p.Resumes)-1].Takeover == nil {
		t.Errorf("the packet's resumes %+v do not say the run was taken over", p.Resumes)
	}
	contextostest.AssertReplayEqual(t, c.h.Replay(res))
	captured, err := c.h.Runtime.Capture(ctx, c.runID, replay.SourceOperatorCorrection)
	if err != nil {
		t.Fatalf("Capture of the taken-over run: %v", err)
	}
	report, err := c.h.Runtime.Replay(ctx, captured)
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertReplayEqual(t, report)
}

// A run whose runtime stopped before its first tool call (frozen in its
// first planner turn) is taken over from its claim: its transcript chain
// starts at the genesis hash, not an empty one.
func TestTakeoverBeforeTheFirstCall(t *testing.T) {
	planner := newTurnPlanner(1200, 1)
	req, rc := refundRequest(t, 1200, true)
	c := startFrozen(t, planner, nil, planner.entered, req, rc)
	res := c.takeOver(t)
	if entries := runEntries(t, c.h, c.runID); len(entries) == 0 || entries[0].PrevHash != gateway.GenesisHash {
		t.Errorf("the taken-over run's first transcript entry follows %q, want the genesis hash", entries[0].PrevHash)
	}
	c.checkWhole(t, res, func() { close(planner.release) }, 1)
}

// A run whose runtime stopped after its first turn's calls (frozen in its
// second planner turn) is taken over from its claim: the calls the
// stopped runtime recorded stay in the chain, the takeover's follow
// them, and its packet's replay takes them as recorded.
func TestTakeoverAfterCallsTheDeadRuntimeRecorded(t *testing.T) {
	planner := newTurnPlanner(1200, 2)
	req, rc := refundRequest(t, 1200, true)
	c := startFrozen(t, planner, nil, planner.entered, req, rc)
	res := c.takeOver(t)
	p, err := c.h.Replays.Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	if to := p.Resumes[0].Takeover; to == nil || to.Point != 1 || to.TranscriptEntries != 4 {
		t.Errorf("takeover = %+v, want it from the claim (point 1) after the 4 entries of the lookup and the policy check", to)
	}
	c.checkWhole(t, res, func() { close(planner.release) }, 1)
}

// A run whose runtime stopped after the refund ran and before it recorded
// the run's decision is taken over: the takeover plans again, meets the
// refund in the idempotency store (the effect is not repeated), and ends
// the run; its packet keeps that result, so its replay does too.
func TestTakeoverAfterTheDeadRuntimesRefund(t *testing.T) {
	planner := newTurnPlanner(1200, 0)
	critic := &refundFrozenCritic{entered: make(chan struct{}), release: make(chan struct{})}
	req, rc := refundRequest(t, 1200, true)
	c := startFrozen(t, planner, critic, critic.entered, req, rc)
	res := c.takeOver(t)
	p, err := c.h.Replays.Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.PriorResults) != 1 || p.PriorResults[0].Result == nil || p.PriorResults[0].Result.CapabilityID != "adp_payments.issue_refund" {
		t.Errorf("packet prior results = %+v, want the refund the stopped runtime made", p.PriorResults)
	}
	c.checkWhole(t, res, func() { close(critic.release) }, 1)
}

// A long_running run is taken over from its latest heartbeat: it goes on
// from the step it had reached, not from its start.
func TestTakeoverOfALongRunningRunFromItsHeartbeat(t *testing.T) {
	planner := newTurnPlanner(1200, 2)
	req, rc := longRequest(t, 1200, 4*time.Hour)
	c := startFrozen(t, planner, nil, planner.entered, req, rc)
	res := c.takeOver(t)
	if n := planner.calls.Load(); n != 3 {
		t.Errorf("the planner was asked %d times, want 3 (the takeover's one turn after the stopped runtime's two)", n)
	}
	contextostest.AssertCalls(t, c.h.Adapter("adp_orders"), "lookup", 1)
	c.checkWhole(t, res, func() { close(planner.release) }, 1)
}

// runEntries are the transcript entries of runID.
func runEntries(t *testing.T, h *contextostest.Harness, runID string) []gateway.TranscriptEntry {
	t.Helper()
	es, err := h.Transcript.RunEntries(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// FuzzReplayTakeover: a packet's takeover fields come from outside (a
// packet file, a store). A taken-over run's packet with its takeover
// point, its transcript entry count and its prior results changed (and
// sealed again) replays without a panic and without a live call; only
// the recorded values replay equal.
func FuzzReplayTakeover(f *testing.F) {
	planner := newTurnPlanner(1200, 0)
	critic := &refundFrozenCritic{entered: make(chan struct{}), release: make(chan struct{})}
	req, rc := refundRequest(f, 1200, true)
	c := startFrozen(f, planner, critic, critic.entered, req, rc)
	res := c.takeOver(f)
	close(critic.release)
	<-c.stalled
	ctx := context.Background()
	p, err := c.h.Replays.Get(ctx, res.ReplayPacketID)
	if err != nil {
		f.Fatal(err)
	}
	good, err := json.Marshal(p)
	if err != nil {
		f.Fatal(err)
	}
	to := p.Resumes[len(p.Resumes)-1].Takeover
	f.Add(to.Point, to.TranscriptEntries, 0, false)
	f.Add(0, 0, 1, false)
	f.Add(-1, 1<<30, 2, true)
	f.Add(to.Point+1, to.TranscriptEntries-1, 0, true)
	f.Fuzz(func(t *testing.T, point, entries, priors int, nilResult bool) {
		var pk replay.Packet
		if err := json.Unmarshal(good, &pk); err != nil {
			t.Fatal(err)
		}
		// The recorded spend stays: it is what the takeover charged of the
		// dead runtime's planner turns, and the replay charges it.
		pk.Resumes[len(pk.Resumes)-1].Takeover = &replay.Takeover{Point: point, TranscriptEntries: entries, Spent: to.Spent}
		if priors >= 0 && priors < len(pk.PriorResults) {
			pk.PriorResults = pk.PriorResults[:priors]
		}
		if nilResult && len(pk.PriorResults) > 0 {
			pk.PriorResults[0].Result = nil
		}
		if err := pk.Seal(); err != nil {
			return
		}
		report, err := c.h.Runtime.Replay(ctx, &pk)
		recorded := point == to.Point && entries == to.TranscriptEntries && (priors < 0 || priors >= len(p.PriorResults)) && !nilResult
		if recorded && (err != nil || report.Status != replay.ReplayEqual) {
			t.Errorf("the recorded takeover replays %v, %v", report, err)
		}
	})
}
