package gateway

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestAttemptContextReadAfterItsEnd: an adapter may keep its context past
// the attempt (a goroutine it started). Read only after the attempt ended
// and after its deadline or its parent's cancellation came, the lazy
// context is made then; it must still answer as WithDeadline with its
// cancel called at the attempt's end: Canceled, with cause Canceled, for
// itself and for a context derived from it.
func TestAttemptContextReadAfterItsEnd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(cancelParent context.CancelFunc)
	}{
		{"after its deadline", func(context.CancelFunc) { time.Sleep(time.Minute) }},
		{"after its parent was canceled", func(cancelParent context.CancelFunc) { cancelParent() }},
	} {
		for _, derive := range []bool{false, true} {
			t.Run(tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					parent, cancelParent := context.WithCancelCause(context.Background())
					defer cancelParent(nil)
					p := newAttemptPair(parent, 30*time.Second)
					p.end()
					tc.after(func() { cancelParent(errParentGone) })
					synctest.Wait()
					p.same(t, "read after the end", true)
					if derive {
						ca, stopA := context.WithCancel(p.lazy)
						defer stopA()
						cb, stopB := context.WithCancel(p.real)
						defer stopB()
						if a, b := ca.Err(), cb.Err(); a != b {
							t.Errorf("derived Err %v, WithDeadline's %v", a, b)
						}
						if a, b := context.Cause(ca), context.Cause(cb); a != b {
							t.Errorf("derived Cause %v, WithDeadline's %v", a, b)
						}
					}
				})
			})
		}
	}
}
