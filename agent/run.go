package agent

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"
)

// EventBuffer is the capacity of a run's event pipe: a backend that gets
// this far ahead of its consumer waits (backpressure).
const EventBuffer = 32

// Driver runs one backend process for Start: it spawns the process, maps
// its output to events it passes to out, waits for the process to exit
// and returns the completion. It must return promptly once ctx is done
// (explicit cancel, the run's timeout, the caller's context), after it
// has terminated the process and waited for it. It keeps reading the
// process's output to its end even when out has stopped forwarding
// (out.Emit returns false): the consumer closed the stream.
//
// A Driver returns an error for a run that failed after it was accepted
// (spawn failure, a runtime refusal, a session not found): an *Error of
// kind ErrBackend whose message is safe; any other error is reported as
// "backend failed" and kept only as a cause. Start emits the one terminal
// error event for it; the driver does not.
type Driver func(ctx context.Context, out *Emitter) (Completion, error)

// RunConfig configures Start.
type RunConfig struct {
	// Kind and Capabilities are the backend's. Cancel is refused unless
	// Capabilities has CapCancel.
	Kind         Kind
	Capabilities Capabilities
	// Timeout bounds the run (0: none). When it passes, the driver's
	// context is done and the completion is the error "timeout" (it
	// wraps context.DeadlineExceeded).
	Timeout time.Duration
}

// Run is the handle of one run: its events (Events), a way to stop
// reading them (Close), explicit cancellation (Cancel) and its completion
// (Wait). A Run is safe for concurrent use; Events has one consumer.
type Run struct {
	kind Kind
	caps Capabilities

	events chan Event    // the bounded pipe; closed when the driver returned
	stop   chan struct{} // closed on Close or Cancel: forwarding and the consumer's stream stop
	final  chan struct{} // closed at stream finality (end, Close or Cancel)
	done   chan struct{} // closed once the completion is resolved
	kill   context.CancelCauseFunc

	stopOnce, finalOnce sync.Once

	mu        sync.Mutex
	cancelled bool  // Cancel (or the caller's context) came first
	cancelErr error // the caller's context error, when that was the cause
	resolved  bool
	comp      Completion
	err       error
}

// errExplicitCancel is the driver context's cause on Cancel.
var errExplicitCancel = errors.New("agent: run cancelled")

// errTimeout is the driver context's cause when the run's timeout passed.
var errTimeout = fmt.Errorf("agent: run timed out: %w", context.DeadlineExceeded)

// Start starts drive in its own goroutine and returns the run's handle at
// once, before the process has started. ctx bounds the run: when it is
// done, the run is cancelled as by Cancel (whatever the capabilities),
// and the completion error wraps ctx's error.
func Start(ctx context.Context, cfg RunConfig, drive Driver) *Run {
	r := &Run{
		kind:   cfg.Kind,
		caps:   cfg.Capabilities,
		events: make(chan Event, EventBuffer),
		stop:   make(chan struct{}),
		final:  make(chan struct{}),
		done:   make(chan struct{}),
	}
	dctx, kill := context.WithCancelCause(context.WithoutCancel(ctx))
	r.kill = kill
	stopParent := context.AfterFunc(ctx, func() { r.requestCancel(context.Cause(ctx)) })
	var timer *time.Timer
	if cfg.Timeout > 0 {
		timer = time.AfterFunc(cfg.Timeout, func() { kill(errTimeout) })
	}
	if ctx.Err() != nil {
		// An ended context cancels the run before its driver starts.
		r.requestCancel(context.Cause(ctx))
	}
	go func() {
		returned := false
		defer func() {
			// A driver that left by runtime.Goexit still resolves the run.
			if !returned {
				r.resolve(Completion{}, BackendError("backend failed"))
			}
			stopParent()
			kill(nil)
		}()
		comp, err := r.drive(dctx, drive, timer)
		r.resolve(comp, err)
		returned = true
	}()
	return r
}

// drive runs the driver, turning a panic into a backend error and a
// timeout into the error "timeout", and sends the terminal error event of
// a failed run before it closes the pipe.
func (r *Run) drive(ctx context.Context, drive Driver, timer *time.Timer) (comp Completion, err error) {
	out := &Emitter{run: r, quit: make(chan struct{})}
	defer func() {
		if p := recover(); p != nil {
			comp, err = Completion{}, BackendError("backend panicked", fmt.Errorf("panic: %v", p))
		}
		// The timeout decides only when it passed before the driver
		// returned (the timer had fired and cannot be stopped).
		if timer != nil && !timer.Stop() && context.Cause(ctx) == errTimeout {
			comp, err = Completion{}, BackendError("timeout", context.DeadlineExceeded)
		}
		var ae *Error
		if err != nil {
			ae = safeError(err)
			err = ae
		}
		out.close(ae, r.isCancelled())
	}()
	return drive(ctx, out)
}

// safeError returns err as an *Error with a safe message: the *Error in
// err's chain (never a wrapper's text), its message bounded, else "backend
// failed" keeping err only as a cause.
func safeError(err error) *Error {
	var ae *Error
	if !errors.As(err, &ae) || ae == nil {
		return BackendError("backend failed", err)
	}
	cp := *ae
	if cp.kind == nil {
		cp.kind = ErrBackend
	}
	cp.Message = clipSafe(redactText(cp.Message))
	if err != error(ae) {
		cp.cause = append(slices.Clip(cp.cause), err)
	}
	return &cp
}

