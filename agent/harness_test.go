package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/contextos/contextos/agent"
)

const hk agent.Kind = "toy"

var withCancel = agent.NewCapabilities(agent.CapRun, agent.CapEvents, agent.CapCancel)

func start(t *testing.T, ctx context.Context, caps agent.Capabilities, d agent.Driver) *agent.Run {
	t.Helper()
	return agent.Start(ctx, agent.RunConfig{Kind: hk, Capabilities: caps}, d)
}

// pending reports whether Wait has not resolved (probing with a done context).
func pending(run *agent.Run) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := run.Wait(ctx)
	return errors.Is(err, context.Canceled)
}

func status(i int) agent.Event {
	return agent.Event{Kind: agent.EventStatus, Message: fmt.Sprint(i)}
}

func drain(run *agent.Run) []agent.Event {
	var evs []agent.Event
	for ev := range run.Events() {
		evs = append(evs, ev)
	}
	return evs
}

func TestPumpForwardsInOrder(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const n = 1000
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		for i := range n {
			if !out.Emit(status(i)) {
				return agent.Completion{}, errors.New("dropped")
			}
		}
		return agent.Completion{FinalText: "done"}, nil
	})
	evs := drain(run)
	if len(evs) != n {
		t.Fatalf("%d events, want %d", len(evs), n)
	}
	for i, ev := range evs {
		if ev.Message != fmt.Sprint(i) || ev.AgentKind != hk || ev.Kind != agent.EventStatus {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
	if comp, err := run.Wait(t.Context()); err != nil || comp.FinalText != "done" || !comp.Status.Success() {
		t.Fatalf("Wait() = %+v, %v", comp, err)
	}
}

func TestPumpBlocksUnderBackpressureUntilReceiverPolls(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	filled, extra := make(chan struct{}), make(chan struct{})
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		for i := range agent.EventBuffer {
			out.Emit(status(i))
		}
		close(filled) // EventBuffer events sit in the pipe, none read
		out.Emit(status(agent.EventBuffer))
		close(extra)
		return agent.Completion{}, nil
	})
	<-filled
	select {
	case <-extra:
		t.Fatal("an event past the buffer was accepted before the consumer read")
	default:
	}
	next, stop := iter.Pull(run.Events())
	defer stop()
	if ev, ok := next(); !ok || ev.Message != "0" {
		t.Fatalf("first event %+v", ev)
	}
	<-extra // one read made room
	for i := 1; i <= agent.EventBuffer; i++ {
		if ev, ok := next(); !ok || ev.Message != fmt.Sprint(i) {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
	if _, ok := next(); ok {
		t.Fatal("an event past the end")
	}
	if _, err := run.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestPumpStopsForwardingAfterCloseButDrainsToEnd(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const n = 200
	var emitted, forwarded atomic.Int32
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		for i := range n {
			emitted.Add(1)
			if out.Emit(status(i)) {
				forwarded.Add(1)
			}
		}
		if out.Forwarding() {
			return agent.Completion{}, errors.New("still forwarding after Close")
		}
		return agent.Completion{FinalText: "drained"}, nil
	})
	for ev := range run.Events() {
		if ev.Message != "0" {
			t.Fatalf("first event %+v", ev)
		}
		break // leaving the loop is Close
	}
	comp, err := run.Wait(t.Context())
	if err != nil || comp.FinalText != "drained" {
		t.Fatalf("Wait() = %+v, %v", comp, err)
	}
	if emitted.Load() != n || forwarded.Load() > agent.EventBuffer+2 {
		t.Fatalf("emitted %d, forwarded %d", emitted.Load(), forwarded.Load())
	}
	if evs := drain(run); len(evs) != 0 {
		t.Fatalf("%d events after Close", len(evs))
	}
}

func TestEventsEndAtOnceOnClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	release := make(chan struct{})
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		for i := range 5 {
			out.Emit(status(i))
		}
		<-release
		return agent.Completion{}, nil
	})
	next, stop := iter.Pull(run.Events())
	defer stop()
	if _, ok := next(); !ok {
		t.Fatal("no event")
	}
	run.Close()
	// Four events are buffered and the backend is still running: the
	// stream must still end now, not when the backend exits.
	if ev, ok := next(); ok {
		t.Fatalf("event %+v after Close", ev)
	}
	close(release)
	if _, err := run.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestPumpEnforcesBoundsBeforeForwarding(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	text := strings.Repeat("é", agent.MaxTextBytes)
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		out.Emit(agent.Event{AgentKind: "spoof", Kind: agent.EventTextOutput, Channel: strings.Repeat("c", 200), Text: text, Message: "m"})
		out.Emit(agent.Event{Kind: agent.EventStatus, Message: strings.Repeat("m", 5000), Data: json.RawMessage(`"` + strings.Repeat("d", agent.MaxDataBytes) + `"`)})
		return agent.Completion{FinalText: strings.Repeat("f", agent.MaxFinalTextBytes+1), Data: json.RawMessage(`[` + strings.Repeat(`1,`, agent.MaxDataBytes) + `1]`)}, nil
	})
	evs := drain(run)
	if len(evs) != 3 {
		t.Fatalf("%d events, want 2 text pieces and a status", len(evs))
	}
	if evs[0].Text+evs[1].Text != text || evs[0].Channel != "" || evs[0].Message != "" || evs[0].AgentKind != hk {
		t.Errorf("text pieces not bounded: %d+%d bytes", len(evs[0].Text), len(evs[1].Text))
	}
	if len(evs[2].Message) != agent.MaxMessageBytes || string(evs[2].Data) != `{"dropped":{"reason":"oversize"}}` {
		t.Errorf("status not bounded: %d bytes, data %.40s", len(evs[2].Message), evs[2].Data)
	}
	comp, err := run.Wait(t.Context())
	if err != nil || len(comp.FinalText) != agent.MaxFinalTextBytes || string(comp.Data) != `{"dropped":{"reason":"oversize"}}` {
		t.Errorf("completion not bounded: %d bytes, %.40s, %v", len(comp.FinalText), comp.Data, err)
	}
}

func TestCompletionIsPendingUntilEventsStreamIsDrained(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		out.Emit(status(0))
		out.Emit(status(1))
		return agent.Completion{FinalText: "x"}, nil
	})
	<-run.Done() // the backend exited
	if !pending(run) {
		t.Fatal("Wait resolved before the stream was drained")
	}
	next, stop := iter.Pull(run.Events())
	defer stop()
	next()
	next()
	if !pending(run) {
		t.Fatal("Wait resolved before the stream reached its end")
	}
	if _, ok := next(); ok {
		t.Fatal("a third event")
	}
	if comp, err := run.Wait(t.Context()); err != nil || comp.FinalText != "x" {
		t.Fatalf("Wait() = %+v, %v", comp, err)
	}
}

func TestClosingEventsUnblocksCompletion(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		for i := range 3 * agent.EventBuffer {
			out.Emit(status(i))
		}
		return agent.Completion{FinalText: "x"}, nil
	})
	run.Close()
	run.Close()
	if comp, err := run.Wait(t.Context()); err != nil || comp.FinalText != "x" {
		t.Fatalf("Wait() = %+v, %v", comp, err)
	}
}

func TestWaitReturnsTheContextErrorAndTheRunGoesOn(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	release := make(chan struct{})
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		<-release
		return agent.Completion{FinalText: "late"}, nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := run.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait(done ctx) = %v", err)
	}
	close(release)
	drain(run)
	if comp, err := run.Wait(t.Context()); err != nil || comp.FinalText != "late" {
		t.Fatalf("Wait() = %+v, %v", comp, err)
	}
}

