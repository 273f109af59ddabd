package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// Claims and takeovers. A runtime continuing a run holds its claim: the
// run's checkpoint saved active, with a lease of Options.HeartbeatTTL
// counted on the checkpoint store's clock. The run renews it as it goes
// (run.point), and gives it up when it pauses, stops or ends. A takeover
// (ResumeInput.Takeover) of a claimed run is refused while the lease
// lasts (ErrLeaseHeld); once it has lapsed, the takeover claims the run
// over the checkpoint's revision, so of any number of takeovers one
// continues the run and the others get ErrLeaseHeld or
// ErrCheckpointConflict before doing anything. The runtime that held the
// claim, if it was alive after all, finds its next save refused and stops
// without recording anything more.

// pointKind is where in the loop a takeover point is.
type pointKind int

const (
	// pointTop is the top of the loop, before a planner turn: a
	// long_running run heartbeats there.
	pointTop pointKind = iota
	// pointCall is before a tool call.
	pointCall
	// pointStep is after a step of a long_running run: it heartbeats.
	pointStep
	// pointEnd is before the run's terminal record is appended.
	pointEnd
)

// point passes one of the run's takeover points (claims count too, in
// invoke and resume): a place the run checkpoints with its claim or
// renews it, so a takeover may continue the run from there. A
// long_running run heartbeats at the top of its loop and after each step
// (run.checkpoint); elsewhere the claim is renewed when half of its lease
// has passed (holdClaim). Points are counted in the checkpoint, so a
// takeover's packet names the one it continued from and a replay stops
// there (replayStop). now is the loop's reading of the run's clock, read
// for a heartbeat only.
func (r *run) point(ctx context.Context, at pointKind, now time.Time, progress string) error {
	r.cp.Points++
	if r.long && (at == pointTop || at == pointStep) {
		if err := r.checkpoint(ctx, now, progress); err != nil {
			return err
		}
		return r.replayStop(ctx, true)
	}
	if r.rt.mode == ModeReplay {
		return r.replayStop(ctx, false)
	}
	return r.holdClaim(ctx)
}

// holdClaim renews the run's claim once half of its lease has passed
// since this runtime last saved it (on this runtime's clock: only the
// time since is read, so the clocks need not agree). A run that gave up
// its claim (paused or stopping) renews nothing. A save refused because
// the checkpoint moved on means a takeover has the run: this runtime
// stops here, recording nothing more (ErrRunInProgress).
func (r *run) holdClaim(ctx context.Context) error {
	cp := r.cp
	if !cp.Active || r.rt.mode == ModeReplay || r.rt.opts.Now().Sub(cp.heldAt) < r.rt.heartbeatTTL()/2 {
		return nil
	}
	// What the snapshot takes from the run, for a save the store fails
	// while the claim is still known to be this runtime's (below).
	owed := r.owed()
	r.snapshotInto(cp)
	sctx, cancel := detached(ctx)
	defer cancel()
	err := r.rt.saveOwnCheckpoint(sctx, cp)
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrCheckpointConflict) || r.rt.opts.Now().Sub(cp.renewedAt()) >= r.rt.heartbeatTTL()/2 {
		return r.claimLost(err)
	}
	// A spend save renewed the claim less than half a lease ago: the
	// run is still this runtime's, and the state is saved at the next
	// point. Until then a spend save writes the state last saved with
	// the spend not in it, so what the snapshot took is owed again.
	r.restoreOwed(owed)
	r.rt.opts.Logger.Error("checkpoint of the run not saved; its claim holds", "run_id", r.rc.RunID, "error", logWords(err))
	return nil
}

// owedState is what a state save takes from the run (snapshotInto) that a
// spend save reads: the spend, the call in progress and the store
// failures since the saved state, and the saved state's usage and meter
// reading it measures the wall clock from. A state save the store fails
// gives it back whole (restoreOwed), so the spend saves that follow
// write the state last saved with all that is still owed since it.
type owedState struct {
	spent            replay.Spent
	unsaved          bool
	call             *callInProgress
	failedSince      []replay.StoreFailure
	sinceSpent       *replay.Spent
	inProgress       *callInProgress
	failedSincePoint []replay.StoreFailure
	usage            PlanUsage
	meter            runcontext.Usage
}

// owed is what the run owes since its saved state, before a snapshot.
func (r *run) owed() owedState {
	cp := r.cp
	return owedState{
		spent: r.spent, unsaved: r.spentUnsaved, call: r.call, failedSince: r.failedSince,
		sinceSpent: cp.SpentSincePoint, inProgress: cp.CallInProgress, failedSincePoint: cp.FailedSincePoint,
		usage: cp.Usage, meter: cp.MeterUsage,
	}
}

