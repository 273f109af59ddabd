package gateway

import (
	"context"
	"sync"
	"time"
)

// attemptContext is the context of an attempt whose adapter honours its
// context: its parent with the attempt's deadline, done when the attempt
// returns. It answers as context.WithDeadline(parent, deadline) does, with
// its cancel called when the attempt returns, but makes that context (a
// timer and a channel) only when something waits on it: its Done channel
// is asked for, a context derived from it needs to be told when it is
// done, or its cause is read. An adapter that never waits (an in-process
// lookup) costs no timer; one that does gets the context made then.
//
// Until it is made, Err reads the parent's error and the clock (the
// runtime's clock, as the timer the made context would use); once the
// attempt has returned, Err is what it was then, or Canceled.
type attemptContext struct {
	parent   context.Context
	deadline time.Time // the attempt's own (Deadline: the earlier of it and the parent's)

	mu     sync.Mutex
	made   context.Context // nil until made
	cancel context.CancelFunc
	err    error // Err once ended
	ended  bool  // the attempt has returned
	// parentDone: err is the parent's (it was done when the attempt
	// returned).
	parentDone bool
}

var _ context.Context = (*attemptContext)(nil)

// start readies c for an attempt under parent with the given timeout.
func (c *attemptContext) start(parent context.Context, timeout time.Duration) {
	c.parent, c.deadline = parent, time.Now().Add(timeout)
}

// end is the attempt's return: c is done from now on (Canceled, unless it
// was done already).
func (c *attemptContext) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	c.ended = true
	if c.made != nil {
		c.cancel()
		c.err = c.made.Err()
		return
	}
	if c.err = c.parent.Err(); c.err != nil {
		c.parentDone = true
		return
	}
	if c.err = c.liveErr(); c.err == nil {
		c.err = context.Canceled
	}
}

// liveErr is Err of a context not made yet, before the attempt returned.
func (c *attemptContext) liveErr() error {
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// make returns the context this one stands for, making it first (done at
// once when the attempt has returned).
func (c *attemptContext) make() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.made != nil:
	case !c.ended || c.parentDone:
		// A parent done at the end stays done: the made context takes its
		// error and cause.
		c.made, c.cancel = context.WithDeadline(c.parent, c.deadline)
		if c.ended {
			c.cancel()
		}
	case c.err == context.DeadlineExceeded:
		// The deadline had come at the end: made past it, whatever the
		// parent did since (its values kept, not its cancellation).
		c.made, c.cancel = context.WithDeadline(context.WithoutCancel(c.parent), c.deadline)
	default:
		// Canceled at the end, before the deadline or the parent: the made
		// context is Canceled with cause Canceled, whatever came since.
		c.made, c.cancel = context.WithCancel(context.WithoutCancel(c.parent))
		c.cancel()
	}
	return c.made
}

func (c *attemptContext) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *attemptContext) Done() <-chan struct{} { return c.make().Done() }

func (c *attemptContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.ended:
		return c.err
	case c.made != nil:
		return c.made.Err()
	}
	return c.liveErr()
}

// Value is the parent's value for key, except for the context package's
// own key for the cancelable context a context derives from (a *int):
// the package asks for it to link a derived context to this one, and to
// read its cause, and the made context answers it.
func (c *attemptContext) Value(key any) any {
	if _, internal := key.(*int); internal {
		return c.make().Value(key)
	}
	return c.parent.Value(key)
}