func TestCancellationClosesEventsButDoesNotAccelerateCompletion(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	release := make(chan struct{})
	var terminations atomic.Int32
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		for i := range 10 {
			out.Emit(status(i))
		}
		<-ctx.Done() // the process is asked to terminate…
		terminations.Add(1)
		if !errors.Is(context.Cause(ctx), context.Canceled) && context.Cause(ctx) == nil {
			return agent.Completion{}, errors.New("no cause")
		}
		<-release // …and takes its time to exit
		return agent.Completion{FinalText: "exited"}, nil
	})
	next, stop := iter.Pull(run.Events())
	defer stop()
	if _, ok := next(); !ok {
		t.Fatal("no event")
	}
	for range 3 {
		if err := run.Cancel(); err != nil {
			t.Fatal(err)
		}
	}
	if ev, ok := next(); ok {
		t.Fatalf("event %+v after Cancel (9 were buffered)", ev)
	}
	if !pending(run) {
		t.Fatal("Wait resolved before the backend exited")
	}
	select {
	case <-run.Done():
		t.Fatal("Done closed before the backend exited")
	default:
	}
	close(release)
	_, err := run.Wait(t.Context())
	if err == nil || err.Error() != "backend error: cancelled" || !errors.Is(err, agent.ErrCancelled) || !errors.Is(err, agent.ErrBackend) {
		t.Fatalf("Wait() = %v", err)
	}
	if terminations.Load() != 1 {
		t.Errorf("terminated %d times", terminations.Load())
	}
	if err := run.Cancel(); err != nil {
		t.Errorf("Cancel after completion = %v", err)
	}
}

func TestCancelOverridesBackendError(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		<-ctx.Done()
		return agent.Completion{}, agent.BackendError("session not found")
	})
	if err := run.Cancel(); err != nil {
		t.Fatal(err)
	}
	if evs := drain(run); len(evs) != 0 {
		t.Errorf("events %+v after Cancel", evs)
	}
	if _, err := run.Wait(t.Context()); err == nil || err.Error() != "backend error: cancelled" {
		t.Fatalf("Wait() = %v", err)
	}
}

func TestCompletionPreservesBackendOutcomeWhenCompletionWins(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		return agent.Completion{Status: agent.ExitStatus{Code: 3}}, nil
	})
	drain(run)
	comp, err := run.Wait(t.Context())
	if err != nil || comp.Status.Code != 3 {
		t.Fatalf("Wait() = %+v, %v", comp, err)
	}
	if err := run.Cancel(); err != nil {
		t.Fatal(err)
	}
	if comp2, err := run.Wait(t.Context()); err != nil || comp2.Status != comp.Status {
		t.Fatalf("Cancel changed a resolved completion: %+v, %v", comp2, err)
	}
}

func TestCancelAfterCloseAndWithoutEvents(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	started := make(chan struct{})
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		close(started) // startup in flight: no event yet
		<-ctx.Done()
		return agent.Completion{}, agent.BackendError("spawn failed")
	})
	<-started
	run.Close()
	if err := run.Cancel(); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Wait(t.Context()); !errors.Is(err, agent.ErrCancelled) {
		t.Fatalf("Wait() = %v", err)
	}
}

func TestContextEndIsCancel(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, caps := range []agent.Capabilities{withCancel, {}} {
		ctx, cancel := context.WithCancel(t.Context())
		run := start(t, ctx, caps, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
			out.Emit(status(0))
			<-ctx.Done()
			return agent.Completion{Status: agent.ExitStatus{Code: -1, Signal: "killed"}}, nil
		})
		next, stop := iter.Pull(run.Events())
		next()
		cancel()
		for _, ok := next(); ok; _, ok = next() {
		}
		stop()
		_, err := run.Wait(t.Context())
		if err == nil || err.Error() != "backend error: cancelled" || !errors.Is(err, agent.ErrCancelled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait() = %v", err)
		}
	}
	// An already-ended context cancels at once.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	run := start(t, ctx, withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		<-ctx.Done()
		return agent.Completion{}, nil
	})
	drain(run)
	if _, err := run.Wait(t.Context()); !errors.Is(err, agent.ErrCancelled) {
		t.Fatalf("Wait() = %v", err)
	}
}

