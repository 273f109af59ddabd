package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/engine"
	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/server"
	"go.uber.org/goleak"
)

// dying is a replica that dies right after a resume claimed a run: the
// claim's checkpoint is saved, and the replica's next gateway call (the
// approved refund) never comes back (until the test ends, when it fails)
// — the replica neither runs the call nor renews its claim.
type dying struct {
	claimed atomic.Bool
	dead    chan struct{} // closed when the replica stops
	release chan struct{} // closed at the test's end
	once    sync.Once
}

var errDead = errors.New("test: the replica is dead")

type dyingCheckpoints struct {
	contextos.ListingCheckpointStore
	d *dying
}

func (s dyingCheckpoints) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	if cl, err := engine.ClaimedPauseOf(cp); err == nil && cl != nil {
		defer s.d.claimed.Store(true)
	}
	return s.ListingCheckpointStore.Save(ctx, cp)
}

type dyingIdempotency struct {
	gateway.IdempotencyStore
	d *dying
}

func (s dyingIdempotency) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	if s.d.claimed.Load() {
		s.d.once.Do(func() { close(s.d.dead) })
		<-s.d.release
		return nil, false, errDead
	}
	return s.IdempotencyStore.Claim(ctx, key)
}

// A replica that dies after a resume's claim (its checkpoint Active, at
// the decided pause) leaves the run to the sweep of another: not while
// the claim's lease lasts, then taken over once it lapsed, by one of two
// replicas sweeping at once. The run ends DECIDED with the decider in
// its record and the refund runs once.
func TestSweepTakesOverARunWhoseReplicaDiedAfterItsClaim(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // after every replica closed
	state := gateway.NewMemoryIdempotency()
	base := newEnv(t, nil)
	dying := &dying{dead: make(chan struct{}), release: make(chan struct{})}
	a := newEnv(t, &envOptions{shared: &shared{h: base.harness, state: state, payments: base.payments, clock: base.clock},
		replica: func(o *contextos.Options) {
			o.Checkpoints = dyingCheckpoints{o.Checkpoints.(contextos.ListingCheckpointStore), dying}
			o.Gateway.Idempotency = dyingIdempotency{o.Gateway.Idempotency, dying}
		}})
	t.Cleanup(func() { close(dying.release) }) // before a's Close (cleanups run last first)
	b := newEnv(t, &envOptions{shared: a.replicaOf(state)})
	c := newEnv(t, &envOptions{shared: a.replicaOf(state)})
	runID := a.startPaused("req_takeover_1")
	if r := a.decide(runID, lead, server.DecisionApprove, "ok"); r.status != http.StatusAccepted {
		t.Fatalf("approve through a: %d %s", r.status, r.body)
	}
	select {
	case <-dying.dead:
	case <-time.After(20 * time.Second):
		t.Fatal("replica a never claimed the run")
	}
	ctx := context.Background()
	// While the claim's lease lasts, no sweep takes the run, even past
	// the sweep's grace.
	a.clock.Advance(10 * time.Second)
	b.handler.SweepNow(ctx)
	if m := b.do("GET", "/v1/runs/"+runID, b.token(agent), nil).json(t); m["state"] == server.StateEnded {
		t.Fatalf("taken over while the claim's lease lasted: %v", m)
	}
	a.clock.Advance(10 * time.Minute)
	var wg sync.WaitGroup
	for _, e := range []*env{b, c} {
		wg.Add(1)
		go func() { defer wg.Done(); e.handler.SweepNow(ctx) }()
	}
	wg.Wait()
	m := b.waitEnded(runID)
	if m["status"] != "DECIDED" {
		m = c.waitEnded(runID)
	}
	if m["status"] != "DECIDED" {
		t.Fatalf("taken-over run ended %v", m["status"])
	}
	approvals := m["decision_record"].(map[string]any)["approvals"].([]any)
	if len(approvals) != 1 || approvals[0].(map[string]any)["approver"] != lead.sub {
		t.Errorf("record approvals %v", approvals)
	}
	a.payments.AssertOneEffect(t, 1)
	if n := packetTakeovers(t, b, runID); n != 1 {
		t.Errorf("the run was taken over %d times, want 1", n)
	}
	// Nothing is left to take over.
	b.handler.SweepNow(ctx)
	c.handler.SweepNow(ctx)
	a.payments.AssertOneEffect(t, 1)
}

