package server_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/server"
	"go.uber.org/goleak"
)

// A replica whose resume of a decided run renewed its claim past the
// approved call (a planner turn after the refund, half the lease on) and
// then died leaves an Active checkpoint no longer at the pause: the
// run's decision was the service's, yet no sweep takes it over (it is
// out of the pending index and ClaimedPauseOf is nil), so the run is
// never continued — promise "a dead replica's decided run is continued
// once, never zero" does not hold for a run that is not long_running
// either. Skipped until the sweep takes over runs claimed mid-run.
func TestSweepTakesOverADecidedRunWhoseReplicaDiedAfterRenewingItsClaim(t *testing.T) {
	t.Skip("known gap: a decided run whose replica renewed its claim past the pause and died is never taken over by a sweep (hr19)")
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	state := gateway.NewMemoryIdempotency()
	base := newEnv(t, nil)
	dead, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	pl := contextos.PlannerFunc(func(ctx context.Context, r *contextos.PlanRequest) (*contextos.Plan, error) {
		switch r.Turn {
		case 0:
			return storekit.LookupPlan(), nil
		case 1:
			p := storekit.RefundPlan(4200)
			p.Decision = nil
			return p, nil
		}
		once.Do(func() { close(dead) })
		<-release
		return nil, errors.New("test: the replica is dead")
	})
	ttl := func(o *contextos.Options) { o.HeartbeatTTL = 8 * time.Second }
	a := newEnv(t, &envOptions{shared: &shared{h: base.harness, state: state, payments: base.payments, clock: base.clock}, planner: pl, runtime: ttl})
	t.Cleanup(func() { close(release) })
	b := newEnv(t, &envOptions{shared: a.replicaOf(state), runtime: ttl})
	base.payments.OnEffect(func(string) { base.clock.Advance(5 * time.Second) }) // past half the lease: the next point renews the claim
	runID := a.startPaused("req_takeover_midrun")
	if r := a.decide(runID, lead, server.DecisionApprove, "ok"); r.status != http.StatusAccepted {
		t.Fatalf("approve through a: %d %s", r.status, r.body)
	}
	select {
	case <-dead:
	case <-time.After(20 * time.Second):
		t.Fatal("replica a never reached the turn after the refund")
	}
	base.clock.Advance(10 * time.Minute)
	b.handler.SweepNow(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := b.do("GET", "/v1/runs/"+runID, b.token(agent), nil).json(t); m["state"] == server.StateEnded {
			a.payments.AssertOneEffect(t, 1)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the dead replica's decided run was never taken over: %v", b.do("GET", "/v1/runs/"+runID, b.token(agent), nil).json(t)["state"])
}
