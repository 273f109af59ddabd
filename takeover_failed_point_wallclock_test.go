package contextos_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/gateway"
)

// evalRetryAdapter is retrySaveAdapter whose policy check's first
// attempt brings the store back and fails retryably having spent tokens
// (a spend save before the retry), and whose second attempt freezes.
type evalRetryAdapter struct {
	retrySaveAdapter
	entered, release chan struct{}
	evals            int
}

func (a *evalRetryAdapter) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	if call.Capability == "eval" {
		return &gateway.Outcome{Output: map[string]any{"eligible": true}, Tokens: 300}, nil
	}
	if call.Capability == "issue_refund" {
		a.mu.Lock()
		a.evals++
		n := a.evals
		a.mu.Unlock()
		switch n {
		case 1:
			a.cps.down.Store(false)
			return &gateway.Outcome{Tokens: 50}, gateway.NewToolError(gateway.CodeExecutionFailed, true, "try again", nil)
		case 2:
			close(a.entered)
			<-a.release
		}
	}
	return a.retrySaveAdapter.Call(ctx, call)
}

// After a point whose state save failed while the claim held, a spend
// save writes the state last saved with the spend since it: the wall
// clock it saves must be counted from that state's meter reading, not
// from the failed point's snapshot (which was never saved). Otherwise a
// takeover charges less wall clock than the run used.
func TestASpendSaveAfterAFailedPointSaveKeepsTheWallClock(t *testing.T) {
	clock := newFakeClock()
	cps := &outageCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
	cps.Now = clock.Now
	a := &evalRetryAdapter{retrySaveAdapter: retrySaveAdapter{slowCallAdapter{slow: "none", clock: clock, cps: cps, counts: map[string]int{}}},
		entered: make(chan struct{}), release: make(chan struct{})}
	var o contextostest.Options
	o.Now = clock.Now
	o.Runtime.Checkpoints = cps
	noWait := func(string, int) time.Duration { return 0 }
	o.Runtime.Adapters = []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": {Backoff: noWait, MaxAttempts: 3}}},
		{AdapterID: "adp_policy", Adapter: a, Capabilities: map[string]gateway.Capability{"eval": {Backoff: noWait, MaxAttempts: 2}}},
		{AdapterID: "adp_payments", Adapter: a, Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}, Backoff: noWait, MaxAttempts: 2}}},
	}
	h := bareHarness(t, newTurnPlanner(1200, 0), &o)
	req, rc := refundRequest(t, 1200, true)
	rc.RunBudget.WallClockMS = contextos.DefaultHeartbeatTTL.Milliseconds() * 4
	stalled := make(chan error, 1)
	go func() {
		_, err := h.Runtime.Invoke(context.Background(), req, rc)
		stalled <- err
	}()
	<-a.entered
	got, err := cps.InMemoryCheckpoints.Load(context.Background(), rc.RunID)
	close(a.release)
	<-stalled
	if err != nil || got == nil {
		t.Fatalf("load: %v", err)
	}
	var data struct {
		MeterUsage struct {
			WallClockMS int64 `json:"wall_clock_ms"`
		} `json:"meter_usage"`
		Spent *struct {
			WallClockMS int64 `json:"wall_clock_ms"`
			Tokens      int   `json:"tokens"`
		} `json:"spent_since_point"`
	}
	if err := json.Unmarshal(got.Data, &data); err != nil {
		t.Fatal(err)
	}
	if data.Spent == nil {
		t.Fatalf("no spend saved: %s", got.Data)
	}
	t.Logf("rev %d version %d", got.Revision, got.Version)
	if i := len(got.Data) - 600; i > 0 {
		t.Logf("%s", got.Data[i:])
	}
	used := data.MeterUsage.WallClockMS + data.Spent.WallClockMS
	want := (contextos.DefaultHeartbeatTTL * 6 / 10).Milliseconds()
	t.Logf("saved meter wall clock %d ms + spent since %d ms (tokens since %d); the run used at least %d ms", data.MeterUsage.WallClockMS, data.Spent.WallClockMS, data.Spent.Tokens, want)
	if used < want {
		t.Errorf("a takeover would charge %d ms of wall clock, the run used at least %d ms (lost: the spend save counted from the failed point's unsaved meter reading)", used, want)
	}
}
