package engine

import (
	"runtime"
	"testing"
	"testing/synctest"
)

// TestWorkerOutlivesATaskThatEndsItsGoroutine: a planner or compile that
// ends its goroutine (runtime.Goexit: a test planner's t.Fatal, say)
// answers nothing more, but the run's next turn must still be handed off
// and run. Before the run kept one worker, each turn had a goroutine of
// its own; a worker that a task ended must not leave the next hand-off
// blocked for ever (past every deadline of the run).
func TestWorkerOutlivesATaskThatEndsItsGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &run{}
		r.keepWorker()
		defer r.releaseWorker()
		first := make(chan struct{})
		r.handoff(func() {
			defer close(first)
			runtime.Goexit()
		})
		<-first
		second := make(chan struct{})
		r.handoff(func() { close(second) })
		<-second
	})
}