// A live replica's resume is never taken over while it renews its claim:
// another replica sweeps during the approved call (the checkpoint is
// still the claim at the decided pause) and at every later planner turn,
// the clock moving 5 seconds each time against a lease of 8 — past the
// claim's first lease — and it never tries a takeover: the run ends
// DECIDED through the replica that claimed it, the refund run once.
func TestSweepLeavesALiveResumeThatRenewsItsClaim(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // after every replica closed
	state := gateway.NewMemoryIdempotency()
	base := newEnv(t, nil)
	var b *env
	var swept atomic.Int32
	ctx := context.Background()
	pl := contextos.PlannerFunc(func(_ context.Context, r *contextos.PlanRequest) (*contextos.Plan, error) {
		switch {
		case r.Turn == 0:
			return storekit.LookupPlan(), nil
		case r.Turn == 1:
			p := storekit.RefundPlan(4200)
			p.Decision = nil
			return p, nil
		case r.Turn <= 4:
			base.clock.Advance(5 * time.Second)
			b.handler.SweepNow(ctx)
			swept.Add(1)
			return storekit.LookupPlan(), nil
		}
		return &contextos.Plan{Decision: storekit.RefundPlan(4200).Decision}, nil
	})
	ttl := func(o *contextos.Options) { o.HeartbeatTTL = 8 * time.Second }
	a := newEnv(t, &envOptions{shared: &shared{h: base.harness, state: state, payments: base.payments, clock: base.clock}, planner: pl, runtime: ttl})
	logs := &logBuffer{}
	b = newEnv(t, &envOptions{shared: a.replicaOf(state), runtime: ttl, handler: server.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}})
	base.payments.OnEffect(func(string) {
		base.clock.Advance(5 * time.Second)
		b.handler.SweepNow(ctx)
		swept.Add(1)
	})
	runID := a.startPaused("req_takeover_live")
	base.clock.Advance(time.Minute)
	if r := a.decide(runID, lead, server.DecisionApprove, "ok"); r.status != http.StatusAccepted {
		t.Fatalf("approve through a: %d %s", r.status, r.body)
	}
	m := a.waitEnded(runID)
	if m["status"] != "DECIDED" {
		t.Fatalf("run ended %v: %v", m["status"], m["decision_record"].(map[string]any)["rationale"])
	}
	if swept.Load() != 4 {
		t.Fatalf("b swept %d times during the run, want 4", swept.Load())
	}
	if strings.Contains(logs.String(), "taking over") {
		t.Errorf("b tried a takeover of a live run: %s", logs)
	}
	if r := b.do("GET", "/v1/runs/"+runID, b.token(agent), nil).json(t); r["status"] != "DECIDED" {
		t.Errorf("b's view: %v", r["status"])
	}
	a.payments.AssertOneEffect(t, 1)
	if pkts := packetTakeovers(t, a, runID); pkts != 0 {
		t.Errorf("the run was taken over %d times", pkts)
	}
}

// packetTakeovers counts the takeovers the run's replay packet records.
func packetTakeovers(t *testing.T, e *env, runID string) int {
	t.Helper()
	p, err := e.harness.Runtime.Capture(context.Background(), runID, replay.SourceOperatorCorrection)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range p.Resumes {
		if r.Takeover != nil {
			n++
		}
	}
	return n
}

// countingCheckpoints counts what a handler reads of a checkpoint store
// that keeps the pending index.
type countingCheckpoints struct {
	*contextos.InMemoryCheckpoints
	loads, lists atomic.Int32
}

func (s *countingCheckpoints) Load(ctx context.Context, runID string) (*contextos.Checkpoint, error) {
	s.loads.Add(1)
	return s.InMemoryCheckpoints.Load(ctx, runID)
}

func (s *countingCheckpoints) RunIDs(ctx context.Context) ([]string, error) {
	s.lists.Add(1)
	return s.InMemoryCheckpoints.RunIDs(ctx)
}

// A sweep's look for runs to take over costs in proportion to the runs
// at a pause, not to the runs stored: over a store keeping the pending
// index, with twenty ended runs and one paused, it never lists every
// run and reads no ended run's checkpoint.
func TestSweepReadsOnlyTheRunsAtAPause(t *testing.T) {
	var counting *countingCheckpoints
	e := newEnv(t, &envOptions{checkpoints: func(c contextos.CheckpointLister) contextos.CheckpointLister {
		counting = &countingCheckpoints{InMemoryCheckpoints: c.(*contextos.InMemoryCheckpoints)}
		return counting
	}})
	const ended = 20
	for i := range ended {
		runID := e.startPaused(fmt.Sprintf("req_sweep_cost_%d", i))
		if r := e.decide(runID, lead, server.DecisionDeny, "no"); r.status != http.StatusAccepted {
			t.Fatalf("deny: %d %s", r.status, r.body)
		}
		e.waitEnded(runID)
	}
	e.startPaused("req_sweep_cost_paused")
	counting.loads.Store(0)
	counting.lists.Store(0)
	e.clock.Advance(10 * time.Minute)
	e.handler.SweepNow(context.Background())
	if n := counting.lists.Load(); n != 0 {
		t.Errorf("the sweep listed every run %d times", n)
	}
	if n := counting.loads.Load(); n > 4 {
		t.Errorf("the sweep read %d checkpoints with one run at a pause among %d", n, ended+1)
	}
}
