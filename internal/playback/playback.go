package playback

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

// ErrRecordedPanic is the value Playback panics with where the recorded
// attempt panicked (the live panic value is never recorded).
var ErrRecordedPanic = errors.New("replay: the recorded adapter attempt panicked")

// Playback is an Adapter that serves recorded outcomes by tool call id and
// attempt, and never calls a live system: a call it has no outcome for is
// refused (and reported by Unserved). Where the recorded attempt panicked,
// Call panics with [ErrRecordedPanic]; where it returned neither an
// outcome nor an error, Call returns neither (which the gateway refuses
// as it refused the recorded attempt).
type Playback struct {
	mu       sync.Mutex
	outcomes map[string]replay.AdapterOutcome
	unserved []string
}

// NewPlayback serves outcomes.
func NewPlayback(outcomes []replay.AdapterOutcome) *Playback {
	p := &Playback{outcomes: map[string]replay.AdapterOutcome{}}
	for _, o := range outcomes {
		p.outcomes[fmt.Sprintf("%s#%d", o.ToolCallID, o.Attempt)] = o
	}
	return p
}

var (
	_ gateway.Adapter = (*Playback)(nil)
	// The gateway's optional adapter interfaces (unexported there).
	_ interface{ StopRetrying(*gateway.Call) bool }    = (*Playback)(nil)
	_ interface{ RedactedAttempt(*gateway.Call) bool } = (*Playback)(nil)
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
	return Serve(o)
}

// Serve returns what a recorded attempt returned, as an adapter returns
// it: its outcome (made as invalid as it was, see
// replay.AdapterOutcome.Invalid), its error together with what the
// attempt spent, or a panic with ErrRecordedPanic. The outcome is a
// shallow copy of the recorded one.
func Serve(o replay.AdapterOutcome) (*gateway.Outcome, error) {
	switch {
	case o.Panic:
		panic(ErrRecordedPanic)
	case o.Error != nil:
		c := *o.Error
		if o.Outcome != nil {
			// What the failed attempt spent, charged again as it was.
			return &gateway.Outcome{CostCents: o.Outcome.CostCents, Tokens: o.Outcome.Tokens}, &c
		}
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
			case "tokens":
				c.Tokens = -1
			}
		}
		return &c, nil
	}
	return nil, nil
}

// StopRetrying implements the gateway's optional retry stop: no attempt follows one
// after which the recorded run's caller had gone.
func (p *Playback) StopRetrying(call *gateway.Call) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	o, ok := p.outcomes[fmt.Sprintf("%s#%d", call.Envelope.ToolCallID, call.Attempt)]
	return ok && o.Canceled
}

// RedactedAttempt implements the gateway's optional redaction report: the recorded
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
