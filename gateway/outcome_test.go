package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/runcontext"
)

// A tool whose outcome costs more than the run's budget has still been
// called: its cost is charged, and the meter reports the run over its
// cost budget (the runtime stops the run). The result stands.
func TestIncurredCostOverBudgetIsCharged(t *testing.T) {
	f := newFixture(t)
	budget := f.rc.RunBudget.MaxCostCents
	for _, cost := range []float64{budget + 1, 1<<53 - 1} {
		run, meter := meteredRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
			return &gateway.Outcome{Output: map[string]any{"status": "delivered"}, CostCents: cost}, nil
		}), gateway.Capability{ArgsSchema: lookupSchema, CostCents: 0.5}, nil)
		res, err := run.Call(ctx, lookupCall())
		if err != nil || res.Status != gateway.StatusOK {
			t.Fatalf("cost %g: %+v, %v", cost, res, err)
		}
		var be *runcontext.BudgetError
		if err := meter.Exceeded(); !errors.As(err, &be) || be.Dimension != runcontext.DimCost {
			t.Errorf("cost %g: meter.Exceeded() = %v, want a BudgetError on %s", cost, err, runcontext.DimCost)
		}
		if used := meter.Usage().CostCents; used <= budget {
			t.Errorf("cost %g: %v cents charged, want more than the budget %v", cost, used, budget)
		}
	}
}

// A capability's cost model is a number of cents from 0 to 2^53−1.
func TestNewRefusesInvalidCostModel(t *testing.T) {
	for _, cost := range []float64{-1, math.NaN(), math.Inf(1), math.Inf(-1), 1 << 53, 1e300} {
		_, err := gateway.New([]gateway.Registration{{AdapterID: "a", Adapter: noop, Capabilities: map[string]gateway.Capability{"x": {CostCents: cost}}}}, nil)
		if !errors.Is(err, gateway.ErrConfig) {
			t.Errorf("New with cost %g = %v, want ErrConfig", cost, err)
		}
	}
}