func TestSpawnFailuresSurfaceViaRunHandle(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		return agent.Completion{}, agent.BackendError("spawn failed", errors.New("exec /bin/"+secret+": not found"))
	})
	evs := drain(run)
	if len(evs) != 1 || evs[0].Kind != agent.EventError || evs[0].Channel != "error" || evs[0].Message != "spawn failed" {
		t.Fatalf("events %+v, want one error event", evs)
	}
	_, err := run.Wait(t.Context())
	wantErr(t, err, agent.ErrBackend, "backend error: spawn failed")
}

func TestStartupFailurePrefersCancelledWhenCancelArrivesBeforeFailureSurfaces(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		<-ctx.Done()
		return agent.Completion{}, agent.BackendError("spawn failed")
	})
	if err := run.Cancel(); err != nil {
		t.Fatal(err)
	}
	if evs := drain(run); len(evs) != 0 {
		t.Fatalf("events %+v", evs)
	}
	_, err := run.Wait(t.Context())
	wantErr(t, err, agent.ErrCancelled, "backend error: cancelled")
}

func TestStartupFailurePrefersCancelledWhileErrorSendIsBackpressured(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	returning := make(chan struct{})
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		for i := range agent.EventBuffer {
			out.Emit(status(i))
		}
		close(returning) // the pipe is full: the terminal error event must wait
		return agent.Completion{}, agent.BackendError("spawn failed")
	})
	<-returning
	if err := run.Cancel(); err != nil {
		t.Fatal(err)
	}
	if evs := drain(run); len(evs) != 0 {
		t.Fatalf("%d events after Cancel", len(evs))
	}
	_, err := run.Wait(t.Context())
	wantErr(t, err, agent.ErrCancelled, "backend error: cancelled")
}

func TestDriverErrorsAreSafe(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cause := errors.New(secret)
	cases := []struct {
		name  string
		drive func() (agent.Completion, error)
		kind  error
		want  string // the completion error; the terminal event's message is the same without the prefix
		event string
	}{
		{"raw_error", func() (agent.Completion, error) {
			return agent.Completion{FinalText: secret}, fmt.Errorf("stderr: %s", secret)
		},
			agent.ErrBackend, "backend error: backend failed", "backend failed"},
		{"backend_error", func() (agent.Completion, error) {
			return agent.Completion{}, agent.BackendError("session not found", cause)
		},
			agent.ErrBackend, "backend error: session not found", "session not found"},
		{"wrapped_backend_error", func() (agent.Completion, error) {
			return agent.Completion{}, fmt.Errorf("line %q: %w", secret, agent.BackendError("no session found", cause))
		}, agent.ErrBackend, "backend error: no session found", "no session found"},
		{"wrapped_invalid_request", func() (agent.Completion, error) {
			return agent.Completion{}, fmt.Errorf("%s: %w", secret, agent.InvalidRequest("invalid agent_api.exec.add_dirs.v1"))
		}, agent.ErrInvalidRequest, "invalid request: invalid agent_api.exec.add_dirs.v1", "invalid request: invalid agent_api.exec.add_dirs.v1"},
		{"panic", func() (agent.Completion, error) { panic(secret) }, agent.ErrBackend, "backend error: backend panicked", "backend panicked"},
		{"long_message", func() (agent.Completion, error) {
			return agent.Completion{}, agent.BackendError(strings.Repeat("x", 5000))
		},
			agent.ErrBackend, "backend error: " + strings.Repeat("x", agent.MaxMessageBytes-len(agent.TruncatedSuffix)) + agent.TruncatedSuffix,
			strings.Repeat("x", agent.MaxMessageBytes-len(agent.TruncatedSuffix)) + agent.TruncatedSuffix},
		{"invalid_utf8_message", func() (agent.Completion, error) { return agent.Completion{}, agent.BackendError("bad \xff") },
			agent.ErrBackend, "backend error: bad \uFFFD", "bad \uFFFD"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) { return c.drive() })
			evs := drain(run)
			comp, err := run.Wait(t.Context())
			wantErr(t, err, c.kind, c.want)
			var ae *agent.Error
			if !errors.As(err, &ae) {
				t.Fatalf("%T is not an *agent.Error", err)
			}
			if comp.FinalText != "" {
				t.Error("a failed run kept its completion")
			}
			if len(evs) != 1 || evs[0].Kind != agent.EventError || evs[0].Message != c.event {
				t.Fatalf("events %+v, want one terminal error event %q", evs, c.event)
			}
		})
	}
}

