package gateway

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// attemptPair is one scenario run twice: on an attemptContext and on what
// it stands for, context.WithDeadline with its cancel at the attempt's end.
type attemptPair struct {
	lazy *attemptContext
	real context.Context
	stop context.CancelFunc
}

func newAttemptPair(parent context.Context, timeout time.Duration) *attemptPair {
	p := &attemptPair{lazy: new(attemptContext)}
	p.lazy.start(parent, timeout)
	p.real, p.stop = context.WithTimeout(parent, timeout)
	return p
}

func (p *attemptPair) end() { p.lazy.end(); p.stop() }

func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// same holds the two to the same observable state: Err, Deadline, Cause,
// and (when done asks for it, which makes the lazy context) Done.
func (p *attemptPair) same(t *testing.T, step string, done bool) {
	t.Helper()
	if a, b := p.lazy.Err(), p.real.Err(); a != b {
		t.Errorf("%s: Err %v, WithDeadline's %v", step, a, b)
	}
	da, oka := p.lazy.Deadline()
	db, okb := p.real.Deadline()
	if !da.Equal(db) || oka != okb {
		t.Errorf("%s: Deadline %v %v, WithDeadline's %v %v", step, da, oka, db, okb)
	}
	if done {
		if a, b := isDone(p.lazy), isDone(p.real); a != b {
			t.Errorf("%s: done %v, WithDeadline's %v", step, a, b)
		}
		if a, b := context.Cause(p.lazy), context.Cause(p.real); a != b {
			t.Errorf("%s: Cause %v, WithDeadline's %v", step, a, b)
		}
	}
}

func TestAttemptContextAsWithDeadline(t *testing.T) {
	type key struct{}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, parent context.Context, cancelParent context.CancelFunc, p *attemptPair, done bool)
	}{
		{"ended before its deadline", func(t *testing.T, _ context.Context, _ context.CancelFunc, p *attemptPair, done bool) {
			p.same(t, "live", done)
			time.Sleep(time.Second)
			p.same(t, "a second in", done)
			p.end()
			p.same(t, "ended", true)
		}},
		{"past its deadline", func(t *testing.T, _ context.Context, _ context.CancelFunc, p *attemptPair, done bool) {
			time.Sleep(time.Minute)
			synctest.Wait()
			p.same(t, "past the deadline", done)
			p.end()
			p.same(t, "ended", true)
		}},
		{"parent canceled", func(t *testing.T, _ context.Context, cancelParent context.CancelFunc, p *attemptPair, done bool) {
			cancelParent()
			synctest.Wait()
			p.same(t, "parent canceled", done)
			if got := context.Cause(p.lazy); got != errParentGone {
				t.Errorf("Cause %v, want the parent's", got)
			}
			time.Sleep(time.Minute)
			p.end()
			p.same(t, "ended", true)
		}},
		{"waited on", func(t *testing.T, _ context.Context, _ context.CancelFunc, p *attemptPair, _ bool) {
			<-p.lazy.Done()
			<-p.real.Done()
			p.same(t, "after waiting", true)
			p.end()
			p.same(t, "ended", true)
		}},
		{"derived contexts", func(t *testing.T, _ context.Context, _ context.CancelFunc, p *attemptPair, _ bool) {
			ca, stopA := context.WithCancel(p.lazy)
			defer stopA()
			cb, stopB := context.WithCancel(p.real)
			defer stopB()
			if ca.Value(key{}) != "v" {
				t.Errorf("a derived context lost the parent's value: %v", ca.Value(key{}))
			}
			p.end()
			synctest.Wait()
			if a, b := ca.Err(), cb.Err(); a != b || a == nil {
				t.Errorf("derived Err %v, WithDeadline's %v", a, b)
			}
			if a, b := context.Cause(ca), context.Cause(cb); a != b {
				t.Errorf("derived Cause %v, WithDeadline's %v", a, b)
			}
		}},
	} {
		for _, done := range []bool{false, true} {
			t.Run(tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					parent, cancelCause := context.WithCancelCause(context.WithValue(context.Background(), key{}, "v"))
					cancelParent := func() { cancelCause(errParentGone) }
					defer cancelParent()
					p := newAttemptPair(parent, 30*time.Second)
					if p.lazy.Value(key{}) != "v" {
						t.Errorf("Value %v", p.lazy.Value(key{}))
					}
					tc.run(t, parent, cancelParent, p, done)
				})
			})
		}
	}
}

var errParentGone = errors.New("the caller has gone")

// TestAttemptContextParentDeadline: a parent whose deadline is earlier is
// the attempt's deadline, and its expiry the attempt's error.
func TestAttemptContextParentDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, stop := context.WithTimeout(context.Background(), time.Second)
		defer stop()
		p := newAttemptPair(parent, time.Minute)
		p.same(t, "live", false)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		p.same(t, "parent expired", true)
		if !errors.Is(p.lazy.Err(), context.DeadlineExceeded) {
			t.Errorf("Err %v", p.lazy.Err())
		}
		p.end()
		p.same(t, "ended", true)
	})
}

// TestAttemptContextConcurrent: Done, Err and end from several goroutines
// (run under -race).
func TestAttemptContextConcurrent(t *testing.T) {
	c := new(attemptContext)
	c.start(context.Background(), time.Minute)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_ = c.Err()
			<-c.Done()
			if c.Err() != context.Canceled {
				t.Errorf("Err %v after end", c.Err())
			}
		})
	}
	c.end()
	wg.Wait()
}
