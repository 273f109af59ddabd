package contextos_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

// attemptsAdapter serves the support pack's three capabilities. The
// lookup's attempts, counted over the whole run (every runtime), do what
// lookups says, then succeed spending nothing; the policy check and the
// refund succeed.
type attemptsAdapter struct {
	mu      sync.Mutex
	lookups []lookupAttempt
	n       int
	refunds int
}

// lookupAttempt is what one lookup attempt does: it spends cents and
// tokens and fails retryably; with freeze set it first waits until freeze
// is closed (closing entered), as a runtime that died between the call's
// attempts.
type lookupAttempt struct {
	cents   float64
	tokens  int
	entered chan struct{}
	freeze  chan struct{}
}

func (a *attemptsAdapter) Call(_ context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	switch call.Capability {
	case "eval":
		return &gateway.Outcome{Output: map[string]any{"eligible": true}}, nil
	case "issue_refund":
		a.mu.Lock()
		a.refunds++
		a.mu.Unlock()
		return &gateway.Outcome{Output: map[string]any{"transaction_id": "txn_q9"}, Mutations: []string{"refund:txn_q9"}}, nil
	}
	a.mu.Lock()
	n := a.n
	a.n++
	a.mu.Unlock()
	if n >= len(a.lookups) {
		return &gateway.Outcome{Output: map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}}, nil
	}
	at := a.lookups[n]
	if at.freeze != nil {
		close(at.entered)
		<-at.freeze
	}
	return &gateway.Outcome{CostCents: at.cents, Tokens: at.tokens}, gateway.NewToolError(gateway.CodeExecutionFailed, true, "try again", nil)
}

// attemptsHarness is the support pack with a on all three adapters
// (retries without a wait), on a fake clock, every run captured and
// replayed.
func attemptsHarness(t *testing.T, planner contextos.Planner, a *attemptsAdapter) *takeoverCase {
	t.Helper()
	return sameAdapterCase(t, planner, a, 0, nil)
}

// sameAdapterCase is a takeover case on a fake clock: the support pack
// with a on all three adapters (retries without a wait; the lookup tried
// up to lookupAttempts times, 0 for the default), a bare harness with
// planner, every run captured and replayed. edit, when not nil, changes
// the harness's options before it is built.
func sameAdapterCase(t *testing.T, planner contextos.Planner, a gateway.Adapter, lookupAttempts int, edit func(*contextostest.Options)) *takeoverCase {
	t.Helper()
	c := &takeoverCase{clock: newFakeClock(), stalled: make(chan error, 1)}
	var o contextostest.Options
	o.Now = c.clock.Now
	noWait := func(string, int) time.Duration { return 0 }
	o.Runtime.Adapters = []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": {Backoff: noWait, MaxAttempts: lookupAttempts}}},
		{AdapterID: "adp_policy", Adapter: a, Capabilities: map[string]gateway.Capability{"eval": {Backoff: noWait}}},
		{AdapterID: "adp_payments", Adapter: a, Capabilities: map[string]gateway.Capability{"issue_refund": {Backoff: noWait, Scopes: []string{"payments.refund"}}}},
	}
	if edit != nil {
		edit(&o)
	}
	c.h = bareHarness(t, planner, &o)
	t.Cleanup(func() { c.h.ReplayAll() })
	return c
}

// The run all three tests below make: the dead runtime's turn 0 (900
// tokens, 0.4 cents) and its lookup's first attempt (10,000 tokens, 20
// cents), and the takeover's turns 0 and 1 (900 and 700 tokens, 0.4 and
// 0.3 cents): 12,500 tokens, over total_tokens 12,000, and 21.1 cents.
const (
	attemptsRunTokens = 900 + 10000 + 900 + 700
	attemptsRunCents  = 0.4 + 20 + 0.4 + 0.3
)

// checkAttemptsRun checks the taken-over run's result: its record counts
// the dead runtime's attempts exactly once (so it is over total_tokens:
// ESCALATED, without the refund), its transcript verifies and ends at the
// record's chain hash, and it replays equal, its packet and its Capture.
func checkAttemptsRun(t *testing.T, c *takeoverCase, a *attemptsAdapter, res *contextos.Result) {
	t.Helper()
	ctx := context.Background()
	u := res.Record.BudgetUsage
	if u.Tokens != attemptsRunTokens || math.Abs(u.CostUSDCents-attemptsRunCents) > 1e-9 {
		t.Errorf("the taken-over run's record counts %d tokens and %v cents, want %d and %v (the dead runtime's retried attempt charged once)",
			u.Tokens, u.CostUSDCents, attemptsRunTokens, attemptsRunCents)
	}
	contextostest.AssertStatus(t, res, decision.Escalated)
	if !strings.Contains(res.Record.Rationale.Summary, "tokens: used 11800 + requested 700") {
		t.Errorf("the run stopped for %q, want its turn 1 over the tokens budget", res.Record.Rationale.Summary)
	}
	if a.refunds != 0 {
		t.Errorf("the refund ran %d times in a run over its budget", a.refunds)
	}
	entries := runEntries(t, c.h, c.runID)
	if end, err := gateway.VerifyTranscript(entries); err != nil {
		t.Errorf("the transcript does not verify: %v", err)
	} else if end != res.Record.Lineage.ToolTranscriptChainHash {
		t.Errorf("the transcript ends at %s, the record names %s", end, res.Record.Lineage.ToolTranscriptChainHash)
	}
	p, err := c.h.Replays.Get(ctx, res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.Resumes); n == 0 || p.Resumes[n-1].Takeover == nil {
		t.Fatalf("the packet's resumes %+v do not say the run was taken over", p.Resumes)
	}
	contextostest.AssertReplayEqual(t, c.h.Replay(res))
	captured, err := c.h.Runtime.Capture(ctx, c.runID, replay.SourceOperatorCorrection)
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	report, err := c.h.Runtime.Replay(ctx, captured)
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertReplayEqual(t, report)
}

