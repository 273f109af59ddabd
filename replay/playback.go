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
	"github.com/contextos/contextos/internal/jsonv"
)

// Recorder wraps adapters to record every attempt's outcome per run, and
// the clock to record its readings, so a run can be pinned in a packet.
// Safe for concurrent use.
type Recorder struct {
	mu       sync.Mutex
	outcomes map[string][]Outcome
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{outcomes: map[string][]Outcome{}} }

// Wrap returns an adapter that records ad's attempts. An attempt that
// panics is recorded as a panic outcome (without the panic value) and the
// panic continues with its original value, so whoever called the adapter
// (the gateway recovers adapter panics) sees what it would have seen
// without the recorder.
func (r *Recorder) Wrap(ad gateway.Adapter) gateway.Adapter {
	return recorded{ad: ad, call: r.wrapCall(ad)}
}

// recorded is a wrapped adapter; it keeps the optional interfaces of the
// adapter it wraps (gateway.RetryStopper).
type recorded struct {
	ad   gateway.Adapter
	call gateway.AdapterFunc
}

func (w recorded) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	return w.call(ctx, call)
}

// StopRetrying implements gateway.RetryStopper for an adapter that does.
func (w recorded) StopRetrying(call *gateway.Call) bool {
	rs, ok := w.ad.(gateway.RetryStopper)
	return ok && rs.StopRetrying(call)
}

func (r *Recorder) wrapCall(ad gateway.Adapter) gateway.AdapterFunc {
	return gateway.AdapterFunc(func(ctx context.Context, call *gateway.Call) (out *gateway.Outcome, err error) {
		// Read before the call: the adapter may change what call points to.
		runID := call.Envelope.RunID
		o := Outcome{ToolCallID: call.Envelope.ToolCallID, CapabilityID: call.Envelope.CapabilityID, Attempt: call.Attempt}
		done := false
		defer func() {
			if done {
				return
			}
			// Not done: ad.Call panicked (or called runtime.Goexit, which
			// recover does not stop and leaves nothing to record).
			v := recover()
			if v == nil {
				return
			}
			o.Panic = true
			r.add(runID, o)
			panic(v)
		}()
		out, err = ad.Call(ctx, call)
		done = true
		o.Canceled = ctx.Err() != nil
		if err != nil {
			te, ok := err.(*gateway.ToolError)
			if !ok {
				te = gateway.NewToolError(gateway.CodeExecutionFailed, false, "the adapter failed", nil)
			}
			c := *te
			o.Error = &c
		} else if out != nil {
			c := *out
			if !jsonv.Finite(c.Output) {
				c.Output, o.Invalid = nil, append(o.Invalid, "output")
			}
			if math.IsNaN(c.CostCents) || math.IsInf(c.CostCents, 0) {
				c.CostCents, o.Invalid = 0, append(o.Invalid, "cost_cents")
			}
			o.Outcome = &c
		}
		r.add(runID, o)
		return out, err
	})
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

var _ gateway.Adapter = (*Playback)(nil)

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
