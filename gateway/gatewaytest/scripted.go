// Package gatewaytest holds fakes for hosts' unit tests of governed agents
// and the conformance suites of the gateway's plug-in interfaces:
//
//   - ScriptedAdapter: an adapter scripted per capability, by argument
//     matchers, sequences of results, delays, retryable and fatal
//     failures, panics and context-ignoring hangs;
//   - Recorder: a TranscriptSink (and TranscriptReader) that records
//     every entry;
//   - RunAdapterTests, RunIdempotencyStoreTests, RunApprovalLogTests,
//     RunTranscriptSinkTests and RunTranscriptReaderTests: what any
//     implementation must pass.
package gatewaytest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/contextos/contextos/gateway"
)

// ScriptedAdapter is an Adapter whose answers are scripted per capability.
// It is safe for concurrent use and records every call.
type ScriptedAdapter struct {
	mu      sync.Mutex
	scripts []*Script
	calls   []gateway.Call
}

var _ gateway.Adapter = (*ScriptedAdapter)(nil)

// NewScriptedAdapter returns an adapter with no scripts: every call fails
// with unsupported_tool until a script matches.
func NewScriptedAdapter() *ScriptedAdapter { return &ScriptedAdapter{} }

// Script answers the calls of one capability that its matcher accepts.
// Its steps are used in order; the last one repeats.
type Script struct {
	capability string
	match      func(args map[string]any) bool
	steps      []step
	next       int
}

type step struct {
	out       *gateway.Outcome
	err       error
	delay     time.Duration
	ignoreCtx bool
	panics    bool
	block     chan struct{}
	spent     *gateway.Outcome // Spending's cost and tokens
}

// On starts a script for a capability (its name without the adapter id).
// Scripts are tried in the order they were added.
func (s *ScriptedAdapter) On(capability string) *Script {
	sc := &Script{capability: capability}
	s.mu.Lock()
	s.scripts = append(s.scripts, sc)
	s.mu.Unlock()
	return sc
}

// When restricts the script to calls whose arguments match.
func (sc *Script) When(match func(args map[string]any) bool) *Script { sc.match = match; return sc }

// WhenArgs restricts the script to calls whose arguments include every
// given key with an equal value (numbers compare as float64).
func (sc *Script) WhenArgs(want map[string]any) *Script {
	return sc.When(func(args map[string]any) bool {
		for k, v := range want {
			if fmt.Sprint(args[k]) != fmt.Sprint(v) {
				return false
			}
		}
		return true
	})
}

// Return adds a step that returns out.
func (sc *Script) Return(out *gateway.Outcome) *Script {
	sc.steps = append(sc.steps, step{out: out})
	return sc
}

// ReturnOutput adds a step that returns the output (and mutations, for a
// write).
func (sc *Script) ReturnOutput(output map[string]any, mutations ...string) *Script {
	return sc.Return(&gateway.Outcome{Output: output, Mutations: mutations})
}

// Fail adds a step that fails with a non-retryable execution_failed.
func (sc *Script) Fail(message string) *Script {
	return sc.FailWith(gateway.NewToolError(gateway.CodeExecutionFailed, false, message, nil))
}

// FailRetryable adds a step that fails with a retryable execution_failed.
func (sc *Script) FailRetryable(message string) *Script {
	return sc.FailWith(gateway.NewToolError(gateway.CodeExecutionFailed, true, message, nil))
}

// FailWith adds a step that returns err.
func (sc *Script) FailWith(err error) *Script {
	sc.steps = append(sc.steps, step{err: err})
	return sc
}

// Panic adds a step that panics.
func (sc *Script) Panic() *Script {
	sc.steps = append(sc.steps, step{panics: true})
	return sc
}

// Delay makes the last step wait d first (honouring the context).
func (sc *Script) Delay(d time.Duration) *Script {
	sc.steps[len(sc.steps)-1].delay = d
	return sc
}

// Spending makes the last step report what its attempt spent: a step
// that returns an outcome returns it with this cost and these tokens; a
// failing step, or one whose Delay its context cuts off, returns them
// beside its error, as an attempt that failed after spending does (see
// gateway.Adapter), so a test can check that a failure is still charged.
// A step that panics spends nothing: a panic returns nothing.
func (sc *Script) Spending(costCents float64, tokens int) *Script {
	s := &sc.steps[len(sc.steps)-1]
	s.spent = &gateway.Outcome{CostCents: costCents, Tokens: tokens}
	return sc
}

// IgnoreContext makes the last step wait for release (or its delay)
// without honouring the context, as a misbehaving adapter does. Close
// release to let it return.
func (sc *Script) IgnoreContext(release chan struct{}) *Script {
	s := &sc.steps[len(sc.steps)-1]
	s.ignoreCtx, s.block = true, release
	return sc
}

