package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/decisionspec"
	"github.com/contextos/contextos/internal/playback"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// Resume continues a paused run with what it awaits (an approval), on any
// runtime sharing the checkpoint, decision, idempotency and approval
// stores. Completed side effects are never repeated: finished steps are
// not re-run, the paused call keeps its idempotency key, and approvals are
// checked as in the gateway. The run ends as Invoke's would.
//
// A run stopped because the decision store failed its record and could
// not say whether it kept it (record_not_stored) is settled, not
// continued: Resume stores the record the run built (or adopts the copy
// the store kept) and ends the run with it, without planning or calling
// again and whatever in holds. Invoking the run again does the same.
func (rt *Runtime) Resume(ctx context.Context, runID string, in ResumeInput) (res *Result, err error) {
	defer rt.guard(&res, &err)
	return rt.resume(ctx, runID, in, nil)
}

// ResumeStream resumes like Resume and yields the run's events as Stream
// does, ending with a result event.
func (rt *Runtime) ResumeStream(ctx context.Context, runID string, in ResumeInput) iter.Seq2[Event, error] {
	return streamEvents(ctx, func(ctx context.Context, emit func(Event)) (res *Result, err error) {
		defer rt.guard(&res, &err)
		return rt.resume(ctx, runID, in, emit)
	})
}

