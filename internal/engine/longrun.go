package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/runcontext"
)

// Long-running runs (seed 000, "Execution modes"): a long_running run is a
// durable session. Its session is bounded by run_budget.
// max_session_duration_ms, counted on the runtime's clock from the run's
// start across pauses and resumes; it checkpoints before each planner call
// and after each step, and every such checkpoint is a heartbeat: an
// IN_FLIGHT decision record, then the checkpoint naming it, with the run's
// claim (its lease, takeover.go) renewed for Options.HeartbeatTTL. When the
// run reaches its terminal record, every IN_FLIGHT and DEFERRED record it
// wrote is closed by a CLOSED record.

// defaultHeartbeatTTL is how long a long_running run's claim lasts after
// its last heartbeat when Options.HeartbeatTTL is unset.
const defaultHeartbeatTTL = 10 * time.Minute

// ErrLeaseHeld reports a takeover of a run whose claim's lease has not
// lapsed on the checkpoint store's clock: a live runtime may still be
// continuing it (errors.Is also matches ErrNotResumable).
var ErrLeaseHeld = errors.New("contextos: run is held by a live runtime")

// heartbeatTTL is the lease a claim's save grants (Options.HeartbeatTTL).
func (rt *Runtime) heartbeatTTL() time.Duration {
	if rt.opts.HeartbeatTTL > 0 {
		return rt.opts.HeartbeatTTL
	}
	return defaultHeartbeatTTL
}

// sessionLimit is a run's max session duration; a budget without one gets
// the default (a long_running session is never unbounded).
func sessionLimit(b runcontext.RunBudget) time.Duration {
	ms := b.MaxSessionDurationMS
	if ms <= 0 {
		ms = runcontext.DefaultRunBudget().MaxSessionDurationMS
	}
	return time.Duration(ms) * time.Millisecond
}

// sessionOver is the stop of a long_running run whose session is over at
// now, or no stop. The session counts from the run's start (the
// checkpoint's started_at), pauses included.
func (r *run) sessionOver(now time.Time) stop {
	if !r.long {
		return stop{}
	}
	limit := sessionLimit(r.rc.RunBudget)
	start, err := time.Parse(time.RFC3339Nano, r.cp.StartedAt)
	if err != nil {
		// checkCheckpoint refuses such a checkpoint; fail closed anyway.
		return stopped(stopSession, "the run's start time is unreadable, so its session cannot be bounded")
	}
	if elapsed := now.Sub(start); elapsed > limit {
		return stopped(stopSession, fmt.Sprintf("the long_running session has lasted %d ms since it started at %s, over max_session_duration_ms %d; no further tool call is made",
			elapsed.Milliseconds(), r.cp.StartedAt, limit.Milliseconds()))
	}
	return stop{}
}

// renewLease sets a long_running run's lease to now plus the heartbeat TTL.
func (r *run) renewLease(now time.Time) {
	if r.long {
		r.cp.LeaseUntil = now.Add(r.rt.heartbeatTTL()).UTC().Format(time.RFC3339Nano)
	}
}

// checkpoint is a long_running run's progress checkpoint at now, and its
// heartbeat: it builds the IN_FLIGHT record, saves the checkpoint naming
// it (with the usage so far and the lease renewed), then appends the
// record. The checkpoint is saved first, so a record is never stored that
// the run's checkpoint does not list for closing.
func (r *run) checkpoint(ctx context.Context, now time.Time, progress string) error {
	cp := r.cp
	why := fmt.Sprintf("checkpoint of a long_running run at turn %d", cp.planTurn())
	if progress != "" {
		why += ": " + progress
	}
	rec, err := r.build(now, decision.InFlight, nil, why)
	if rec == nil {
		return fmt.Errorf("contextos: in-flight record: %w", err)
	}
	if err != nil {
		r.rt.opts.Logger.Warn("decision record has problems", "run_id", r.rc.RunID, "record_id", rec.RecordID, "error", logWords(err))
	}
	// The checkpoint holds the replay inputs so far: a takeover from it
	// replays (it is a takeover point, run.point).
	r.snapshotInto(cp)
	cp.InFlight = rec.RecordID
	cp.Open = append(cp.Open, rec.RecordID)
	cp.Seq++
	r.renewLease(now)
	sctx, cancel := detached(ctx)
	defer cancel()
	if err := r.rt.saveOwnCheckpoint(sctx, cp); err != nil {
		return r.claimLost(err)
	}
	stored, err := r.append(sctx, rec)
	if err != nil {
		return fmt.Errorf("contextos: store in-flight record: %w", err)
	}
	if progress != "" {
		r.event(Event{Kind: EventProgress, Message: progress})
	}
	r.event(Event{Kind: EventHeartbeat, Record: stored, Message: "lease_until " + cp.LeaseUntil})
	return nil
}

// openRecords are the run's records a CLOSED record must close when the
// run reaches its terminal record: its IN_FLIGHT and DEFERRED records and
// a hard stop's ESCALATED record, in order (Deferred alone, in a
// checkpoint saved before Open existed).
func (cp *checkpointState) openRecords() []string {
	open := slices.Clone(cp.Open)
	if cp.Deferred != "" && !slices.Contains(open, cp.Deferred) {
		open = append(open, cp.Deferred)
	}
	return open
}