// resolve publishes the completion: "cancelled" when a cancel came before
// it (cancel wins ties), else the driver's.
func (r *Run) resolve(comp Completion, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancelled {
		comp, err = Completion{}, cancelledError(r.cancelErr)
	} else if err == nil {
		comp = redactedCompletion(comp)
	} else {
		comp = Completion{}
	}
	r.comp, r.err, r.resolved = comp, err, true
	close(r.done)
}

func (r *Run) isCancelled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cancelled
}

// Kind is the backend's kind.
func (r *Run) Kind() Kind { return r.kind }

// Events returns the run's events in the order the backend produced them,
// each bounded. The sequence ends when the backend's stream ended, or at
// once when the run was closed or cancelled (events not yet delivered are
// then dropped); leaving the loop early is Close. There is one consumer: a
// second sequence yields only what the first did not.
func (r *Run) Events() iter.Seq[Event] {
	return func(yield func(Event) bool) {
		// However the loop ends — the end of the stream, a break, a panic
		// or runtime.Goexit in its body — the consumer is gone: forwarding
		// stops, so the backend never blocks on a pipe nobody reads.
		defer r.Close()
		for {
			select {
			case <-r.stop:
				return
			default:
			}
			select {
			case ev, ok := <-r.events:
				if !ok {
					return
				}
				select {
				case <-r.stop:
					return
				default:
				}
				if !yield(ev) {
					r.Close()
					return
				}
			case <-r.stop:
				return
			}
		}
	}
}

// Close says the consumer stops reading: the stream ends at once (events
// not yet delivered are dropped), forwarding stops, the backend is still
// read to its end, and Wait no longer waits for the stream. It does not
// cancel the run. Close is idempotent.
func (r *Run) Close() {
	r.stopForwarding()
	r.reachFinality()
}

// Cancel cancels the run explicitly, when the backend advertises
// CapCancel (else it returns ErrUnsupportedCapability and changes
// nothing). The consumer's stream ends at once, the backend is asked to
// terminate its process, and the completion becomes "cancelled" unless it
// was resolved before; Wait still returns only once the process exited.
// Cancel is idempotent, works after Close and is a no-op once the
// completion is resolved.
func (r *Run) Cancel() error {
	if !r.caps.Contains(CapCancel) {
		return unsupported(r.kind, CapCancel)
	}
	r.requestCancel(nil)
	return nil
}

func (r *Run) requestCancel(cause error) {
	r.mu.Lock()
	if r.resolved || r.cancelled {
		r.mu.Unlock()
		return
	}
	r.cancelled, r.cancelErr = true, cause
	r.mu.Unlock()
	r.stopForwarding()
	r.reachFinality()
	if cause == nil {
		cause = errExplicitCancel
	}
	r.kill(cause)
}

func (r *Run) stopForwarding() { r.stopOnce.Do(func() { close(r.stop) }) }

func (r *Run) reachFinality() { r.finalOnce.Do(func() { close(r.final) }) }

// Wait returns the completion once the backend's process exited and the
// event stream reached its end, was closed or was cancelled. The error is
// an *Error: "cancelled" (ErrCancelled) after Cancel or the end of the
// run's context, "timeout" after the run's timeout, or the backend's
// failure. A non-zero exit is a Completion, not an error. If ctx ends
// first, Wait returns ctx's error and the run goes on.
func (r *Run) Wait(ctx context.Context) (Completion, error) {
	if isClosed(r.done) && isClosed(r.final) {
		return r.comp, r.err
	}
	for _, ch := range []chan struct{}{r.done, r.final} {
		select {
		case <-ch:
		case <-ctx.Done():
			return Completion{}, ctx.Err()
		}
	}
	return r.comp, r.err
}

// Done is closed once the completion is resolved (the process exited);
// Wait may still wait for the stream's finality.
func (r *Run) Done() <-chan struct{} { return r.done }

// Emitter is how a Driver passes events to its run. It is safe for
// concurrent use; the pieces of one event stay together.
type Emitter struct {
	run  *Run
	quit chan struct{} // closed when the driver returned

	mu     sync.Mutex
	closed bool // the pipe is closed: Emit drops everything
}

// Emit bounds ev (payload rules, channel, text split, message truncation,
// data size), stamps the run's kind and passes it on, waiting while the
// pipe is full. It returns false, and drops ev, once the consumer closed
// the stream or the run was cancelled: the driver then keeps draining its
// process's output without emitting. After the driver returned, Emit drops
// every event.
func (e *Emitter) Emit(ev Event) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	return e.send(ev, e.quit)
}

// send passes the pieces of ev on, holding e.mu.
func (e *Emitter) send(ev Event, quit <-chan struct{}) bool {
	r := e.run
	for _, piece := range bound(r.kind, ev) {
		select {
		case <-r.stop:
			return false
		case <-quit:
			return false
		default:
		}
		select {
		case r.events <- piece:
		case <-r.stop:
			return false
		case <-quit:
			return false
		}
	}
	return true
}

// close ends the pipe once the driver returned: pending Emits of
// goroutines the driver left behind return, the terminal error event of a
// failed run is sent (unless the run was cancelled or the stream closed),
// and the pipe is closed.
func (e *Emitter) close(err *Error, cancelled bool) {
	close(e.quit)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	if err != nil && !cancelled {
		msg := err.Message
		if err.kind != ErrBackend {
			msg = err.Error()
		}
		e.send(Event{Kind: EventError, Channel: "error", Message: msg}, nil)
	}
	close(e.run.events)
}

// Forwarding reports whether events are still forwarded.
func (e *Emitter) Forwarding() bool {
	select {
	case <-e.run.stop:
		return false
	case <-e.quit:
		return false
	default:
		return true
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
