package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/server"
)

// A long_running run's resume heartbeats (saves its checkpoint, past the
// pause) before the approved call: a replica that dies between that
// heartbeat and the call leaves the run Active, its checkpoint no longer
// naming the decided pause. A sweep should take it over once the lease
// lapsed, and the approved refund run once.
func TestSweepTakesOverALongRunningRunWhoseReplicaDiedAfterItsHeartbeat(t *testing.T) {
	t.Skip("gap (issue: service takeover of a long_running resume past its pause): the sweep finds only runs " +
		"claimed at the decided pause (engine.ClaimedPauseOf needs Pending); and a runtime takeover of a run " +
		"whose checkpoint moved past the pause (Pending nil) does not carry the last resume's approval, so the " +
		"taken-over run pauses again for a new approval instead of running the approved call (resume.go only " +
		"reuses cp.Resumes' approvals while cp.Pending is set)")
	state := gateway.NewMemoryIdempotency()
	base := newEnv(t, nil)
	dying := &dying{dead: make(chan struct{}), release: make(chan struct{})}
	a := newEnv(t, &envOptions{shared: &shared{h: base.harness, state: state, payments: base.payments, clock: base.clock},
		replica: func(o *contextos.Options) {
			o.Checkpoints = dyingCheckpoints{o.Checkpoints.(contextos.ListingCheckpointStore), dying}
			o.Gateway.Idempotency = dyingIdempotency{o.Gateway.Idempotency, dying}
		}})
	t.Cleanup(func() { close(dying.release) })
	b := newEnv(t, &envOptions{shared: a.replicaOf(state)})
	var body map[string]any
	json.Unmarshal(refundBody(t, "req_takeover_long", 4200), &body)
	body["request"].(map[string]any)["mode"] = "long_running"
	raw, _ := json.Marshal(body)
	r := a.do("POST", "/v1/runs", a.token(agent), raw)
	m := r.json(t)
	if r.status != http.StatusOK || m["state"] != server.StatePaused {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	runID := m["run_id"].(string)
	if r := a.decide(runID, lead, server.DecisionApprove, "ok"); r.status != http.StatusAccepted {
		t.Fatalf("approve through a: %d %s", r.status, r.body)
	}
	select {
	case <-dying.dead:
	case <-time.After(20 * time.Second):
		t.Fatal("replica a never claimed the run")
	}
	a.clock.Advance(10 * time.Minute)
	b.handler.SweepNow(context.Background())
	if m := b.waitEnded(runID); m["status"] != "DECIDED" {
		t.Fatalf("run ended %v", m["status"])
	}
	a.payments.AssertOneEffect(t, 1)
}