// An outcome the record cannot hold or the meter cannot charge is refused
// at the boundary: the call's result is an error naming the field, the
// transcript records it as any other result (its chain stays valid), an
// invalid cost is never charged, and a write's idempotency key keeps the
// refused result.
func TestInvalidOutcomeRefused(t *testing.T) {
	t.Parallel()
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name   string
		out    gateway.Outcome
		field  string // "" for a valid outcome
		charge float64
	}{
		{"valid", gateway.Outcome{Output: map[string]any{"n": 1.5, "j": json.Number("2")}, CostCents: 0.25}, "", 0.75},
		{"NaN output", gateway.Outcome{Output: map[string]any{"n": nan}, CostCents: 0.25}, "output", 0.75},
		{"+Inf output", gateway.Outcome{Output: map[string]any{"n": inf}}, "output", 0.5},
		{"-Inf output", gateway.Outcome{Output: map[string]any{"n": -inf}}, "output", 0.5},
		{"NaN in a slice in a map", gateway.Outcome{Output: map[string]any{"a": map[string]any{"b": []any{1.0, nan}}}}, "output", 0.5},
		{"Inf in a map in a slice", gateway.Outcome{Output: map[string]any{"a": []any{map[string]any{"b": inf}}}}, "output", 0.5},
		{"float32 NaN", gateway.Outcome{Output: map[string]any{"n": float32(nan)}}, "output", 0.5},
		{"[]float64 with Inf", gateway.Outcome{Output: map[string]any{"n": []float64{1, -inf}}}, "output", 0.5},
		{"json.Number NaN", gateway.Outcome{Output: map[string]any{"n": json.Number("NaN")}}, "output", 0.5},
		{"json.Number Inf", gateway.Outcome{Output: map[string]any{"n": json.Number("-Inf")}}, "output", 0.5},
		{"json.Number out of range", gateway.Outcome{Output: map[string]any{"n": json.Number("1e999")}}, "output", 0.5},
		{"NaN cost", gateway.Outcome{Output: map[string]any{}, CostCents: nan}, "cost_cents", 0.5},
		{"+Inf cost", gateway.Outcome{Output: map[string]any{}, CostCents: inf}, "cost_cents", 0.5},
		{"-Inf cost", gateway.Outcome{Output: map[string]any{}, CostCents: -inf}, "cost_cents", 0.5},
		{"negative cost", gateway.Outcome{Output: map[string]any{}, CostCents: -1}, "cost_cents", 0.5},
		{"negative tokens", gateway.Outcome{Output: map[string]any{}, CostCents: 0.25, Tokens: -1}, "tokens", 0.75},
		{"most negative tokens", gateway.Outcome{Output: map[string]any{}, Tokens: math.MinInt}, "tokens", 0.5},
		// Numbers a record cannot read back exactly.
		{"cost of 2^53 cents", gateway.Outcome{Output: map[string]any{}, CostCents: 1 << 53}, "cost_cents", 0.5},
		{"cost of 1e300 cents", gateway.Outcome{Output: map[string]any{}, CostCents: 1e300}, "cost_cents", 0.5},
		{"largest cost", gateway.Outcome{Output: map[string]any{}, CostCents: math.MaxFloat64}, "cost_cents", 0.5},
		{"2^53 tokens", gateway.Outcome{Output: map[string]any{}, CostCents: 0.25, Tokens: 1 << 53}, "tokens", 0.75},
		{"most tokens", gateway.Outcome{Output: map[string]any{}, Tokens: math.MaxInt}, "tokens", 0.5},
		{"2^53−1 tokens and cost", gateway.Outcome{Output: map[string]any{"n": 1<<53 - 1}, CostCents: 0}, "", 0.5},
		{"int beyond 2^53−1 in output", gateway.Outcome{Output: map[string]any{"n": 1 << 53}}, "output", 0.5},
		{"int64 below −(2^53−1) in output", gateway.Outcome{Output: map[string]any{"a": []any{int64(math.MinInt64)}}}, "output", 0.5},
		{"uint64 in output", gateway.Outcome{Output: map[string]any{"n": uint64(math.MaxUint64)}}, "output", 0.5},
		{"big int in a struct in output", gateway.Outcome{Output: map[string]any{"s": struct{ N int64 }{math.MaxInt64}}}, "output", 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			calls := 0
			run, meter := meteredRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
				calls++
				out := tc.out
				return &out, nil
			}), gateway.Capability{ArgsSchema: lookupSchema, CostCents: 0.5}, &gateway.Options{Transcript: canonChecked{t, f.recorder}})
			res, err := run.Call(ctx, lookupCall())
			if err != nil {
				t.Fatalf("Call = %v, want the refusal as a result", err)
			}
			if tc.field == "" {
				if res.Status != gateway.StatusOK || res.Error != nil {
					t.Errorf("valid outcome: %s %+v", res.Status, res.Error)
				}
			} else if res.Status != gateway.StatusError || res.Error == nil || res.Error.Code != gateway.CodeExecutionFailed || res.Error.Retryable ||
				res.Error.Details["field"] != tc.field || !strings.Contains(res.Error.Message, tc.field) || res.Output != nil {
				t.Errorf("result = %s %+v output %v, want error execution_failed naming %s", res.Status, res.Error, res.Output, tc.field)
			}
			if calls != 1 || res.Metadata.Attempts != 1 {
				t.Errorf("adapter called %d times, %d attempts, want 1", calls, res.Metadata.Attempts)
			}
			results := f.recorder.Results()
			if len(results) != 1 || results[0].ToolCallID != res.ToolCallID || results[0].Status != res.Status {
				t.Errorf("transcript results = %+v, want the call's", results)
			}
			if _, err := gateway.VerifyTranscript(f.recorder.Entries()); err != nil {
				t.Errorf("transcript chain: %v", err)
			}
			if got := meter.Usage().CostCents; got != tc.charge || res.Metadata.CostCents != tc.charge {
				t.Errorf("charged %v, metadata cost %v, want %v", got, res.Metadata.CostCents, tc.charge)
			}
			if got := meter.Usage().Tokens; got != 0 || res.Metadata.Tokens != 0 {
				t.Errorf("charged %d tokens, metadata %d, want none", got, res.Metadata.Tokens)
			}
		})
	}
}

