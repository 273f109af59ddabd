package playback

import (
	"slices"
	"sync"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

// Recorder records every adapter attempt of a run as the gateway took it
// (checked, bounded and redacted: it observes through
// gateway.RunOptions.Observe, above the gateway's redaction, so what it
// keeps never holds an adapter's raw value), so a run can be pinned in a
// packet. The clock's readings are recorded by [Clock]. Safe for
// concurrent use.
type Recorder struct {
	mu       sync.Mutex
	outcomes map[string][]replay.AdapterOutcome
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{outcomes: map[string][]replay.AdapterOutcome{}} }

// Observe records one attempt; pass it as gateway.RunOptions.Observe. A
// panicked attempt is recorded without its value; an invalid outcome with
// only its valid cost and tokens and what made it invalid; a failed
// attempt with its error and what it spent.
func (r *Recorder) Observe(a gateway.Attempt) {
	o := replay.AdapterOutcome{ToolCallID: a.ToolCallID, CapabilityID: a.CapabilityID, Attempt: a.Attempt, Canceled: a.Canceled, Redacted: a.Redacted}
	switch {
	case a.Panicked:
		o.Panic = true
	case a.Invalid != nil:
		o.Invalid = slices.Clone(a.Invalid)
		o.Outcome = &gateway.Outcome{}
		if a.Outcome != nil {
			o.Outcome.CostCents, o.Outcome.Tokens = a.Outcome.CostCents, a.Outcome.Tokens
		}
	case a.Error != nil:
		o.Error = a.Error
		if a.Outcome != nil {
			o.Outcome = &gateway.Outcome{CostCents: a.Outcome.CostCents, Tokens: a.Outcome.Tokens}
		}
	case a.Outcome != nil:
		o.Outcome = a.Outcome
	}
	r.add(a.RunID, o)
}

func (r *Recorder) add(runID string, o replay.AdapterOutcome) {
	r.mu.Lock()
	r.outcomes[runID] = append(r.outcomes[runID], o)
	r.mu.Unlock()
}

// Outcomes returns the recorded outcomes of a run.
func (r *Recorder) Outcomes(runID string) []replay.AdapterOutcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.outcomes[runID])
}

// Forget drops a run's outcomes.
func (r *Recorder) Forget(runID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.outcomes, runID)
}
