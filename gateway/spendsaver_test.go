package gateway_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/gatewayhook"
	"github.com/contextos/contextos/runcontext"
)

// savedSpend is one SaveAttemptsSpent call.
type savedSpend struct {
	id     string
	seq    int
	cents  float64
	tokens int
}

// spendSaver is the module runtime's side of gatewayhook.SaveSpent, as a
// test sees it: it keeps what it is told and fails the save numbered
// failAt (from 1; 0: none) with errTakenOver.
type spendSaver struct {
	saves  []savedSpend
	failAt int
}

var errTakenOver = errors.New("test: the run was taken over")

func (s *spendSaver) SaveAttemptsSpent(_ context.Context, id string, seq int, cents float64, tokens int) error {
	s.saves = append(s.saves, savedSpend{id, seq, cents, tokens})
	if len(s.saves) == s.failAt {
		return errTakenOver
	}
	return nil
}

// savingRun binds f's run to a gateway whose adp_orders serves lookup
// with ad, told to save spend between attempts with saver.
func savingRun(t *testing.T, f *fixture, ad gateway.Adapter, lookup gateway.Capability, saver *spendSaver) *gateway.Run {
	t.Helper()
	gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: ad, Capabilities: map[string]gateway.Capability{"lookup": lookup}}},
		&gateway.Options{Transcript: f.recorder, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	opts := &gateway.RunOptions{}
	gatewayhook.SaveSpent(opts, saver)
	run, err := gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// Before each retry of a call whose attempt spent something, the run's
// saver is told what the attempts spent so far (each attempt's declared
// cost and what it reported), with the call's id and the sequence of its
// call entry; the result reports the same sums.
func TestSpendIsSavedBeforeEachRetry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var calls atomic.Int32
	saver := &spendSaver{}
	run := savingRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		if calls.Add(1) == 3 {
			return &gateway.Outcome{Output: map[string]any{"order_id": "ord_881"}, CostCents: 2, Tokens: 10}, nil
		}
		return &gateway.Outcome{CostCents: 2, Tokens: 10}, gateway.NewToolError(gateway.CodeExecutionFailed, true, "busy", nil)
	}), gateway.Capability{ArgsSchema: lookupSchema, MaxAttempts: 3, CostCents: 1}, saver)
	res, err := run.Call(ctx, lookupCall())
	if err != nil {
		t.Fatal(err)
	}
	want := []savedSpend{{res.ToolCallID, 0, 3, 10}, {res.ToolCallID, 0, 6, 20}}
	if len(saver.saves) != len(want) || saver.saves[0] != want[0] || saver.saves[1] != want[1] {
		t.Errorf("saves = %+v, want %+v", saver.saves, want)
	}
	if res.Metadata.CostCents != 9 || res.Metadata.Tokens != 30 || res.Metadata.Attempts != 3 {
		t.Errorf("result reports %v cents, %d tokens, %d attempts; want 9, 30, 3", res.Metadata.CostCents, res.Metadata.Tokens, res.Metadata.Attempts)
	}
}

// A retried attempt that spent nothing (no declared cost, nothing
// reported) costs no save.
func TestNoSaveForARetryThatSpentNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	saver := &spendSaver{}
	run := savingRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		return nil, gateway.NewToolError(gateway.CodeExecutionFailed, true, "busy", nil)
	}), gateway.Capability{ArgsSchema: lookupSchema, MaxAttempts: 3}, saver)
	res, err := run.Call(ctx, lookupCall())
	if err != nil {
		t.Fatal(err)
	}
	if len(saver.saves) != 0 || res.Metadata.Attempts != 3 {
		t.Errorf("%d saves over %d attempts that spent nothing; want none over 3", len(saver.saves), res.Metadata.Attempts)
	}
}

// A save that fails (the run was taken over) ends the call there: no
// further attempt, no result in the transcript (its call entry stays),
// and Call returns the saver's error.
func TestFailedSaveAbandonsTheCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var calls atomic.Int32
	saver := &spendSaver{failAt: 2}
	run := savingRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		calls.Add(1)
		return &gateway.Outcome{Tokens: 10}, gateway.NewToolError(gateway.CodeExecutionFailed, true, "busy", nil)
	}), gateway.Capability{ArgsSchema: lookupSchema, MaxAttempts: 5}, saver)
	_, err := run.Call(ctx, lookupCall())
	if !errors.Is(err, errTakenOver) {
		t.Fatalf("Call = %v, want the saver's error", err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("adapter called %d times, want 2 (none after the failed save)", n)
	}
	entries := f.recorder.Entries()
	if len(entries) != 1 || entries[0].Kind != "call" {
		t.Errorf("transcript holds %d entries, want the call entry alone", len(entries))
	}
	if _, err := gateway.VerifyTranscript(entries); err != nil {
		t.Error(err)
	}
}