// A failed attempt that spent something (a model's tokens, a paid call)
// is charged what it spent, however it failed, across retries, and even
// past the budget: its valid cost and tokens reach the meter, the
// result's metadata and the observer (a recorder keeps them beside the
// error); the rest of what it returned with its error is never read.
func TestFailedAttemptSpendIsCharged(t *testing.T) {
	spent := func(cost float64, tokens int) *gateway.Outcome {
		return &gateway.Outcome{Output: map[string]any{"card": hostileCard}, Mutations: []string{"m"}, CostCents: cost, Tokens: tokens}
	}
	tests := []struct {
		name     string
		attempts int // MaxAttempts
		call     func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error)
		code     string
		cost     float64 // charged, the cost model's 0.5 per attempt included
		tokens   int
	}{
		{"tool error", 1, func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
			return spent(20, 2484), gateway.NewToolError(gateway.CodeExecutionFailed, false, "exit 3", nil)
		}, gateway.CodeExecutionFailed, 20.5, 2484},
		{"plain error", 1, func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
			return spent(1, 10), errors.New("boom " + hostileCard)
		}, gateway.CodeExecutionFailed, 1.5, 10},
		{"timeout", 1, func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
			<-ctx.Done()
			return spent(2, 20), ctx.Err()
		}, gateway.CodeTimeout, 2.5, 20},
		{"retried", 3, func(_ context.Context, c *gateway.Call) (*gateway.Outcome, error) {
			return spent(1, 100), gateway.NewToolError(gateway.CodeExecutionFailed, true, "busy", nil)
		}, gateway.CodeExecutionFailed, 4.5, 300},
		{"invalid spend", 1, func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
			return spent(math.NaN(), -5), gateway.NewToolError(gateway.CodeExecutionFailed, false, "x", nil)
		}, gateway.CodeExecutionFailed, 0.5, 0},
		{"over the budget", 1, func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
			return spent(1e9, 1<<53-1), gateway.NewToolError(gateway.CodeExecutionFailed, false, "x", nil)
		}, gateway.CodeExecutionFailed, 1e9 + 0.5, 1<<53 - 1},
		{"spend beyond 2^53−1", 1, func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
			return spent(1e300, math.MaxInt), gateway.NewToolError(gateway.CodeExecutionFailed, false, "x", nil)
		}, gateway.CodeExecutionFailed, 0.5, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			var seen []gateway.Attempt
			gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: gateway.AdapterFunc(tc.call),
				Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema, HonorsContext: true, MaxAttempts: tc.attempts, Timeout: 20 * time.Millisecond, CostCents: 0.5}}}},
				&gateway.Options{Transcript: canonChecked{t, f.recorder}, Sleep: func(context.Context, time.Duration) error { return nil }})
			if err != nil {
				t.Fatal(err)
			}
			meter := runcontext.NewMeter(f.rc.RunBudget, f.now)
			run, err := gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: meter},
				&gateway.RunOptions{Observe: func(a gateway.Attempt) { seen = append(seen, a) }})
			if err != nil {
				t.Fatal(err)
			}
			res, err := run.Call(ctx, lookupCall())
			if err != nil || res.Error == nil || res.Error.Code != tc.code || res.Output != nil || len(res.Mutations) != 0 {
				t.Fatalf("Call = %s %+v output %v mutations %v, %v; want a %s failure and nothing of the outcome", res.Status, res.Error, res.Output, res.Mutations, err, tc.code)
			}
			u := meter.Usage()
			if u.CostCents != tc.cost || u.Tokens != tc.tokens || res.Metadata.CostCents != tc.cost || res.Metadata.Tokens != tc.tokens {
				t.Errorf("charged %v cents %d tokens, metadata %v cents %d tokens; want %v, %d", u.CostCents, u.Tokens, res.Metadata.CostCents, res.Metadata.Tokens, tc.cost, tc.tokens)
			}
			var be *runcontext.BudgetError
			if over := tc.tokens > f.rc.RunBudget.TotalTokens; over != (errors.As(meter.Exceeded(), &be) && be.Dimension == runcontext.DimTokens) {
				t.Errorf("meter.Exceeded() = %v, over the token budget: %v", meter.Exceeded(), over)
			}
			if len(seen) != tc.attempts {
				t.Fatalf("observed %d attempts, want %d", len(seen), tc.attempts)
			}
			for _, a := range seen {
				if a.Error == nil {
					t.Errorf("attempt %d: no error", a.Attempt)
				}
				if o := a.Outcome; tc.tokens > 0 && (o == nil || o.Output != nil || o.Mutations != nil || o.Tokens != tc.tokens/tc.attempts) {
					t.Errorf("attempt %d: observed outcome %+v, want only what it spent", a.Attempt, o)
				}
			}
			if b, _ := json.Marshal(f.recorder.Entries()); strings.Contains(string(b), hostileCard) {
				t.Errorf("the transcript holds what the failed attempt returned")
			}
		})
	}
}

