package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/contextos/contextos/gateway"
)

// Recorder records every adapter attempt of a run as the gateway took it
// (checked, bounded and redacted: it observes through
// gateway.RunOptions.Observe, above the gateway's redaction, so what it
// keeps never holds an adapter's raw value), so a run can be pinned in a
// packet. The clock's readings are recorded by [Clock]. Safe for
// concurrent use.
type Recorder struct {
	mu       sync.Mutex
	outcomes map[string][]Outcome
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{outcomes: map[string][]Outcome{}} }

// Observe records one attempt; pass it as gateway.RunOptions.Observe. A
// panicked attempt is recorded without its value; an invalid outcome with
// only its finite cost and what made it invalid.
func (r *Recorder) Observe(a gateway.Attempt) {
	o := Outcome{ToolCallID: a.ToolCallID, CapabilityID: a.CapabilityID, Attempt: a.Attempt, Canceled: a.Canceled, Redacted: a.Redacted}
	switch {
	case a.Panicked:
		o.Panic = true
	case a.Invalid != nil:
		o.Invalid = slices.Clone(a.Invalid)
		o.Outcome = &gateway.Outcome{}
		if a.Outcome != nil {
			o.Outcome.CostCents = a.Outcome.CostCents
		}
	case a.Error != nil:
		o.Error = a.Error
	case a.Outcome != nil:
		o.Outcome = a.Outcome
	}
	r.add(a.RunID, o)
}

func (r *Recorder) add(runID string, o Outcome) {
	r.mu.Lock()
	r.outcomes[runID] = append(r.outcomes[runID], o)
	r.mu.Unlock()
}

// Outcomes returns the recorded outcomes of a run.
func (r *Recorder) Outcomes(runID string) []Outcome {
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

// ErrRecordedPanic is the value Playback panics with where the recorded
// attempt panicked (the live panic value is never recorded).
var ErrRecordedPanic = errors.New("replay: the recorded adapter attempt panicked")

// Playback is an Adapter that serves recorded outcomes by tool call id and
// attempt, and never calls a live system: a call it has no outcome for is
// refused (and reported by Unserved). Where the recorded attempt panicked,
// Call panics with [ErrRecordedPanic]; where it returned neither an
// outcome nor an error, Call does the same.
type Playback struct {
	mu       sync.Mutex
	outcomes map[string]Outcome
	unserved []string
}

// NewPlayback serves outcomes.
func NewPlayback(outcomes []Outcome) *Playback {
	p := &Playback{outcomes: map[string]Outcome{}}
	for _, o := range outcomes {
		p.outcomes[fmt.Sprintf("%s#%d", o.ToolCallID, o.Attempt)] = o
	}
	return p
}

var (
	_ gateway.Adapter           = (*Playback)(nil)
	_ gateway.RetryStopper      = (*Playback)(nil)
	_ gateway.RedactionReporter = (*Playback)(nil)
)

// Call implements gateway.Adapter.
func (p *Playback) Call(_ context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	key := fmt.Sprintf("%s#%d", call.Envelope.ToolCallID, call.Attempt)
	p.mu.Lock()
	o, ok := p.outcomes[key]
	if !ok {
		p.unserved = append(p.unserved, call.Envelope.CapabilityID+" "+key)
	}
	p.mu.Unlock()
	if !ok {
		return nil, gateway.NewToolError(gateway.CodeExecutionFailed, false, "replay: no recorded outcome for this call; live calls are not allowed", nil)
	}
	switch {
	case o.Panic:
		panic(ErrRecordedPanic)
	case o.Error != nil:
		c := *o.Error
		return nil, &c
	case o.Outcome != nil:
		// The recorded outcome is the gateway's redacted copy: served as
		// is, redacting it again changes nothing, and RedactedAttempt
		// carries the recorded redaction_applied.
		c := *o.Outcome
		for _, f := range o.Invalid {
			switch f {
			case "output":
				c.Output = map[string]any{"invalid": math.NaN()}
			case "cost_cents":
				c.CostCents = math.NaN()
			}
		}
		return &c, nil
	}
	return nil, nil
}

// StopRetrying implements gateway.RetryStopper: no attempt follows one
// after which the recorded run's caller had gone.
func (p *Playback) StopRetrying(call *gateway.Call) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	o, ok := p.outcomes[fmt.Sprintf("%s#%d", call.Envelope.ToolCallID, call.Attempt)]
	return ok && o.Canceled
}

// RedactedAttempt implements gateway.RedactionReporter: the recorded
// attempt's outcome or error was changed by redaction when recorded (the
// served one is already redacted), so the replayed result's
// redaction_applied is the recorded run's.
func (p *Playback) RedactedAttempt(call *gateway.Call) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	o, ok := p.outcomes[fmt.Sprintf("%s#%d", call.Envelope.ToolCallID, call.Attempt)]
	return ok && o.Redacted
}

// Unserved lists the calls playback had no outcome for.
func (p *Playback) Unserved() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.unserved)
}

// Clock records readings of a clock, or serves recorded ones.
type Clock struct {
	mu       sync.Mutex
	now      func() time.Time
	readings []time.Time
	replay   bool
	next     int
}

// RecordingClock wraps now and records each reading.
func RecordingClock(now func() time.Time) *Clock { return &Clock{now: now} }

// RecordingClockFrom continues recording with c's clock, starting a new
// list of readings (c's are kept by the caller). A playback clock is
// returned as is, so a replay keeps serving in order.
func RecordingClockFrom(c *Clock) *Clock {
	if c.replay {
		return c
	}
	return &Clock{now: c.now}
}

// PlaybackClock serves readings in order; past the end it repeats the last.
func PlaybackClock(readings []time.Time) *Clock {
	return &Clock{readings: slices.Clone(readings), replay: true}
}

// Now returns the next reading.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.replay {
		if len(c.readings) == 0 {
			return time.Time{}
		}
		t := c.readings[min(c.next, len(c.readings)-1)]
		c.next++
		return t
	}
	t := c.now()
	c.readings = append(c.readings, t)
	return t
}

// Readings returns the readings so far.
func (c *Clock) Readings() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.readings)
}
