package contextos

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
// claim (its lease) renewed for Options.HeartbeatTTL. When the run reaches
// its terminal record, every IN_FLIGHT and DEFERRED record it wrote is
// closed by a CLOSED record.

// defaultHeartbeatTTL is how long a long_running run's claim lasts after
// its last heartbeat when Options.HeartbeatTTL is unset.
const defaultHeartbeatTTL = 10 * time.Minute

// ErrLeaseHeld reports a takeover of a long_running run whose lease a live
// runtime is still renewing (errors.Is also matches ErrNotResumable).
var ErrLeaseHeld = errors.New("contextos: run is held by a live runtime")

// heartbeatTTL is the lease a heartbeat grants.
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

// takeLease is Resume's lease check, at now on the resume's clock: a
// takeover of a long_running run whose lease has not yet expired is
// refused (its runtime is alive and heartbeating); otherwise the resuming
// runtime's lease is set on cp, to be saved with its claim.
func (rt *Runtime) takeLease(cp *checkpointState, takeover bool, now time.Time) error {
	if cp.Request == nil || cp.Request.Mode != runcontext.ModeLongRunning {
		return nil
	}
	if cp.Active && takeover && cp.LeaseUntil != "" {
		until, err := time.Parse(time.RFC3339Nano, cp.LeaseUntil)
		if err != nil {
			return fmt.Errorf("contextos: checkpoint of %s is corrupt: lease_until: %w", cp.RunID, err)
		}
		if now.Before(until) {
			return fmt.Errorf("%w: %w: %s heartbeated recently; its lease runs until %s (take it over after that)", ErrNotResumable, ErrLeaseHeld, cp.RunID, cp.LeaseUntil)
		}
	}
	cp.LeaseUntil = now.Add(rt.heartbeatTTL()).UTC().Format(time.RFC3339Nano)
	return nil
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
		r.rt.opts.Logger.Warn("decision record has problems", "run_id", r.rc.RunID, "record_id", rec.RecordID, "error", err.Error())
	}
	u := r.meter.Usage()
	cp.Usage, cp.MeterUsage = PlanUsage{Tokens: u.Tokens, CostCents: u.CostCents}, u
	cp.Chain = r.gwRun.ChainState()
	cp.InFlight = rec.RecordID
	cp.Open = append(cp.Open, rec.RecordID)
	cp.Seq++
	r.renewLease(now)
	sctx, cancel := detached(ctx)
	defer cancel()
	if err := r.rt.saveCheckpoint(sctx, cp); err != nil {
		return fmt.Errorf("contextos: checkpoint: %w", err)
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