// A write whose outcome is refused keeps the refused result under its
// idempotency key: the effect may have happened, so it never runs again.
func TestInvalidWriteOutcomeKept(t *testing.T) {
	f := newFixture(t, lowValue, func(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		fx.payments = gatewaytest.NewScriptedAdapter()
		fx.payments.On("issue_refund").Return(&gateway.Outcome{Output: map[string]any{"amount": math.NaN()}, Mutations: []string{"refund:t"}})
	})
	res, err := f.run.Call(ctx, refundCall(1200))
	if err != nil || res.Status != gateway.StatusError || res.Error.Code != gateway.CodeExecutionFailed {
		t.Fatalf("refund = %s %+v, %v", res.Status, res.Error, err)
	}
	again, err := f.run.Call(ctx, refundCall(1200))
	if err != nil || !again.Metadata.Duplicate || again.Status != gateway.StatusError || f.payments.CallCount("issue_refund") != 1 {
		t.Errorf("the same refund again = %s duplicate %v, %v; adapter ran %d times, want once", again.Status, again.Metadata.Duplicate, err, f.payments.CallCount("issue_refund"))
	}
	if _, err := gateway.VerifyTranscript(f.recorder.Entries()); err != nil {
		t.Errorf("transcript chain: %v", err)
	}
}

// An outcome the gateway refuses for its size or its depth was still
// produced by an attempt that ran: what it reports spending is two
// scalars, read without walking the output, and is charged.
func TestOutcomeRefusedForSizeIsCharged(t *testing.T) {
	t.Parallel()
	for name, output := range map[string]map[string]any{
		"too large": {"text": strings.Repeat("x", 8192)},
		"too deep":  nested(1100),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, func(_ *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
				rc.RunBudget.MaxPayloadBytes = 2048
			})
			run, meter := meteredRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
				return &gateway.Outcome{Output: output, CostCents: 20, Tokens: 2484}, nil
			}), gateway.Capability{ArgsSchema: lookupSchema, HonorsContext: true, CostCents: 0.5}, nil)
			res, err := run.Call(ctx, lookupCall())
			if err != nil || res.Error == nil {
				t.Fatalf("Call = %s %+v, %v; want a refusal", res.Status, res.Error, err)
			}
			u := meter.Usage()
			if u.Tokens != 2484 || u.CostCents != 20.5 || res.Metadata.Tokens != 2484 || res.Metadata.CostCents != 20.5 {
				t.Errorf("charged %d tokens %v cents, metadata %d tokens %v cents; want 2484 and 20.5", u.Tokens, u.CostCents, res.Metadata.Tokens, res.Metadata.CostCents)
			}
		})
	}
}

