package contextos

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// Resume continues a paused run with what it awaits (an approval), on any
// runtime sharing the checkpoint, decision, idempotency and approval
// stores. Completed side effects are never repeated: finished steps are
// not re-run, the paused call keeps its idempotency key, and approvals are
// checked as in the gateway. The run ends as Invoke's would.
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
	cp, err := rt.opts.Checkpoints.Load(ctx, runID)
	if err != nil {
		return nil, err
	}
	switch {
	case cp.Active && !in.Takeover:
		return nil, fmt.Errorf("%w: %s is being continued by another runtime (set Takeover if that runtime is gone)", ErrNotResumable, runID)
	case cp.Stopped == notStarted:
		return nil, fmt.Errorf("%w: %s never started; invoke it again", ErrNotResumable, runID)
	case cp.Terminal || cp.Pending == nil && cp.Stopped == "" && !cp.Active:
		// An active run with neither a pause nor a stop is one whose
		// runtime died mid-run: a takeover continues it.
		return nil, fmt.Errorf("%w: %s", ErrNotResumable, runID)
	}
	if err := checkCheckpoint(cp); err != nil {
		return nil, err
	}
	if in.Budget != nil {
		next := cp.Run.Clone()
		next.RunBudget = *in.Budget
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
	// wall_clock_ms counts the run's active time: the meter goes on from
	// the time the run had used when it paused, not from its start, so
	// the hours an approval takes are not charged.
	active := time.Duration(cp.MeterUsage.WallClockMS) * time.Millisecond
	r := &run{rt: rt, req: cp.Request, rc: cp.Run, clock: clock, cp: cp, emit: emit, long: cp.Request.Mode == runcontext.ModeLongRunning,
		meter: runcontext.RestoreMeter(cp.Run.RunBudget, now.Add(-active), cp.MeterUsage), identity: identity}
	ctx, r.span = rt.startRunSpan(ctx, cp.Request, cp.Run)
	defer r.span.End()
	chain := cp.Chain
	if cp.Active && in.Takeover {
		// The runtime that died saved no chain: it goes on from the last
		// entry the transcript holds for the run.
		if tr, ok := rt.gw.Transcript().(gateway.TranscriptReader); ok {
			if entries, err := tr.RunEntries(ctx, runID); err == nil && len(entries) > 0 {
				last := entries[len(entries)-1]
				chain = gateway.ChainState{Seq: last.Seq + 1, Hash: last.ChainHash}
			}
		}
	}
	if err := r.setupRun(ctx, &chain); err != nil {
		return nil, err
	}
	if cp.Pending != nil {
		var approvals []gateway.Approval
		for _, a := range in.Approvals {
			if a.GateID == cp.Pending.GateID {
				approvals = append(approvals, a)
			}
		}
		if len(approvals) == 0 {
			return nil, fmt.Errorf("%w: run %s awaits an approval on %s and the input has none", ErrResumeInput, runID, cp.Pending.GateID)
		}
		in.Approvals = approvals
	} else {
		in.Approvals = nil
	}
	cp.Resumes = append(cp.Resumes, replay.Resume{Approvals: in.Approvals, Budget: in.Budget})
	cp.Stopped, cp.Active = "", true
	// Claim the run: a concurrent resume elsewhere fails here with
	// ErrCheckpointConflict instead of continuing the run a second time.
	if err := rt.opts.Checkpoints.Save(ctx, cp); err != nil {
		return nil, fmt.Errorf("contextos: resume %s: %w", runID, err)
	}
	cp.Pending = nil
	return r.run(ctx, &in)
}

// clockFor is the per-run clock: recording for live runs, the packet's
// readings for a replay.
func (rt *Runtime) clockFor(string) *replay.Clock {
	if rt.replayClock != nil {
		return rt.replayClock
	}
	return replay.RecordingClock(rt.opts.Now)
}

// checkCheckpoint refuses a checkpoint that cannot be continued: one from
// a store that lost or corrupted its request or run context.
func checkCheckpoint(cp *Checkpoint) error {
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
// that is not CLOSED.
func (rt *Runtime) Capture(ctx context.Context, runID string, kind replay.SourceKind) (*replay.Packet, error) {
	if !slices.Contains(replay.SourceKinds(), kind) {
		return nil, fmt.Errorf("%w: source kind %q", ErrConfig, kind)
	}
	cp, err := rt.opts.Checkpoints.Load(ctx, runID)
	if err != nil {
		return nil, err
	}
	if !cp.Terminal && cp.Pending == nil && (cp.Stopped == "" || cp.Stopped == notStarted) {
		return nil, fmt.Errorf("%w: run %s has neither ended nor paused", ErrNotResumable, runID)
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
	if err := rt.opts.Replays.Save(ctx, p); err != nil {
		return nil, fmt.Errorf("contextos: store replay packet: %w", err)
	}
	return p, nil
}