// restoreOwed gives o back to the run after a state save that failed.
func (r *run) restoreOwed(o owedState) {
	cp := r.cp
	r.spent, r.spentUnsaved, r.call, r.failedSince = o.spent, o.unsaved, o.call, o.failedSince
	cp.SpentSincePoint, cp.CallInProgress, cp.FailedSincePoint = o.sinceSpent, o.inProgress, o.failedSincePoint
	cp.Usage, cp.MeterUsage = o.usage, o.meter
}

// saveSpent makes durable what the run's planner turns charged since its
// last state save (r.spent), and what the attempts of its tool call in
// progress spent before the gateway retried it (r.call), when a charge is
// not yet saved: a takeover charges it, with the transcript's calls
// (chainOf), so the runtime's death loses at most the spend of the turn
// or the attempt in progress. The save is the state last saved, byte for
// byte, with its spent_since_point member set, and its call_in_progress
// member when a call is in progress (checkpointState.cut): not a new
// takeover point, so a takeover continues from the same state, point and
// replay inputs, and the spend is the members' alone (never also in
// meter_usage or the transcript: the call's is charged only while the
// transcript holds no result of it). It renews the run's claim too, over
// the revision the run holds: a save refused because a takeover moved
// the checkpoint on stops this runtime before it does anything more
// (claimLost). A save the store fails is logged and the run goes on (the
// spend is saved with the next one). A run whose planner reports no usage
// and whose retried attempts spend nothing never saves here. The store
// failures of the run's calls since the saved state (r.failedSince) are
// saved with it too, as store_failures_since_point (version 6): a
// takeover's packet names them (storeFailed).
func (r *run) saveSpent(ctx context.Context) error {
	_, err := r.trySaveSpent(ctx)
	return err
}

// trySaveSpent is saveSpent, which also returns the checkpoint store's
// failure it logged and went on from (storeErr), for the claim checks
// (HoldClaim, SaveAttemptsSpent) whose error wraps it.
func (r *run) trySaveSpent(ctx context.Context) (storeErr, _ error) {
	cp := r.cp
	if !r.spentUnsaved || !cp.Active || r.rt.mode == ModeReplay || cp.saved == nil {
		return nil, nil
	}
	r.spentUnsaved = false
	spent := r.spent
	// The wall clock used since the saved state, read on the runtime's
	// clock, not the run's recording one (a reading there would be a
	// replay input); a takeover's packet keeps it (replay.Takeover).
	budget := r.rc.RunBudget.WallClockMS
	used := budget - r.meter.Remaining(r.rt.opts.Now()).Milliseconds()
	spent.WallClockMS = max(used-cp.MeterUsage.WallClockMS, 0)
	call := r.call
	failed := slices.Clip(r.failedSince)
	data, version, encErr := spendSave(cp, &spent, call, failed)
	if encErr != nil {
		return nil, fmt.Errorf("contextos: encode checkpoint of %s: %w", cp.RunID, encErr)
	}
	c := &Checkpoint{RunID: cp.RunID, Revision: cp.rev, Version: version, Data: data, Lease: r.rt.heartbeatTTL()}
	var sctx context.Context
	if _, ok := r.rt.opts.Checkpoints.(*InMemoryCheckpoints); ok {
		// The module's own store never blocks (it takes a mutex) and reads
		// ctx only for its error: the save is detached from the caller's
		// cancellation without a timer, which it could never meet.
		sctx = context.WithoutCancel(ctx)
	} else {
		var cancel context.CancelFunc
		sctx, cancel = detached(ctx)
		defer cancel()
	}
	// A store may have kept the save and lost its answer (a commit whose
	// reply was cut off): when it holds these very bytes, the save is
	// this runtime's (a takeover's claim writes other bytes), and the run
	// goes on at the store's revision, not over the old one, whose next
	// save the store would refuse as a takeover's (putOwn; data is this
	// save's own).
	err := r.rt.putOwn(sctx, cp, c)
	if errors.Is(err, ErrCheckpointConflict) {
		return nil, r.claimLost(err)
	}
	if err != nil {
		// A store that fails the save does not stop the run (its record
		// counts the spend); the spend stays owed to the next save.
		r.spentUnsaved = true
		r.rt.opts.Logger.Error("checkpoint of the run's spend not saved", "run_id", r.rc.RunID, "error", logWords(err))
		return err, nil
	}
	// The run's state is the saved one's, with the members: a later save
	// of it that takes no snapshot keeps them (they are still owed).
	cp.rev, cp.saved, cp.SpentSincePoint, cp.CallInProgress, cp.FailedSincePoint = c.Revision, c.Data, &spent, call, failed
	// The save renewed the claim (its lease is saved with it): a tool
	// call's claim checks count from here (renewedAt).
	cp.spentAt = r.rt.opts.Now()
	return nil, nil
}