func TestTimeoutIsABackendErrorWithATerminalEvent(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, driverErr := range []error{nil, agent.BackendError("killed by signal"), errors.New(secret)} {
		run := agent.Start(t.Context(), agent.RunConfig{Kind: hk, Capabilities: withCancel, Timeout: time.Millisecond},
			func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
				out.Emit(status(0))
				<-ctx.Done()
				return agent.Completion{Status: agent.ExitStatus{Code: -1, Signal: "killed"}}, driverErr
			})
		evs := drain(run)
		_, err := run.Wait(t.Context())
		wantErr(t, err, agent.ErrBackend, "backend error: timeout")
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, agent.ErrCancelled) {
			t.Errorf("timeout error %v does not wrap DeadlineExceeded (or is cancelled)", err)
		}
		if len(evs) != 2 || evs[1].Kind != agent.EventError || evs[1].Message != "timeout" {
			t.Fatalf("events %+v, want a status and the terminal timeout event", evs)
		}
	}
	// A run that ends before its timeout is unaffected.
	run := agent.Start(t.Context(), agent.RunConfig{Kind: hk, Timeout: time.Hour}, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		return agent.Completion{FinalText: "quick"}, nil
	})
	drain(run)
	if comp, err := run.Wait(t.Context()); err != nil || comp.FinalText != "quick" {
		t.Fatalf("Wait() = %+v, %v", comp, err)
	}
}

func TestEmitAfterDriverReturnedIsDropped(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var leaked *agent.Emitter
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		leaked = out
		return agent.Completion{}, nil
	})
	<-run.Done()
	if leaked.Emit(status(1)) || leaked.Forwarding() {
		t.Error("Emit after the driver returned was accepted")
	}
	if evs := drain(run); len(evs) != 0 {
		t.Fatalf("events %+v", evs)
	}

	// An emitter blocked in a goroutine the driver left behind is released.
	blocked := make(chan bool)
	run = start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		for i := range agent.EventBuffer {
			out.Emit(status(i))
		}
		go func() { blocked <- out.Emit(status(99)) }()
		return agent.Completion{}, nil
	})
	if <-blocked {
		t.Error("a leftover Emit was forwarded after the driver returned")
	}
	if evs := drain(run); len(evs) != agent.EventBuffer {
		t.Fatalf("%d events", len(evs))
	}
}

func TestConcurrentEmitKeepsPiecesTogether(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	big := func(c string) agent.Event {
		return agent.Event{Kind: agent.EventTextOutput, Text: strings.Repeat(c, 3*agent.MaxTextBytes)}
	}
	run := start(t, t.Context(), withCancel, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		var wg sync.WaitGroup
		for _, c := range []string{"a", "b", "c", "d"} {
			wg.Go(func() { out.Emit(big(c)) })
		}
		wg.Wait()
		return agent.Completion{}, nil
	})
	evs := drain(run)
	if len(evs) != 12 {
		t.Fatalf("%d events", len(evs))
	}
	for i := 0; i < len(evs); i += 3 {
		if evs[i].Text[0] != evs[i+1].Text[0] || evs[i].Text[0] != evs[i+2].Text[0] {
			t.Fatalf("pieces of different events interleave at %d", i)
		}
	}
	if _, err := run.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
}
