package engine

// A run's planner turns and compiles run on a goroutine of their own, so
// the run can stop waiting for one that ignores its context (a planner
// past plan_timeout_ms, a compile past wall_clock_ms) and go on without
// it. An Invoke or Resume hands them all to one worker goroutine for the
// whole run rather than starting one per turn: the worker's stack grows
// once, not once per turn, and no goroutine is started after the first.
// A worker left running a task the run stopped waiting for is let go (it
// ends when the task does) and the next hand-off starts a new one.

// handoff runs task on the run's worker: on a goroutine that is not the
// run's, started for it unless the run keeps a worker (keepWorker) that
// is free. The caller waits for the task's answer on a channel of its
// own, or for its context, whichever comes first; a caller that stops
// waiting calls abandonWorker.
func (r *run) handoff(task func()) {
	if !r.keepsWorker {
		go task()
		return
	}
	if r.work == nil {
		r.work = make(chan func())
		go work(r.work)
	}
	r.work <- task // the worker is free: the run waited for its last task
}

// work runs tasks until its channel is closed. A task that ends its
// goroutine (runtime.Goexit: a planner's t.Fatal, say) ends this worker
// with it; another takes the tasks on, so the next hand-off is run as it
// was when each task had a goroutine of its own.
func work(tasks <-chan func()) {
	growStack(0)
	closed := false
	defer func() {
		if !closed {
			go work(tasks)
		}
	}()
	for task := range tasks {
		task()
	}
	closed = true
}

// keepWorker makes the run hand its turns and compiles to one worker; the
// caller must call releaseWorker when the run returns.
func (r *run) keepWorker() { r.keepsWorker = true }

// abandonWorker lets the worker go: it is running a task the run stopped
// waiting for, and ends once that task returns.
func (r *run) abandonWorker() {
	if r.work != nil {
		close(r.work)
		r.work = nil
	}
}

// releaseWorker ends the run's worker (once its task, if any, returns).
func (r *run) releaseWorker() {
	r.abandonWorker()
	r.keepsWorker = false
}

// workerStack is about the stack a worker's tasks reach: a compile, with
// its policy evaluation, and a planner turn (a 16 KiB stack, with the
// runtime's guard). Measured: BenchmarkInvokeRefund's stack growths went
// from ≈ 45 k instructions a run to ≈ 8 k, with 12 or 24 KiB alike.
const workerStack = 12 << 10

// growStack grows a new worker's stack to workerStack at once, while it
// holds no more than a frame or two. A goroutine starts on a small stack
// that doubles as a call needs it; in the middle of a compile, each growth
// copies the stack and adjusts every frame on it (with the GC's table
// lookups), which cost a run more than the one growth here. i is 0; it
// only keeps the array from being optimized away.
//
//go:noinline
func growStack(i int) byte {
	var b [workerStack]byte
	b[i] = 1
	return b[i/2]
}
