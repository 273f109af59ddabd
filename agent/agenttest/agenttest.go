// Package agenttest owns the test support of package agent: Backend, a
// scripted fake backend for a host's unit tests (it validates with
// agent.Prepare, runs on agent.Start, counts its runs and records the
// prepared requests), and RunBackendTests, the conformance suite every
// backend runs (the built-in codex and claude_code backends, a host's own).
//
// A backend's tests run the suite with a function that sets the backend up
// for each Scenario:
//
//	func TestConformance(t *testing.T) {
//		agenttest.RunBackendTests(t, func(t *testing.T, s agenttest.Scenario) agent.Backend {
//			return newFakeCLIBackend(t, s)
//		})
//	}
package agenttest

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/contextos/contextos/agent"
)

// Script is what a Backend does on each run it accepts.
type Script struct {
	// Defaults are the backend's configured defaults (agent.Prepare).
	Defaults agent.Defaults
	// SpawnErr, when set, fails every run as a process that cannot start:
	// no events but the run's terminal error event, and the completion
	// error "backend error: spawn failed" (SpawnErr is kept as its cause,
	// never printed).
	SpawnErr error
	// Events are emitted in order (each bounded by the run).
	Events []agent.Event
	// Block, after the events, blocks the run until it is cancelled (Cancel,
	// the run's context, its timeout); the completion is then that of a
	// killed process.
	Block bool
	// Completion is the run's completion when Err is nil.
	Completion agent.Completion
	// Err fails the run after the events (an *agent.Error of kind
	// ErrBackend keeps its safe message; any other error is reported as
	// "backend failed").
	Err error
}

// Backend is a scripted fake agent.Backend. It is safe for concurrent use.
type Backend struct {
	kind   agent.Kind
	caps   agent.Capabilities
	script Script

	mu       sync.Mutex
	prepared []*agent.Prepared
}

// New returns a fake backend of kind that advertises caps plus
// agent.CapRun, agent.CapEvents and agent.CapCancel (it honours
// cancellation) and plays script on every run.
func New(kind agent.Kind, caps agent.Capabilities, script Script) *Backend {
	script.Events = slices.Clone(script.Events)
	return &Backend{
		kind:   kind,
		caps:   caps.With(agent.CapRun, agent.CapEvents, agent.CapCancel),
		script: script,
	}
}

// Kind returns the backend's kind.
func (b *Backend) Kind() agent.Kind { return b.kind }

// Capabilities returns what the backend advertises.
func (b *Backend) Capabilities() agent.Capabilities { return b.caps }

// Run validates req with agent.Prepare (refusing it before anything
// starts) and starts the script on agent.Start.
func (b *Backend) Run(ctx context.Context, req agent.RunRequest) (*agent.Run, error) {
	p, err := agent.Prepare(b.kind, b.caps, req, b.script.Defaults)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.prepared = append(b.prepared, p)
	b.mu.Unlock()
	cfg := agent.RunConfig{Kind: b.kind, Capabilities: b.caps, Timeout: p.Timeout}
	return agent.Start(ctx, cfg, b.drive), nil
}

// killed is the completion of a run whose process was killed.
var killed = agent.Completion{Status: agent.ExitStatus{Code: -1, Signal: "killed"}}

func (b *Backend) drive(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
	s := b.script
	if s.SpawnErr != nil {
		return agent.Completion{}, agent.BackendError("spawn failed", s.SpawnErr)
	}
	for _, ev := range s.Events {
		if ctx.Err() != nil {
			return killed, nil
		}
		out.Emit(ev) // false: the consumer stopped reading; the script goes on
	}
	if s.Block {
		<-ctx.Done()
		return killed, nil
	}
	if ctx.Err() != nil {
		return killed, nil
	}
	if s.Err != nil {
		return agent.Completion{}, s.Err
	}
	return s.Completion, nil
}

// Runs is the number of runs the backend accepted (requests that passed
// validation).
func (b *Backend) Runs() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.prepared)
}

// Requests returns the prepared requests of the accepted runs, in order
// (copies).
func (b *Backend) Requests() []agent.Prepared {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]agent.Prepared, len(b.prepared))
	for i, p := range b.prepared {
		out[i] = *p
		out[i].Env = maps.Clone(p.Env)
		out[i].Extensions = maps.Clone(p.Extensions)
		out[i].AddDirs = slices.Clone(p.AddDirs)
		for _, sel := range []**agent.SessionSelector{&out[i].Resume, &out[i].Fork} {
			if *sel != nil {
				cp := **sel
				*sel = &cp
			}
		}
	}
	return out
}
