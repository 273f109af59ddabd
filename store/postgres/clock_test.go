package postgres_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/internal/pgtest"
	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/store/postgres"
)

// stallingPlanner plans the refund by turn; its first plan waits until
// released (the runtime holding the run is alive and busy).
type stallingPlanner struct {
	entered, release chan struct{}
	stalled          atomic.Bool
}

func (p *stallingPlanner) Plan(_ context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	if !p.stalled.Swap(true) {
		close(p.entered)
		<-p.release
	}
	if req.Turn == 0 {
		return storekit.LookupPlan(), nil
	}
	return storekit.RefundPlan(1200), nil
}

// TestSkewedReplicaCannotTakeALiveRun: a run's claim is counted on the
// server's clock. A replica whose clock (its runtime's and its store
// handle's) is two hours ahead of a live replica's, far past the claim's
// lease, cannot take the run over: ErrLeaseHeld. The live replica ends
// the run once.
func TestSkewedReplicaCannotTakeALiveRun(t *testing.T) {
	for _, mode := range []runcontext.Mode{runcontext.ModeBatch, runcontext.ModeLongRunning} {
		t.Run(string(mode), func(t *testing.T) {
			url := pgtest.URL(t)
			ctx := context.Background()
			p := storekit.NewPayments(t)
			ahead := func() time.Time { return time.Now().Add(2 * time.Hour) }
			replica := func(now func() time.Time, planner contextos.Planner) *contextos.Runtime {
				st, err := postgres.Open(ctx, url, &postgres.Options{Now: now})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				opts := contextos.Options{Adapters: storekit.Adapters(t, p.URL()), Evidence: storekit.Evidence(t), HeartbeatTTL: time.Minute}
				st.Configure(&opts)
				return contextostest.New(t, planner, [][]byte{fixture.SupportPack()}, &contextostest.Options{Now: now, Runtime: opts}).Runtime
			}
			planner := &stallingPlanner{entered: make(chan struct{}), release: make(chan struct{})}
			live := replica(time.Now, planner)
			skewed := replica(ahead, planner)
			req, rc := storekit.RefundRequest(t, "run_skew_"+string(mode), 1200)
			req.Mode = mode
			done := make(chan *contextos.Result, 1)
			go func() {
				res, err := live.Invoke(ctx, req, rc)
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			<-planner.entered
			if _, err := skewed.Resume(ctx, rc.RunID, contextos.ResumeInput{Takeover: true}); !errors.Is(err, contextos.ErrLeaseHeld) {
				t.Errorf("takeover by a replica two hours ahead = %v, want ErrLeaseHeld", err)
			}
			close(planner.release)
			if res := <-done; res == nil || res.Status != decision.Decided {
				t.Fatalf("the live replica's run = %+v", res)
			}
			p.AssertOneEffect(t, 1)
		})
	}
}