// Call implements gateway.Adapter.
func (s *ScriptedAdapter) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	s.mu.Lock()
	c := *call
	s.calls = append(s.calls, c)
	var st *step
	for _, sc := range s.scripts {
		if sc.capability == call.Capability && (sc.match == nil || sc.match(call.Envelope.Args)) && len(sc.steps) > 0 {
			i := min(sc.next, len(sc.steps)-1)
			sc.next++
			st = &sc.steps[i]
			break
		}
	}
	s.mu.Unlock()
	if st == nil {
		return nil, gateway.NewToolError(gateway.CodeUnsupportedTool, false, "no script for "+call.Capability, nil)
	}
	if st.ignoreCtx {
		if st.block != nil {
			<-st.block
		} else {
			time.Sleep(st.delay)
		}
	} else if st.delay > 0 {
		t := time.NewTimer(st.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if st.spent != nil {
				return &gateway.Outcome{CostCents: st.spent.CostCents, Tokens: st.spent.Tokens}, ctx.Err()
			}
			return nil, ctx.Err()
		}
	}
	if st.panics {
		panic("scripted panic")
	}
	if st.err != nil {
		if st.spent != nil {
			return &gateway.Outcome{CostCents: st.spent.CostCents, Tokens: st.spent.Tokens}, st.err
		}
		return nil, st.err
	}
	out := cloneOutcome(st.out)
	if st.spent != nil {
		out.CostCents, out.Tokens = st.spent.CostCents, st.spent.Tokens
	}
	return out, nil
}

func cloneOutcome(o *gateway.Outcome) *gateway.Outcome {
	if o == nil {
		return &gateway.Outcome{}
	}
	c := *o
	c.Mutations = slices.Clone(o.Mutations)
	c.RiskTags = slices.Clone(o.RiskTags)
	c.Signals = slices.Clone(o.Signals)
	return &c
}

// Calls returns a copy of every call received, in order.
func (s *ScriptedAdapter) Calls() []gateway.Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// CallCount returns how many calls a capability received.
func (s *ScriptedAdapter) CallCount(capability string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.Capability == capability {
			n++
		}
	}
	return n
}

// Reset forgets the recorded calls and rewinds every script.
func (s *ScriptedAdapter) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
	for _, sc := range s.scripts {
		sc.next = 0
	}
}

// Recorder is a TranscriptSink that records every envelope. It keeps
// them as the gateway's in-memory transcript does
// (gateway.MemoryTranscript: by run, encoded in bytes the collector does
// not scan), and the order they came in across runs.
type Recorder struct {
	mu    sync.Mutex
	store *gateway.MemoryTranscript
	runs  map[string]int32 // run id → its index in ids
	last  int32            // the index of the run appended to last
	ids   []string
	kept  []int32    // how many entries each run holds, by index in ids
	order []recorded // every entry, in the order appended
	// Err, when set, is returned by Append (to test transcript failures).
	Err error
}

// recorded is the i-th entry of the run ids[run].
type recorded struct{ run, i int32 }

var _ gateway.TranscriptSink = (*Recorder)(nil)

// Append implements gateway.TranscriptSink.
func (r *Recorder) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Err != nil {
		return r.Err
	}
	if r.store == nil {
		r.store, r.runs = gateway.NewMemoryTranscript(), map[string]int32{}
	}
	// A chained entry at a position the run holds one at would fork its
	// chain: the store refuses it (gateway.ErrPositionTaken), as every
	// sink must (gateway.TranscriptSink).
	if err := r.store.Append(ctx, e); err != nil {
		return err
	}
	run := r.last
	if len(r.ids) == 0 || r.ids[run] != e.RunID {
		var ok bool
		if run, ok = r.runs[e.RunID]; !ok {
			run = int32(len(r.ids))
			r.runs[e.RunID] = run
			r.ids, r.kept = append(r.ids, e.RunID), append(r.kept, 0)
		}
		r.last = run
	}
	r.order = append(r.order, recorded{run: run, i: r.kept[run]})
	r.kept[run]++
	return nil
}

// Entries returns copies of every entry, in the order appended: what the
// caller does to them changes nothing the recorder keeps.
func (r *Recorder) Entries() []gateway.TranscriptEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.store == nil {
		return []gateway.TranscriptEntry{}
	}
	byRun := make([][]gateway.TranscriptEntry, len(r.ids))
	for i, id := range r.ids {
		byRun[i] = r.store.Entries(id)
	}
	out := make([]gateway.TranscriptEntry, len(r.order))
	for i, at := range r.order {
		out[i] = byRun[at.run][at.i]
	}
	return out
}

// RunEntries implements gateway.TranscriptReader: the run's entries only
// are read.
func (r *Recorder) RunEntries(ctx context.Context, runID string) ([]gateway.TranscriptEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.store == nil {
		return nil, nil
	}
	return r.store.RunEntries(ctx, runID)
}

// Calls returns the recorded call envelopes.
func (r *Recorder) Calls() []gateway.ToolCallEnvelope {
	var out []gateway.ToolCallEnvelope
	for _, e := range r.Entries() {
		if e.Call != nil {
			out = append(out, *e.Call)
		}
	}
	return out
}

// Results returns the recorded result envelopes.
func (r *Recorder) Results() []gateway.ToolResultEnvelope {
	var out []gateway.ToolResultEnvelope
	for _, e := range r.Entries() {
		if e.Result != nil {
			out = append(out, *e.Result)
		}
	}
	return out
}