// A run whose meter is already over its token budget (restored from a
// checkpoint, or charged by an earlier call) gets no further tool call:
// it is blocked naming the dimension before the adapter runs.
func TestCallOverTokenBudgetIsBlocked(t *testing.T) {
	f := newFixture(t)
	calls := 0
	run, meter := meteredRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		calls++
		return &gateway.Outcome{Output: map[string]any{}}, nil
	}), gateway.Capability{ArgsSchema: lookupSchema, HonorsContext: true}, nil)
	_ = meter.ChargeIncurredTokens(f.rc.RunBudget.TotalTokens + 1)
	res, err := run.Call(ctx, lookupCall())
	if err != nil {
		t.Fatal(err)
	}
	if calls != 0 || res.Status != gateway.StatusBlocked || res.Error == nil || res.Error.Code != gateway.CodeRuntimePolicyInvalid || res.Error.Details["dimension"] != runcontext.DimTokens {
		t.Errorf("Call over the token budget = %s %+v (adapter ran %d times), want blocked on %s before the adapter runs", res.Status, res.Error, calls, runcontext.DimTokens)
	}
}

// An adapter that ignores its context and returns what it spent with its
// error within the grace is charged for it.
func TestSpendReturnedWithinGraceIsCharged(t *testing.T) {
	f := newFixture(t)
	run, meter := meteredRun(t, f, gateway.AdapterFunc(func(ctx context.Context, _ *gateway.Call) (*gateway.Outcome, error) {
		<-ctx.Done() // returns after its timeout, inside the grace
		return &gateway.Outcome{CostCents: 3, Tokens: 30}, ctx.Err()
	}), gateway.Capability{ArgsSchema: lookupSchema, Timeout: 10 * time.Millisecond, MaxAttempts: 1}, &gateway.Options{Grace: time.Minute})
	res, err := run.Call(ctx, lookupCall())
	if err != nil || res.Error == nil || res.Error.Code != gateway.CodeTimeout {
		t.Fatalf("Call = %s %+v, %v", res.Status, res.Error, err)
	}
	if u := meter.Usage(); u.Tokens != 30 || u.CostCents != 3 {
		t.Errorf("charged %+v, want 30 tokens and 3 cents", u)
	}
}

// What retries spend adds up to at most 2^53−1 tokens and cents: the sum
// of valid counts saturates there instead of reaching a number the
// transcript and the record could not hold exactly, and the call's
// result is recorded. (The run's budget is the largest a run holds, so
// no attempt takes it over and all three are made.)
func TestRetriedSpendSaturates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(_ *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		rc.RunBudget.TotalTokens, rc.RunBudget.MaxCostCents = 1<<53-1, 1<<53-1
	})
	const each = 1 << 52 // valid alone; three of them are beyond 2^53−1
	run, meter := meteredRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		return &gateway.Outcome{Tokens: each, CostCents: each}, gateway.NewToolError(gateway.CodeExecutionFailed, true, "busy", nil)
	}), gateway.Capability{ArgsSchema: lookupSchema, MaxAttempts: 3}, &gateway.Options{Transcript: canonChecked{t, f.recorder}, Sleep: func(context.Context, time.Duration) error { return nil }})
	res, err := run.Call(ctx, lookupCall())
	if err != nil || res.Metadata.Attempts != 3 {
		t.Fatalf("Call = %+v, %v; want three failed attempts recorded", res, err)
	}
	if res.Metadata.Tokens != 1<<53-1 || res.Metadata.CostCents != 1<<53-1 {
		t.Errorf("metadata: %d tokens, %v cents; want both 2^53−1", res.Metadata.Tokens, res.Metadata.CostCents)
	}
	if u := meter.Usage(); u.Tokens != 1<<53-1 {
		t.Errorf("charged %d tokens, want 2^53−1", u.Tokens)
	}
	if n := len(f.recorder.Results()); n != 1 {
		t.Errorf("%d results recorded, want 1", n)
	}
}
