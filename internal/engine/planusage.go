package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/replay"
)

// ErrUsageUnknown reports a planner turn whose model usage the provider
// did not report (a stream that ended without its usage, a response
// without a usage member). A turn of unknown usage fails closed: the run
// stops with "planner_failed: usage_unknown", never charging 0 for a turn
// that spent tokens. A planner returns an error matching it (errors.Is).
var ErrUsageUnknown = errors.New("contextos: the model's usage of the turn is unknown")

// PlanUsageError is a planner turn that failed after the model answered:
// the provider reported Usage (the reply did not parse, was cut off, the
// stream broke after its usage), and the turn failed with Err. The
// runtime charges Usage to the run's token and cost budget before it
// fails the turn, as it charges a plan's: spent tokens are charged once,
// whether the turn succeeded or not. A planner returns it (or an error
// wrapping it) whenever the provider reported usage for a turn it cannot
// turn into a plan. Usage must be valid as Plan.Usage must (counts and
// cost from 0 to 2^53−1); an invalid one is not charged and the turn
// fails with invalid_usage.
//
// The turn's failure is recorded as any planner error's: Err's words go
// to the log, not the record.
type PlanUsageError struct {
	Usage PlanUsage
	Err   error
}

func (e *PlanUsageError) Error() string {
	if e.Err == nil {
		return "contextos: the planner turn failed after the model answered"
	}
	return e.Err.Error()
}

func (e *PlanUsageError) Unwrap() error { return e.Err }

// LateTurnGrace is how long the runtime still waits for a planner turn
// after the turn's context ended (plan_timeout_ms, the run's wall clock,
// the caller's cancellation), for the usage of the answer it will not
// use: a plan that arrives within it, or a PlanUsageError, is charged to
// the run budget before the run's record is written. A planner that has
// not returned by then is abandoned; the run's stop reason says that the
// turn's usage is unknown and was not charged. (A provider may bill a
// request the planner cancelled; nobody can report that usage.)
const LateTurnGrace = 250 * time.Millisecond

// planAnswer is what a planner turn returned.
type planAnswer struct {
	plan *Plan
	err  error
}

// unsettledTurnError is a turn the runtime stopped waiting for whose
// planner had not returned LateTurnGrace after: its usage is unknown.
type unsettledTurnError struct{ err error }

func (e *unsettledTurnError) Error() string { return e.err.Error() }
func (e *unsettledTurnError) Unwrap() error { return e.err }

// lateAnswer is the error of a turn whose answer a came after the turn's
// context ended: ctx's error, carrying the answer's usage to be charged.
func lateAnswer(ctx context.Context, a planAnswer) error {
	var u PlanUsage
	switch {
	case a.err != nil:
		var ue *PlanUsageError
		if !errors.As(a.err, &ue) {
			return ctx.Err()
		}
		u = ue.Usage
	case a.plan != nil:
		u = a.plan.Usage
	}
	if u == (PlanUsage{}) {
		return ctx.Err()
	}
	return &PlanUsageError{Usage: u, Err: ctx.Err()}
}

// awaitAbandoned waits at most LateTurnGrace for the answer of a turn
// whose context ended (see LateTurnGrace).
func awaitAbandoned(ctx context.Context, done <-chan planAnswer) error {
	t := time.NewTimer(LateTurnGrace)
	defer t.Stop()
	select {
	case a := <-done:
		return lateAnswer(ctx, a)
	case <-t.C:
		return &unsettledTurnError{err: ctx.Err()}
	}
}

// failedTurnUsage is the usage a failed turn's error reports: a
// PlanUsageError's, or a recorded failure's in a replay.
func failedTurnUsage(err error) (PlanUsage, bool) {
	var ue *PlanUsageError
	if errors.As(err, &ue) {
		return ue.Usage, true
	}
	var rp *replayedPlanError
	if errors.As(err, &rp) && (rp.tokens != 0 || rp.cents != 0) {
		return PlanUsage{Tokens: rp.tokens, CostCents: rp.cents}, true
	}
	return PlanUsage{}, false
}

// failedTurnReason adds to a failed turn's stop reason what the runtime
// knows of its usage beyond the planner's report.
func failedTurnReason(why string, err error) string {
	var ut *unsettledTurnError
	if errors.As(err, &ut) {
		return why + fmt.Sprintf(" (the planner had not returned %d ms later: the turn's usage is unknown and not charged)", LateTurnGrace.Milliseconds())
	}
	return why
}

// chargeFailedTurn charges the usage u of a failed turn of kind (recorded
// as pe, so a replay charges the same) and returns the turn's stop: pe's
// reason, with the budget the charge exhausted, if any. Usage that is not
// valid is not charged: the turn fails with invalid_usage.
func (r *run) chargeFailedTurn(pe *replay.PlannerError, u PlanUsage, kind stopKind) stop {
	if why := invalidUsage(u); why != "" {
		pe.Reason = why
		return stop{kind: stopInvalidUsage, why: why}
	}
	pe.Tokens, pe.CostCents = u.charged(), u.CostCents
	if s := r.charge(u); !s.none() {
		return stop{kind: kind, why: pe.Reason + "; " + s.why}
	}
	return stop{kind: kind, why: pe.Reason}
}

// invalidUsage says why usage cannot be charged, or "". Counts and cost
// run from 0 to 2^53−1: a larger number is no turn's usage, and the
// record that charged it could not be read back (canon.MaxSafeInteger).
func invalidUsage(u PlanUsage) string {
	if !safeCount(u.Tokens) || !(u.CostCents >= 0 && u.CostCents <= canon.MaxSafeInteger) {
		return fmt.Sprintf("invalid_usage: the planner reported %d tokens and %v cents; usage must be a number from 0 to 2^53−1", u.Tokens, u.CostCents)
	}
	if !safeCount(u.InputTokens) || !safeCount(u.OutputTokens) || !safeCount(u.CachedInputTokens) || u.CachedInputTokens > u.InputTokens {
		return fmt.Sprintf("invalid_usage: the planner reported %d input, %d output and %d cached input tokens; counts must be from 0 to 2^53−1 and cached input is part of input",
			u.InputTokens, u.OutputTokens, u.CachedInputTokens)
	}
	return ""
}

// safeCount reports whether n is a count a record holds exactly.
func safeCount(n int) bool { return n >= 0 && n <= canon.MaxSafeInteger }