func (rt *Runtime) resume(ctx context.Context, runID string, in ResumeInput, emit func(Event)) (*Result, error) {
	cp, err := rt.loadCheckpoint(ctx, runID)
	if err != nil {
		return nil, err
	}
	switch {
	case cp.Active && !in.Takeover:
		return nil, fmt.Errorf("%w: %s is being continued by another runtime (set Takeover if that runtime is gone)", ErrNotResumable, runID)
	case cp.Stopped == notStarted:
		return nil, fmt.Errorf("%w: %s never started; invoke it again", ErrNotResumable, runID)
	case cp.Terminal || cp.Pending == nil && cp.Stopped == "" && !cp.Active && cp.Unconfirmed == nil:
		// An active run with neither a pause nor a stop is one whose
		// runtime died mid-run: a takeover continues it.
		return nil, fmt.Errorf("%w: %s", ErrNotResumable, runID)
	case in.Pause != "" && (cp.Pending == nil || cp.Deferred != in.Pause):
		// The pause the input answers was continued: the run awaits
		// another, or nothing.
		return nil, fmt.Errorf("%w: %s no longer awaits the pause of record %s", ErrNotResumable, runID, in.Pause)
	}
	// A takeover (of a claimed run) waits out the claim's lease, before
	// anything else: a runtime holding it may be alive.
	takeover := cp.Active
	if takeover {
		if err := rt.checkLease(cp); err != nil {
			return nil, err
		}
	}
	if err := checkCheckpoint(cp); err != nil {
		return nil, err
	}
	if err := rt.confirmPause(ctx, cp); err != nil {
		return nil, err
	}
	lost := false
	if cp.Unconfirmed == nil && takeover {
		// The runtime that ran the run died: it may have stored the run's
		// decision before it could save the checkpoint saying so.
		rec, err := rt.reconcile(ctx, cp)
		if err != nil {
			return nil, err
		}
		if rec != nil {
			cp.Unconfirmed, lost = &unconfirmedRecord{Record: rec, Stopped: cp.Stopped}, true
		}
	}
	if cp.Unconfirmed != nil {
		// The run decided; only its record's storage is in doubt. The
		// resume stores that record and ends the run with it: no plan,
		// no call, and the input (approvals, budget) is not used.
		return rt.settle(ctx, cp, lost, emit)
	}
	if in.Budget != nil {
		next := cp.Run.Clone()
		next.RunBudget = resumeBudget(cp.Run.RunBudget, *in.Budget)
		if err := next.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrResumeInput, err)
		}
		if cp.Origin == nil {
			cp.Origin = cp.Run
		}
		cp.Run = next
	}
	clock := rt.clockFor(runID)
	now := clock.Now()
	// The identity claim is verified again, on the resume's clock: a claim
	// that expired while the run was paused does not carry it on.
	identity, err := rt.verifyIdentity(ctx, cp.Run, now)
	if err != nil {
		return nil, err
	}
	// A takeover charges what the dead runtime saved of its planner
	// turns' spend after the checkpoint's state (run.saveSpent), and of
	// its call in progress (below); a replay charges what its packet's
	// takeover recorded.
	var spent *replay.Spent
	if takeover {
		spent = cp.SpentSincePoint
		if rt.mode == ModeReplay {
			spent = rt.replayed.spent
		}
		if spent != nil {
			s := *spent
			// As charges are: nothing negative, counts saturate, and no
			// more wall clock than the run's budget (a packet's value
			// comes from outside).
			s.Tokens, s.CostCents = min(max(s.Tokens, 0), canon.MaxSafeInteger), min(max(s.CostCents, 0), canon.MaxSafeInteger)
			s.WallClockMS = min(max(s.WallClockMS, 0), cp.Run.RunBudget.WallClockMS)
			spent = &s
		}
	}
	// wall_clock_ms counts the run's active time: the meter goes on from
	// the time the run had used when it paused, not from its start, so
	// the hours an approval takes are not charged.
	active := time.Duration(cp.MeterUsage.WallClockMS) * time.Millisecond
	if spent != nil {
		active += time.Duration(spent.WallClockMS) * time.Millisecond
	}
	// The run goes on from the last entry its transcript holds: a runtime
	// that died may have recorded calls after its last checkpoint (a
	// takeover's packet says so: a replay takes those entries as
	// recorded). What those calls spent is the run's too: the budget
	// counts it.
	chain, n, after, owed, err := rt.chainOf(ctx, cp)
	if err != nil {
		return nil, err
	}
	if takeover && owed != nil && rt.mode != ModeReplay {
		// The dead runtime's call in progress was retried after attempts
		// that spent something, and never got its result: what those
		// attempts spent (SaveAttemptsSpent) is charged with the
		// planner's spend, and the takeover's packet records the sum (a
		// replay charges what its packet recorded).
		s := replay.Spent{}
		if spent != nil {
			s = *spent
		}
		s.Tokens = min(s.Tokens+min(max(owed.Tokens, 0), canon.MaxSafeInteger), canon.MaxSafeInteger)
		s.CostCents = min(s.CostCents+min(max(owed.CostCents, 0), canon.MaxSafeInteger), canon.MaxSafeInteger)
		spent = &s
	}
	if !takeover && n > cp.Chain.Seq {
		// A run that paused or stopped saved its checkpoint after its
		// last call: only a runtime that died mid-run leaves entries
		// past it, and that run is taken over, not resumed. An entry
		// past a paused run's checkpoint was written by someone else:
		// a concurrent resume that claimed the run since its checkpoint
		// was read (the checkpoint moved on), else no runtime of the run.
		if c, lerr := rt.opts.Checkpoints.Load(ctx, runID); lerr == nil && c != nil && c.Revision != cp.rev {
			return nil, fmt.Errorf("%w: %s was continued by another runtime since its checkpoint was read: %w", ErrNotResumable, runID, ErrCheckpointConflict)
		}
		return nil, fmt.Errorf("%w: the transcript of %s holds %d entries past its checkpoint, which no runtime of the run recorded: %w", ErrNotResumable, runID, n-cp.Chain.Seq, gateway.ErrChain)
	}
	usage := cp.MeterUsage
	if takeover {
		usage = addUsage(usage, after)
	}
	if spent != nil {
		usage = addUsage(usage, runcontext.Usage{Tokens: spent.Tokens, CostCents: spent.CostCents})
	}
	r := &run{rt: rt, req: cp.Request, rc: cp.Run, clock: clock, cp: cp, emit: emit, long: cp.Request.Mode == runcontext.ModeLongRunning,
		meter: runcontext.RestoreMeter(cp.Run.RunBudget, now.Add(-active), usage), identity: identity, recompiled: true}
	r.keepWorker()
	defer r.releaseWorker()
	r.renewLease(now)
	ctx, r.span = rt.startRunSpan(ctx, cp.Request, cp.Run)
	defer r.span.End()
	var took *replay.Takeover
	if takeover {
		// The store failures the dead runtime saved after the point are
		// the packet's to name, not the replay's to meet (it does not
		// replay that part of the run).
		took = &replay.Takeover{Point: cp.Points, TranscriptEntries: n, Spent: spent, StoreFailures: slices.Clone(cp.FailedSincePoint)}
	}
	if err := r.setupRun(ctx, &chain); err != nil {
		return nil, err
	}
	if cp.Pending != nil {
		approvals := gateApprovals(in.Approvals, cp.Pending.GateID)
		if len(approvals) == 0 && takeover && len(cp.Resumes) > 0 {
			// The run's runtime died resuming it with an approval: the
			// takeover goes on with it (the same action, under the same
			// idempotency key).
			approvals = gateApprovals(cp.Resumes[len(cp.Resumes)-1].Approvals, cp.Pending.GateID)
		}
		if len(approvals) == 0 {
			return nil, fmt.Errorf("%w: run %s awaits an approval on %s and the input has none", ErrResumeInput, runID, cp.Pending.GateID)
		}
		in.Approvals = approvals
	} else {
		in.Approvals = nil
	}
	in.Approvals = redactReasons(in.Approvals)
	cp.Resumes = append(cp.Resumes, replay.Resume{Approvals: in.Approvals, Budget: in.Budget, Takeover: took})
	cp.Stopped, cp.Active = "", true
	// Claim the run, a takeover point holding what the resume read so
	// far: a concurrent resume or takeover elsewhere fails here with
	// ErrCheckpointConflict instead of continuing the run a second time.
	cp.Points++
	r.snapshotInto(cp)
	if err := rt.saveCheckpoint(ctx, cp); err != nil {
		if takeover && errors.Is(err, ErrCheckpointConflict) {
			return nil, fmt.Errorf("%w: %s was taken over by another runtime first: %w", ErrNotResumable, runID, err)
		}
		return nil, fmt.Errorf("contextos: resume %s: %w", runID, err)
	}
	if err := r.replayStop(ctx, true); err != nil {
		return nil, err
	}
	r.awaiting, cp.Pending = cp.Pending, nil
	return r.run(ctx, &in)
}