// spendSave is the checkpoint a spend save sends: the saved state's
// bytes up to cp.cut, then the spend, the call in progress and the store
// failures since the saved point. The bytes are a new array of their own
// (the store may keep them as they are); only the writer, whose methods
// reach the heap, is a pooled one, and it keeps its own buffer.
func spendSave(cp *checkpointState, spent *replay.Spent, call *callInProgress, failed []replay.StoreFailure) (data []byte, version int, err error) {
	w := checkpointBufs.Get().(*objectWriter)
	pooled := w.b
	w.b = make([]byte, 0, cp.cut+96)
	w.b = append(w.b, cp.saved[:cp.cut]...)
	w.key("spent_since_point")
	w.spent(spent)
	version = checkpointV4
	if call != nil {
		w.key("call_in_progress")
		w.callInProgress(call)
		version = checkpointV5
	}
	if len(failed) > 0 {
		f := failed // on the heap only when there are failures to write
		w.value("store_failures_since_point", &f)
		version = checkpointV6
	}
	data, err = append(w.b, '}'), w.err
	clear(w.keys)
	w.b, w.err, w.keys = pooled[:0], nil, w.keys[:0]
	checkpointBufs.Put(w)
	if err != nil {
		return nil, 0, err
	}
	return data, version, nil
}

// SaveAttemptsSpent is the gateway's spendSaver (gatewayhook.SaveSpent):
// before the gateway retries a call whose attempts spent something, what
// they spent so far (cost and tokens, the same as the call's result will
// report) is saved with the planner's spend (saveSpent), so a takeover
// charges it if this runtime dies before the call's result is recorded.
// An error is this runtime's claim lost to a takeover (ErrRunInProgress),
// or a save the store failed once half of the lease has passed since
// the runtime last renewed its claim (errClaimNotRenewed: it cannot know
// the run is still its): the gateway makes no further attempt and
// records nothing more.
func (r *run) SaveAttemptsSpent(ctx context.Context, toolCallID string, seq int, costCents float64, tokens int) error {
	r.call = &callInProgress{ToolCallID: toolCallID, Seq: seq, Tokens: tokens, CostCents: costCents}
	r.spentUnsaved = true
	cp, rev := r.cp, r.cp.rev
	failed, err := r.trySaveSpent(ctx)
	if err != nil {
		return err
	}
	if cp.rev == rev && cp.Active && r.rt.mode != ModeReplay && cp.saved != nil && r.rt.opts.Now().Sub(cp.renewedAt()) >= r.rt.heartbeatTTL()/2 {
		// The store failed the save, which renews the claim, once half of
		// the lease had passed (as HoldClaim): no further attempt.
		return claimNotRenewed(cp.RunID, failed)
	}
	return nil
}

// HoldClaim is the gateway's claim check (gateway's claimHolder, set
// with the spendSaver): before a retry that saves no spend, and once a
// tool call's last attempt ended and before its result is recorded, it
// renews the run's claim when half of its
// lease has passed since this runtime last saved it (as holdClaim
// counts; a runtime frozen in the call comes back to a clock that moved
// on). The save is saveSpent's (the state last saved, with its spend
// members: a call in progress is no takeover point). A save refused
// because a takeover moved the checkpoint on is ErrRunInProgress: the
// gateway makes no further attempt and records nothing of the call, and
// this runtime stops, so a
// runtime taken over while a call of its ran writes nothing more into
// the run's transcript (a write's result is kept under its idempotency
// key, which the takeover's same write meets). A save the store fails is
// logged, as saveSpent's, but the runtime cannot know the run is still
// its: HoldClaim then fails closed (errClaimNotRenewed), the gateway
// records nothing more of the call and the runtime stops.
func (r *run) HoldClaim(ctx context.Context) error {
	cp := r.cp
	if !cp.Active || r.rt.mode == ModeReplay || cp.saved == nil || r.rt.opts.Now().Sub(cp.renewedAt()) < r.rt.heartbeatTTL()/2 {
		return nil
	}
	rev := cp.rev
	r.spentUnsaved = true
	failed, err := r.trySaveSpent(ctx)
	if err != nil {
		return err
	}
	if cp.rev == rev {
		// The store failed the renewal (saveSpent logged it): this
		// runtime cannot know the run is still its (half of its lease
		// has passed, and a takeover may hold it), so it goes on no more
		// than one that was refused; the run is taken over once its
		// lease lapses.
		return claimNotRenewed(cp.RunID, failed)
	}
	cp.heldAt = r.rt.opts.Now()
	return nil
}

// errClaimNotRenewed is HoldClaim's error when the checkpoint store failed
// the renewal of the run's claim: the runtime stops recording nothing
// more, as when a takeover refused it (the loop returns it as it does
// ErrRunInProgress).
var errClaimNotRenewed = errors.New("contextos: the run's claim could not be renewed (the checkpoint store failed the save); this runtime stops")

