package gateway

import (
	"context"
	"reflect"
	"testing"
	"testing/synctest"
)

// TestMemoryIdempotencyWaiters: a caller waiting on a held key is woken
// by the holder's Release (and then holds the key) or Complete (and then
// gets the result), whether or not it began waiting before the holder
// finished.
func TestMemoryIdempotencyWaiters(t *testing.T) {
	ctx := context.Background()
	res := &ToolResultEnvelope{ToolCallID: "tool_1"}
	synctest.Test(t, func(t *testing.T) {
		m := NewMemoryIdempotency()
		if _, claimed, _ := m.Claim(ctx, "k"); !claimed {
			t.Fatal("first claim not granted")
		}
		got := make(chan bool, 2)
		for range 2 {
			go func() {
				_, claimed, err := m.Claim(ctx, "k")
				if err != nil {
					t.Error(err)
				}
				got <- claimed
			}()
		}
		synctest.Wait() // both wait on the held key
		if len(got) != 0 {
			t.Fatal("a waiter did not wait")
		}
		if err := m.Release(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		// One waiter holds the key now; the other waits on it.
		if !<-got {
			t.Fatal("no waiter was granted the released key")
		}
		synctest.Wait()
		if len(got) != 0 {
			t.Fatal("both waiters were granted the key")
		}
		if err := m.Complete(ctx, "k", res); err != nil {
			t.Fatal(err)
		}
		if <-got {
			t.Error("the second waiter was granted a completed key")
		}
		// The result as completed, in a copy of the caller's own.
		if prior, claimed, _ := m.Claim(ctx, "k"); claimed || prior == res || !reflect.DeepEqual(prior, res) {
			t.Errorf("after Complete: %v %v", prior, claimed)
		}
	})
}
