package engine

import (
	"errors"
	"strings"
)

// stopKind is the class of a hard stop: a closed set of words, which the
// run's span carries (never the reason's detail, which may name a
// capability or quote an error). The loop decides with kinds; the reason
// a record and a checkpoint keep is text for people.
type stopKind string

const (
	stopCanceled     stopKind = "canceled"
	stopBudget       stopKind = "budget_exceeded"
	stopSession      stopKind = "session_expired"
	stopLoopGuard    stopKind = "loop_guard"
	stopPlanner      stopKind = "planner_failed"
	stopPlannerPanic stopKind = "planner_panic"
	stopPlanTimeout  stopKind = "plan_timeout"
	stopInvalidPlan  stopKind = "invalid_plan"
	stopInvalidUsage stopKind = "invalid_usage"
	stopCritic       stopKind = "critic_failed"
	stopAdapterPanic stopKind = "adapter_panic"
	stopTranscript   stopKind = "transcript_unavailable"
	stopGatewayStore stopKind = "gateway_store_failed"
	stopPause        stopKind = "unsupported_pause"
)

// stopKinds lists every kind, for stopKindOf.
func stopKinds() []stopKind {
	return []stopKind{stopCanceled, stopBudget, stopSession, stopLoopGuard, stopPlanner, stopPlannerPanic, stopPlanTimeout,
		stopInvalidPlan, stopInvalidUsage, stopCritic, stopAdapterPanic, stopTranscript, stopGatewayStore, stopPause}
}

// stop is why a run hard-stops: its kind, and the reason its record and
// checkpoint say. The zero stop is no stop.
type stop struct {
	kind stopKind
	why  string
}

// stopped is a stop of kind whose reason is the kind's word and detail
// ("budget_exceeded: …").
func stopped(kind stopKind, detail string) stop {
	return stop{kind: kind, why: string(kind) + ": " + detail}
}

// none reports whether s is no stop.
func (s stop) none() bool { return s.kind == "" }

// stopError is a failed stage (a planner turn, a host critic) that stops
// the run.
type stopError struct{ stop stop }

func (e *stopError) Error() string { return e.stop.why }

// stopOf is the stop a failed stage's error carries; an error without one
// stops the run as kind, its text the reason.
func stopOf(err error, kind stopKind) stop {
	var se *stopError
	if errors.As(err, &se) {
		return se.stop
	}
	return stop{kind: kind, why: err.Error()}
}

// stopKindOf is the kind of a reason read back from a replay packet (a
// recorded planner failure), which keeps the reason only: its leading word
// when that is a kind, planner_failed otherwise.
func stopKindOf(why string) stopKind {
	word, _, _ := strings.Cut(why, ":")
	for _, k := range stopKinds() {
		if stopKind(word) == k {
			return k
		}
	}
	return stopPlanner
}
