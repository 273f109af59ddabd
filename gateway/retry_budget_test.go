package gateway_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// An attempt that spends past the run's cost budget ends the call's
// retries: the adapter is not called again once the meter is over, for
// the budget is already spent (a payment adapter's retry is another
// charge).
func TestRetriesStopOnceTheCostBudgetIsSpent(t *testing.T) {
	t.Parallel()
	budget := func(_ *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		rc.RunBudget.MaxCostCents = 10
	}
	f := newFixture(t, budget)
	var calls atomic.Int32
	run, meter := meteredRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		calls.Add(1)
		return &gateway.Outcome{CostCents: 50}, gateway.NewToolError(gateway.CodeExecutionFailed, true, "busy", nil)
	}), gateway.Capability{ArgsSchema: lookupSchema, MaxAttempts: 3}, &gateway.Options{Transcript: canonChecked{t, f.recorder}, Sleep: func(context.Context, time.Duration) error { return nil }})
	res, err := run.Call(ctx, lookupCall())
	if err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 || res.Metadata.Attempts != 1 {
		t.Errorf("adapter called %d times (%d attempts recorded) after the first attempt spent 50 of 10 cents; want 1", n, res.Metadata.Attempts)
	}
	if u := meter.Usage(); u.CostCents != 50 {
		t.Errorf("charged %v cents, want the 50 spent", u.CostCents)
	}
}

// So does an attempt that spends past the token budget.
func TestRetriesStopOnceTheTokenBudgetIsSpent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	over := f.rc.RunBudget.TotalTokens + 1
	var calls atomic.Int32
	run, _ := meteredRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		calls.Add(1)
		return &gateway.Outcome{Tokens: over}, gateway.NewToolError(gateway.CodeExecutionFailed, true, "busy", nil)
	}), gateway.Capability{ArgsSchema: lookupSchema, MaxAttempts: 3}, &gateway.Options{Transcript: canonChecked{t, f.recorder}, Sleep: func(context.Context, time.Duration) error { return nil }})
	if _, err := run.Call(ctx, lookupCall()); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("adapter called %d times after the first attempt spent %d of %d tokens; want 1", n, over, over-1)
	}
}

// A capability's declared per-attempt cost is known before each attempt:
// a retry whose cost the budget no longer has is not made.
func TestRetriesStopWhenTheNextAttemptsCostIsNotLeft(t *testing.T) {
	t.Parallel()
	budget := func(_ *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		rc.RunBudget.MaxCostCents = 10
	}
	f := newFixture(t, budget)
	var calls atomic.Int32
	run, meter := meteredRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		calls.Add(1)
		return nil, gateway.NewToolError(gateway.CodeExecutionFailed, true, "busy", nil)
	}), gateway.Capability{ArgsSchema: lookupSchema, MaxAttempts: 3, CostCents: 6}, &gateway.Options{Transcript: canonChecked{t, f.recorder}, Sleep: func(context.Context, time.Duration) error { return nil }})
	if _, err := run.Call(ctx, lookupCall()); err != nil {
		t.Fatal(err)
	}
	if n, u := calls.Load(), meter.Usage(); n != 1 || u.CostCents > 10 {
		t.Errorf("adapter called %d times at 6 cents each, %v cents charged of a 10-cent budget; want 1 call and 6 cents", n, u.CostCents)
	}
}

// Calls made at once on one run share its cost budget: two calls whose
// declared cost the budget holds only once do not both run.
func TestConcurrentCallsShareTheCostBudget(t *testing.T) {
	t.Parallel()
	budget := func(_ *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		rc.RunBudget.MaxCostCents = 10
	}
	f := newFixture(t, budget)
	var calls atomic.Int32
	entered, release := make(chan struct{}, 2), make(chan struct{})
	run, meter := meteredRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		calls.Add(1)
		entered <- struct{}{}
		<-release
		return &gateway.Outcome{Output: map[string]any{}}, nil
	}), gateway.Capability{ArgsSchema: lookupSchema, CostCents: 6, Timeout: time.Minute}, &gateway.Options{Transcript: canonChecked{t, f.recorder}})
	done := make(chan *gateway.ToolResultEnvelope, 2)
	for i := range 2 {
		go func() {
			r := lookupCall()
			r.Step = gateway.StepID{Index: i + 1}
			r.Args = map[string]any{"order_id": "ord_" + string(rune('a'+i))}
			res, _ := run.Call(ctx, r)
			done <- res
		}()
	}
	// Both calls are in the adapter, or one was refused.
	<-entered
	select {
	case <-entered:
	case res := <-done:
		close(release)
		<-done
		if res.Status != gateway.StatusBlocked {
			t.Errorf("the call that did not run is %s, want blocked", res.Status)
		}
		return
	case <-time.After(2 * time.Second):
	}
	close(release)
	<-done
	<-done
	if n, u := calls.Load(), meter.Usage(); n != 1 || u.CostCents > 10 {
		t.Errorf("adapter called %d times at 6 cents each, %v cents charged of a 10-cent budget; want 1", n, u.CostCents)
	}
}