// A runtime that dies between a retried call's attempts leaves what the
// earlier attempts spent in its checkpoint (version 5), and a takeover
// charges it once. Here the lookup's first attempt spends 10,000 tokens
// and 20 cents and fails retryably, and the runtime dies in the second:
// the takeover starts at 10,900 tokens, and its turns 0 and 1 take the
// run over total_tokens before the refund (a takeover that did not charge
// the attempt ended DECIDED at 2,500). The dead runtime, back after the
// takeover, fails the retry's spend save and stops without recording the
// call's result.
func TestTakeoverChargesTheDeadRuntimesRetriedAttempts(t *testing.T) {
	entered, freeze := make(chan struct{}), make(chan struct{})
	a := &attemptsAdapter{lookups: []lookupAttempt{{cents: 20, tokens: 10000}, {cents: 1, tokens: 1, entered: entered, freeze: freeze}}}
	planner := newTurnPlanner(1200, 0)
	c := attemptsHarness(t, planner, a)
	req, rc := refundRequest(t, 1200, true)
	c.runID = rc.RunID
	c.invoke(req, rc)
	<-entered
	cp, err := c.h.Checkpoints.Load(context.Background(), c.runID)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Version != 5 {
		t.Errorf("the checkpoint of a runtime between a call's attempts has version %d, want 5", cp.Version)
	}
	res := c.takeOver(t)
	close(freeze)
	if err := <-c.stalled; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the dead runtime, back after the takeover = %v, want ErrRunInProgress", err)
	}
	checkAttemptsRun(t, c, a, res)
}

// A call whose result is recorded carries what all its attempts spent: a
// takeover after it charges the result, not also the spend the checkpoint
// saved between the attempts. Here the lookup's first attempt spends
// 10,000 tokens and fails retryably, the second succeeds, and the runtime
// dies in its next turn; the takeover starts at 10,900 tokens (20,900 if
// it charged the attempt twice: over the budget before any turn).
func TestTakeoverChargesARetriedCallsAttemptsOnce(t *testing.T) {
	a := &attemptsAdapter{lookups: []lookupAttempt{{cents: 20, tokens: 10000}}}
	planner := newTurnPlanner(1200, 2)
	c := attemptsHarness(t, planner, a)
	req, rc := refundRequest(t, 1200, true)
	c.runID = rc.RunID
	c.invoke(req, rc)
	<-planner.entered
	res := c.takeOver(t)
	close(planner.release)
	if err := <-c.stalled; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the dead runtime, back after the takeover = %v, want ErrRunInProgress", err)
	}
	checkAttemptsRun(t, c, a, res)
}

// A retried attempt that spent nothing costs its run no save: the
// checkpoint of a runtime between such attempts is its claim alone.
func TestRetriedAttemptThatSpentNothingSavesNothing(t *testing.T) {
	entered, freeze := make(chan struct{}), make(chan struct{})
	a := &attemptsAdapter{lookups: []lookupAttempt{{}, {tokens: 1, entered: entered, freeze: freeze}}}
	planner := newTurnPlanner(1200, 0)
	c := attemptsHarness(t, costlyTurns{planner, contextos.PlanUsage{}}, a)
	req, rc := refundRequest(t, 1200, true)
	c.runID = rc.RunID
	c.invoke(req, rc)
	<-entered
	cp, err := c.h.Checkpoints.Load(context.Background(), c.runID)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Revision != 1 || cp.Version != 2 {
		t.Errorf("the checkpoint is at revision %d, version %d; want the claim alone (1, version 2)", cp.Revision, cp.Version)
	}
	res := c.takeOver(t)
	close(freeze)
	if err := <-c.stalled; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the dead runtime, back after the takeover = %v, want ErrRunInProgress", err)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	contextostest.AssertReplayEqual(t, c.h.Replay(res))
}