// claimNotRenewed is errClaimNotRenewed for runID, wrapping the checkpoint
// store's failure (failed, when known), as a failed claim renewal at a
// takeover point returns it (claimLost): the host's errors.Is matches
// its store's error, as the error's documentation says.
func claimNotRenewed(runID string, failed error) error {
	if failed == nil {
		return fmt.Errorf("%w: run %s", errClaimNotRenewed, runID)
	}
	return fmt.Errorf("%w: run %s: checkpoint: %w", errClaimNotRenewed, runID, failed)
}

// claimLost is the error of a run whose save was refused: a takeover
// holds it (ErrRunInProgress and ErrCheckpointConflict), or the store
// failed.
func (r *run) claimLost(err error) error {
	if errors.Is(err, ErrCheckpointConflict) {
		r.rt.opts.Logger.Error("run taken over by another runtime; this one stops", "run_id", r.rc.RunID)
		return fmt.Errorf("%w: run %s was taken over by another runtime: %w", ErrRunInProgress, r.rc.RunID, err)
	}
	return fmt.Errorf("contextos: checkpoint: %w", err)
}

// checkLease refuses a takeover of a run whose claim's lease, as the
// checkpoint store counted it when the checkpoint was loaded, has not
// lapsed: a runtime holds the run (or held it so recently that it may
// still be working). A replay takes over the run it stopped itself.
func (rt *Runtime) checkLease(cp *checkpointState) error {
	if rt.mode == ModeReplay || cp.lease <= 0 {
		return nil
	}
	return fmt.Errorf("%w: %w: %s is claimed by a runtime whose lease lasts %s more on the checkpoint store's clock (take it over after that)",
		ErrNotResumable, ErrLeaseHeld, cp.RunID, cp.lease.Round(time.Millisecond))
}

// errReplayStopped stops a replay's run at the point its packet's run was
// taken over at; the replay then takes it over (Runtime.Replay).
var errReplayStopped = errors.New("contextos: replay stopped at a takeover point")

// replayStop stops a replay's run at the takeover point its packet's
// next takeover continued from (replaySource.stopAt), with the run's
// checkpoint saved there as the live run's was (saved: it already is).
// Outside a replay, or at any other point, it does nothing.
func (r *run) replayStop(ctx context.Context, saved bool) error {
	if r.rt.mode != ModeReplay || r.rt.replayed.stopAt == 0 || r.cp.Points != r.rt.replayed.stopAt {
		return nil
	}
	if !saved {
		r.snapshotInto(r.cp)
		if err := r.rt.saveCheckpoint(ctx, r.cp); err != nil {
			return err
		}
	}
	return errReplayStopped
}

// notePrior keeps, as a replay input, the result of a write the run got
// from the idempotency store without having made the call itself (a
// runtime that died made it before a takeover continued the run): a
// duplicate whose key no earlier step of the run executed.
func (r *run) notePrior(res *gateway.ToolResultEnvelope) {
	if res == nil || !res.Metadata.Duplicate {
		return
	}
	key := res.Metadata.IdempotencyKey
	if slices.ContainsFunc(r.cp.Results, func(s StepResult) bool {
		return s.Result.Metadata.IdempotencyKey == key && !s.Result.Metadata.Duplicate
	}) || slices.ContainsFunc(r.cp.Priors, func(p replay.PriorResult) bool { return p.IdempotencyKey == key }) {
		return
	}
	// As the store answered: the duplicate mark and the latency are the
	// gateway's (a replay's gateway sets them again).
	prior := *res
	prior.Metadata.Duplicate, prior.LatencyMS = false, 0
	r.cp.Priors = append(r.cp.Priors, replay.PriorResult{IdempotencyKey: key, Result: &prior})
}

// takeInputs moves the replay inputs recorded since it last did (adapter
// outcomes, clock readings) into cp. The run's clock is kept (the
// gateway reads it too): the readings already taken are counted.
func (r *run) takeInputs(cp *checkpointState) {
	if r.recorder != nil {
		// Outcomes is a copy of the recorder's list, the caller's own:
		// the first ones taken are kept as they are.
		if outs := r.recorder.Outcomes(r.rc.RunID); len(cp.Outcomes) == 0 && len(outs) > 0 {
			cp.Outcomes = outs
		} else {
			cp.Outcomes = append(cp.Outcomes, outs...)
		}
		r.recorder.Forget(r.rc.RunID)
	}
	rd := r.untakenReadings()
	cp.Clock = append(cp.Clock, rd...)
	r.clockTaken += len(rd)
}

// untakenReadings are the run's clock readings takeInputs has not taken.
func (r *run) untakenReadings() []time.Time {
	rd := r.clock.Readings()
	if r.clockTaken >= len(rd) {
		return nil
	}
	return rd[r.clockTaken:]
}
