package server_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/server"
)

// A decision whose replica stopped before it continued the run (the
// decision is stored, the run still paused) is continued by a sweep once
// the grace has passed — by exactly one of two replicas sweeping at once
// — and the run ends DECIDED with the decider in its record; a second
// decision is refused meanwhile.
func TestSweepContinuesAnOrphanedDecision(t *testing.T) {
	state := gateway.NewMemoryIdempotency()
	base := newEnv(t, nil)
	a := newEnv(t, &envOptions{shared: &shared{h: base.harness, state: state, payments: base.payments, clock: base.clock}})
	b := newEnv(t, &envOptions{shared: a.replicaOf(state)})
	runID := a.startPaused("req_sweep_1")
	ctx := context.Background()
	pend, err := a.harness.Runtime.PendingApprovals(ctx, contextos.RunList{runID})
	if err != nil || len(pend) != 1 {
		t.Fatalf("pending: %v %v", pend, err)
	}
	if err := a.handler.OrphanDecision(ctx, pend[0], lead.sub, a.clock.Now()); err != nil {
		t.Fatal(err)
	}
	b.decide(runID, lead2, server.DecisionApprove, "").problem(t, http.StatusConflict, server.CodeAlreadyDecided)

	// Within the grace the sweep leaves it to its worker.
	a.handler.SweepNow(ctx)
	if m := a.do("GET", "/v1/runs/"+runID, a.token(agent), nil).json(t); m["state"] != server.StatePaused {
		t.Fatalf("swept within the grace: %v", m["state"])
	}
	a.clock.Advance(time.Minute)
	var wg sync.WaitGroup
	for _, e := range []*env{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); e.handler.SweepNow(ctx) }()
	}
	wg.Wait()
	m := a.waitEnded(runID)
	if m["status"] != "DECIDED" {
		t.Fatalf("swept run ended %v", m["status"])
	}
	approvals := m["decision_record"].(map[string]any)["approvals"].([]any)
	if len(approvals) != 1 || approvals[0].(map[string]any)["approver"] != lead.sub {
		t.Errorf("record approvals %v", approvals)
	}
	a.payments.AssertOneEffect(t, 1)
	// Nothing is left to sweep.
	a.handler.SweepNow(ctx)
	b.handler.SweepNow(ctx)
	a.payments.AssertOneEffect(t, 1)
}