// gateApprovals are the approvals of in for gate.
func gateApprovals(in []gateway.Approval, gate string) []gateway.Approval {
	var out []gateway.Approval
	for _, a := range in {
		if a.GateID == gate {
			out = append(out, a)
		}
	}
	return out
}

// checkUnconfirmed refuses an unconfirmed record the run could not have
// built at the point its checkpoint stands: one of another run or tenant,
// beside a terminal state, of a status other than a pause's DEFERRED (with
// the approval it awaits) or a terminal DECIDED, REJECTED or ESCALATED, or
// whose id is not the one derived from its decision key, status and the
// run's sequence (the terminal record's is the checkpoint's seq, a pause's
// the one before). A settle stores the record as it stands.
func checkUnconfirmed(cp *checkpointState) error {
	u := cp.Unconfirmed
	if u == nil {
		return nil
	}
	rec := u.Record
	if rec == nil || cp.Terminal || rec.RunID != cp.RunID || rec.TenantID != cp.Run.TenantID {
		return errors.New("its unconfirmed record is missing, of another run or tenant, or beside a terminal state")
	}
	seq := cp.Seq
	switch rec.Status {
	case decision.Deferred:
		if cp.Pending == nil {
			return errors.New("its unconfirmed record is DEFERRED and the run awaits no approval")
		}
		seq--
	case decision.Decided, decision.Rejected, decision.Escalated:
	default:
		return fmt.Errorf("its unconfirmed record is %s, which no run ends or pauses with", rec.Status)
	}
	if id, err := decisionspec.RecordID(cp.RunID, rec.DecisionKey, string(rec.Status), seq); err != nil || id != rec.RecordID {
		return fmt.Errorf("its unconfirmed record's id %s is not the run's record id at sequence %d", rec.RecordID, seq)
	}
	return nil
}

