package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/server"
)

// heldPause is a pause hook (contextos.Options.OnPause) that, once armed,
// waits for release (and says it entered): it holds a run's worker after
// the run's pause is saved, and listed as pending, but before its part
// ends.
type heldPause struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (p *heldPause) hook(context.Context, contextos.PendingApproval) {
	if p.armed.CompareAndSwap(true, false) {
		close(p.entered)
		<-p.release
	}
}

// A decision made on a pause while the worker that paused the run is
// still ending its part (the pause is saved and pending; the worker has
// not yet let go of the run) continues the run when that part ends: it
// is not left for a sweep (off here) to find.
func TestDecisionWhileThePausingPartEndsContinuesTheRun(t *testing.T) {
	held := &heldPause{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, &envOptions{planner: refundThenAnother(), runtime: func(o *contextos.Options) { o.OnPause = held.hook }})
	runID := e.startPaused("req_decided_while_running")
	first := e.pendingDigests(lead)
	if len(first) != 1 {
		t.Fatalf("pending: %v", first)
	}
	// The next pause is the second: its worker waits in the hook.
	held.armed.Store(true)
	if r := e.decide(runID, lead2, server.DecisionApprove, ""); r.status != http.StatusAccepted {
		t.Fatalf("lead2 approves the 2100 refund: %d %s", r.status, r.body)
	}
	<-held.entered
	second := e.pendingDigests(lead)
	if len(second) != 1 || second[0] == first[0] {
		t.Fatalf("the run's second pause is not pending while its part ends: %v", second)
	}
	b, _ := json.Marshal(map[string]string{"decision": server.DecisionDeny, "action_digest": second[0]})
	if r := e.do("POST", "/v1/runs/"+runID+"/approvals/GATE_FINANCE_APPROVAL", e.token(lead), b); r.status != http.StatusAccepted {
		t.Fatalf("a denial of the second pause: %d %s", r.status, r.body)
	}
	close(held.release)
	e.waitEnded(runID)
}

// A decision on a pause whose part is still ending is parked behind that
// part even when every worker slot is taken (here the one slot, by that
// very part): parking takes no slot, the part's worker continues the run
// with it once it ends. Before, the decision needed a free slot first,
// was left for a sweep (off here) and the run stayed paused with its
// decision made.
func TestDecisionWhileThePausingPartEndsOnABusyHandler(t *testing.T) {
	held := &heldPause{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, &envOptions{planner: refundThenAnother(), handler: server.Options{MaxRuns: 1},
		runtime: func(o *contextos.Options) { o.OnPause = held.hook }})
	held.armed.Store(true)
	r := e.do("POST", "/v1/runs", e.token(agent), refundBody(t, "req_decided_busy", 4200), "Prefer", "respond-async")
	if r.status != http.StatusAccepted {
		t.Fatalf("POST /v1/runs: %d %s", r.status, r.body)
	}
	runID := r.json(t)["run_id"].(string)
	<-held.entered // the run's only worker slot is its part's, ending at the pause
	first := e.pendingDigests(lead)
	if len(first) != 1 {
		t.Fatalf("pending: %v", first)
	}
	if r := e.decide(runID, lead2, server.DecisionDeny, ""); r.status != http.StatusAccepted {
		t.Fatalf("lead2 denies the 2100 refund: %d %s", r.status, r.body)
	}
	close(held.release)
	// Denied, the 2100 refund is not made; the run goes on to the 4200 one.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if got := e.pendingDigests(lead); len(got) == 1 && got[0] != first[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the denied pause was not continued: pending %v", e.pendingDigests(lead))
		}
	}
}