// settle ends a run stopped record_not_stored (cp.Unconfirmed): it claims
// the run, appends the very record the run built (run.append adopts the
// store's copy when the store had kept it after all), then finishes as the
// run would have: open records closed, final checkpoint, replay packet.
// The record is never built again, so the run cannot record a second
// decision, and nothing is planned or called: whenever it happens, the
// run's wall clock does not bound it. A store that fails again leaves the
// run as it was, to settle later. inputsLost marks a record a takeover
// found stored by the runtime that died (the run gets no packet).
func (rt *Runtime) settle(ctx context.Context, cp *checkpointState, inputsLost bool, emit func(Event)) (*Result, error) {
	u := cp.Unconfirmed
	r, err := rt.rebuild(ctx, cp, emit)
	if err != nil {
		return nil, err
	}
	cp.InputsLost = cp.InputsLost || inputsLost
	r.inputsLost = cp.InputsLost
	ctx, r.span = rt.startRunSpan(ctx, cp.Request, cp.Run)
	defer r.span.End()
	cp.Active = true
	// Claim the run: a concurrent settle or resume elsewhere loses here.
	if err := rt.saveCheckpoint(ctx, cp); err != nil {
		failSpan(r.span, "run failed: "+errorType(err))
		if errors.Is(err, ErrCheckpointConflict) {
			return nil, fmt.Errorf("%w: run %s is being settled by another runtime: %w", ErrRunInProgress, cp.RunID, err)
		}
		return nil, fmt.Errorf("contextos: settle %s: %w", cp.RunID, err)
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	stored, err := r.append(ctx, u.Record)
	if err != nil {
		failSpan(r.span, "run failed: record_not_stored")
		cp.Active = false
		if serr := rt.saveCheckpoint(ctx, cp); serr != nil {
			rt.opts.Logger.Error("checkpoint not saved after the record failed again", "run_id", cp.RunID, "error", logWords(serr))
		}
		return nil, fmt.Errorf("contextos: store record: %w", err)
	}
	cp.Unconfirmed, cp.Stopped = nil, u.Stopped
	// The settle's own clock readings (its rebuild's) are no replay
	// input: a replay builds the record where the run built it, reading
	// what that runtime read, and never settles. Kept, they would be
	// served to the next resume's replay in place of its own readings.
	r.clockTaken = len(r.clock.Readings())
	return r.recorded(ctx, u.Record, stored)
}

// confirmPause stores the DEFERRED record of a run whose pause the
// decision store failed without saying whether it kept it
// (cp.Unconfirmed holds a DEFERRED record), or adopts the store's copy,
// and saves the checkpoint without it: the pause is then as if its
// record had been stored at once. It does nothing for any other
// checkpoint.
func (rt *Runtime) confirmPause(ctx context.Context, cp *checkpointState) error {
	u := cp.Unconfirmed
	if u == nil || u.Record.Status != decision.Deferred {
		return nil
	}
	dctx, cancel := detached(ctx)
	defer cancel()
	r := &run{rt: rt, rc: cp.Run}
	if _, err := r.append(dctx, u.Record); err != nil {
		return fmt.Errorf("contextos: store record: %w", err)
	}
	cp.Unconfirmed = nil
	if err := rt.saveCheckpoint(dctx, cp); err != nil {
		return fmt.Errorf("contextos: checkpoint: %w", err)
	}
	return nil
}

// reconcile looks, for a takeover of a run whose runtime died, for the
// run's decision stored before its checkpoint could say so: the last of
// the run's records that is neither CLOSED, nor a pause's or a heartbeat's
// (those are written ahead), nor one the checkpoint knows, nor one a
// CLOSED record closes (an earlier hard stop's ESCALATED record, closed by
// the record of the stop after it, which the checkpoint no longer names).
// Such a record is the run's: the takeover settles the run with it rather
// than plan again and decide twice. A decision store that cannot be read
// fails the takeover; nil means there is none.
func (rt *Runtime) reconcile(ctx context.Context, cp *checkpointState) (*decision.Record, error) {
	recs, err := rt.opts.Decisions.List(ctx, decision.Filter{RunID: cp.RunID})
	if err != nil {
		return nil, fmt.Errorf("contextos: takeover of %s: the decision store cannot say whether the run decided: %w", cp.RunID, err)
	}
	known := append(cp.openRecords(), cp.InFlight)
	for _, rec := range recs {
		if rec.Status == decision.Closed && rec.Closes != "" {
			known = append(known, rec.Closes)
		}
	}
	var found *decision.Record
	for _, rec := range recs {
		switch rec.Status {
		case decision.Decided, decision.Rejected, decision.Escalated:
			if !slices.Contains(known, rec.RecordID) {
				found = rec
			}
		}
	}
	return found, nil
}

// resumeBudget is the budget a resume with budget in gives a run whose
// budget was prev: in, except that each optional limit in leaves unset (0:
// max_session_duration_ms, plan_timeout_ms, max_payload_bytes, whose 0
// otherwise means the default) keeps prev's value. A resume that raises
// max_tool_calls, say, must not thereby lift a 1 h session to the 4 h
// default or loosen a tight payload bound; changing one is explicit. The
// same holds for bucket_tokens as a whole.
func resumeBudget(prev, in runcontext.RunBudget) runcontext.RunBudget {
	keep := func(dst *int64, was int64) {
		if *dst == 0 {
			*dst = was
		}
	}
	keep(&in.MaxSessionDurationMS, prev.MaxSessionDurationMS)
	keep(&in.PlanTimeoutMS, prev.PlanTimeoutMS)
	keep(&in.MaxPayloadBytes, prev.MaxPayloadBytes)
	// No bucket_tokens means no per-bucket cap at all: left out, the
	// run's caps stay (each is changed by naming it, maps.Clone so the
	// checkpoint's run context is not shared).
	if in.BucketTokens == nil {
		in.BucketTokens = maps.Clone(prev.BucketTokens)
	}
	return in
}

// clockFor is the per-run clock: recording for live runs, the packet's
// readings for a replay.
func (rt *Runtime) clockFor(string) *playback.Clock {
	if rt.mode == ModeReplay {
		return rt.replayed.clock
	}
	return playback.RecordingClock(rt.opts.Now)
}

// checkCheckpoint refuses a checkpoint that cannot be continued: one from
// a store that lost or corrupted its request or run context.
func checkCheckpoint(cp *checkpointState) error {
	if cp.Request == nil || cp.Run == nil {
		return fmt.Errorf("contextos: checkpoint of %s is corrupt: it lacks its request or run context", cp.RunID)
	}
	if err := cp.Request.Validate(); err != nil {
		return fmt.Errorf("contextos: checkpoint of %s is corrupt: %w", cp.RunID, err)
	}
	if err := cp.Run.Validate(); err != nil {
		return fmt.Errorf("contextos: checkpoint of %s is corrupt: %w", cp.RunID, err)
	}
	if cp.Run.RunID != cp.RunID {
		return fmt.Errorf("contextos: checkpoint of %s is corrupt: it holds run %s", cp.RunID, cp.Run.RunID)
	}
	if err := checkUnconfirmed(cp); err != nil {
		return fmt.Errorf("contextos: checkpoint of %s is corrupt: %w", cp.RunID, err)
	}
	if _, err := time.Parse(time.RFC3339Nano, cp.StartedAt); err != nil {
		return fmt.Errorf("contextos: checkpoint of %s is corrupt: %w", cp.RunID, err)
	}
	return nil
}

// Capture captures a finished run for replay after the fact — when an
// operator corrects its decision (replay.SourceOperatorCorrection) or it
// is promoted to a golden case (replay.SourceGoldenCase) — and stores the
// packet. It works for any run whose checkpoint, records and transcript
// are still in the stores, sampled or not, and for a paused run (its
// packet replays to the same pause). The packet pins the run's last record
// that is not CLOSED, as the decision store holds it: the packet's
// expected.decision_record_hash is that record's record_hash.
//
// Capture never changes the stored record: records are append-only and
// hash-chained. The record names only the packet captured with it when it
// was stored (its replay.replay_packet_id and lineage.replay_packet_id,
// inside its record_hash); a packet captured later names the record
// (source_ref, expected.decision_record_hash) instead. Packet ids are
// derived from the run, the record and the kind, so
// capturing a record with replay.SourceDecisionRecord gives the packet the
// record names — the way to restore one whose capture failed at the end of
// the run.
func (rt *Runtime) Capture(ctx context.Context, runID string, kind replay.SourceKind) (*replay.Packet, error) {
	if !slices.Contains(replay.SourceKinds(), kind) {
		return nil, fmt.Errorf("%w: source kind %q", ErrConfig, kind)
	}
	cp, err := rt.loadCheckpoint(ctx, runID)
	if err != nil {
		return nil, err
	}
	if !cp.Terminal && cp.Pending == nil && (cp.Stopped == "" || cp.Stopped == notStarted) {
		return nil, fmt.Errorf("%w: run %s has neither ended nor paused", ErrNotResumable, runID)
	}
	if cp.Unconfirmed != nil {
		// Its last record may or may not be stored: a packet would pin
		// the wrong one. Resume or Invoke settles the run first.
		return nil, fmt.Errorf("%w: run %s has a record whose storage is unconfirmed; Resume or Invoke it to settle it, then capture", ErrRunInProgress, runID)
	}
	if cp.InputsLost {
		return nil, fmt.Errorf("%w: run %s was settled by a takeover with the decision its runtime had stored before dying, and that runtime's replay inputs died with it", ErrReplayInputsLost, runID)
	}
	if err := checkCheckpoint(cp); err != nil {
		return nil, err
	}
	r, rec, err := rt.reopen(ctx, cp, nil)
	if err != nil {
		return nil, err
	}
	p, err := r.packet(rec, kind)
	if err != nil {
		return nil, err
	}
	if err := rt.savePacket(ctx, p); err != nil {
		return nil, fmt.Errorf("contextos: store replay packet: %w", err)
	}
	return p, nil
}

// nameReplayPacket writes into rec, before it is appended, the id of the
// packet the run will capture with it, if it will: whether it does is
// decided from the record's status and the run id (run.capture), and the
// id is derived from the run and the record (playback.PacketID), so the
// handle is inside record_hash and the stored record never changes after.
// A capture that then fails leaves the record naming a packet the store
// lacks; it is logged, the result has no ReplayPacketID, and Capture with
// replay.SourceDecisionRecord makes that very packet.
func (r *run) nameReplayPacket(rec *decision.Record) error {
	if !r.capture(rec) {
		return nil
	}
	id, err := playback.PacketID(r.rc.RunID, rec.RecordID, replay.SourceDecisionRecord)
	if err != nil {
		return err
	}
	rec.SetReplayPacketID(id)
	return nil
}

// pinnedRecord is what a packet pins of a stored record: its
// record_hash (the packet's expected.decision_record_hash) and the record
// as the store holds it, chain fields included, so that CheckIntegrity can
// recompute the hash.
func pinnedRecord(rec *decision.Record) (string, json.RawMessage, error) {
	h, err := decision.Hash(rec)
	if err != nil {
		return "", nil, err
	}
	if rec.RecordHash == "" || h != rec.RecordHash {
		return "", nil, fmt.Errorf("contextos: record %s does not match its record_hash: the decision store did not return it as stored", rec.RecordID)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return "", nil, err
	}
	return h, b, nil
}
