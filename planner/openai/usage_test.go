package openai_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/planner/internal/plannertest"
	"github.com/contextos/contextos/planner/openai"
)

// A turn whose answer carries no usage fails closed (ErrUsageUnknown); a
// stream that fails after its usage chunk reports that usage with the
// error (*contextos.PlanUsageError), which keeps the SDK's error.
func TestTurnUsageErrors(t *testing.T) {
	t.Parallel()
	u := usage{prompt: 1800, completion: 25, cached: 512}
	for _, tc := range []struct {
		name      string
		stream    bool
		rep       reply
		unknown   bool
		wantUsage *contextos.PlanUsage
	}{
		{"completion without usage", false, reply{calls: []call{lookupCall("c")}, finish: "tool_calls", usage: u, noUsage: true}, true, nil},
		{"stream without a usage chunk", true, reply{calls: []call{lookupCall("c")}, finish: "tool_calls", usage: u, noUsage: true}, true, nil},
		{"error event after the usage chunk", true, reply{calls: []call{lookupCall("c")}, finish: "tool_calls", usage: u,
			streamError: `{"error":{"message":"server overloaded","type":"server_error","code":null}}`}, false,
			&contextos.PlanUsage{InputTokens: 1800, OutputTokens: 25, CachedInputTokens: 512}},
		{"stream cut before its usage", true, reply{calls: []call{lookupCall("c")}, finish: "tool_calls", usage: u, cut: true}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tc.rep)
			p := newPlanner(t, f, func(o *openai.Options) { o.Stream = tc.stream })
			plan, err := p.Plan(context.Background(), planRequest(t))
			if err == nil {
				t.Fatalf("no error; plan %+v", plan)
			}
			if !strings.HasPrefix(err.Error(), "openai: chat completion: ") {
				t.Errorf("error %q", err)
			}
			if got := errors.Is(err, contextos.ErrUsageUnknown); got != tc.unknown {
				t.Errorf("errors.Is(ErrUsageUnknown) = %v, want %v: %v", got, tc.unknown, err)
			}
			var ue *contextos.PlanUsageError
			switch {
			case tc.wantUsage == nil && errors.As(err, &ue):
				t.Errorf("usage %+v reported where the server sent none", ue.Usage)
			case tc.wantUsage != nil:
				if !errors.As(err, &ue) {
					t.Fatalf("errors.As *contextos.PlanUsageError: %v", err)
				}
				want := *tc.wantUsage
				want.CostCents = testPrice.Cents(want, 0)
				if ue.Usage != want {
					t.Errorf("usage %+v, want %+v", ue.Usage, want)
				}
				var se *ssestream.StreamError
				if !errors.As(err, &se) {
					t.Errorf("the SDK's error is lost: %v", err)
				}
			}
		})
	}
}

// A server that sends running usage totals in every chunk is charged its
// final totals once, not their sum; one that reports smaller counts after
// its usage chunk is not charged less.
func TestStreamRunningUsageChargedOnce(t *testing.T) {
	u := usage{prompt: 1800, completion: 25, cached: 512}
	for _, rep := range []reply{
		{text: strings.Repeat("the order was shipped; ", 8), finish: "stop", usage: u, runningUsage: true},
		{text: "the order was shipped", finish: "stop", usage: u, shrinkingUsage: true},
		{text: "the order was shipped", finish: "stop", usage: u, runningUsage: true, shrinkingUsage: true},
	} {
		f := newFake(t, rep)
		p := newPlanner(t, f, func(o *openai.Options) { o.Stream = true })
		plan, err := p.Plan(context.Background(), planRequest(t))
		if err != nil {
			t.Fatal(err)
		}
		want := contextos.PlanUsage{InputTokens: 1800, OutputTokens: 25, CachedInputTokens: 512}
		want.CostCents = testPrice.Cents(want, 0)
		want.Tokens = plan.Usage.Tokens
		if plan.Usage != want || plan.Usage.Tokens != 1825 {
			t.Errorf("running %t shrinking %t: usage %+v, want %+v (1825 tokens)", rep.runningUsage, rep.shrinkingUsage, plan.Usage, want)
		}
	}
}

// Over generated runs of random answers (replans with usage, answers
// without usage, streams that fail after their usage), each failed turn
// resumed: the run's budget is charged exactly the usage the server
// reported — the sum over the answers that carried one — and the run
// ends decided; every run replays without asking the model.
func TestUsageChargedAsReported(t *testing.T) {
	t.Parallel()
	runs := 12
	if testing.Short() {
		runs = 4
	}
	for seed := range runs {
		for _, m := range modes {
			t.Run(fmt.Sprint(seed, "/", m.name), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(uint64(seed), 1919))
				var replies []reply
				for range 1 + rng.IntN(6) {
					prompt := 1 + rng.IntN(3000)
					u := usage{prompt: prompt, completion: rng.IntN(300), cached: rng.IntN(prompt + 1)}
					switch k := rng.IntN(4); {
					case k == 0:
						replies = append(replies, reply{text: "Let me think.", finish: "stop", usage: u})
					case k == 1:
						replies = append(replies, reply{calls: []call{{"c_bad", "adp_orders__lookup", `{"order_id": ord}`}}, finish: "tool_calls", usage: u})
					case k == 2 || !m.stream:
						replies = append(replies, reply{calls: []call{lookupCall("c_lost")}, finish: "tool_calls", usage: u, noUsage: true})
					default:
						replies = append(replies, reply{calls: []call{lookupCall("c_err")}, finish: "tool_calls", usage: u,
							streamError: `{"error":{"message":"overloaded","type":"server_error","code":null}}`})
					}
				}
				replies = append(replies, canonicalReplies()[0],
					reply{calls: []call{decisionCall("c_d", "denied")}, finish: "tool_calls", usage: usage{prompt: 2100, completion: 70}})
				var wantTokens, wantStops int
				var wantCents float64
				for _, r := range replies {
					if r.noUsage || r.streamError != "" {
						wantStops++ // the turn fails: the run stops, and is resumed
					}
					if !r.noUsage {
						pu := contextos.PlanUsage{InputTokens: r.usage.prompt, OutputTokens: r.usage.completion, CachedInputTokens: r.usage.cached}
						wantTokens += pu.InputTokens + pu.OutputTokens
						wantCents += testPrice.Cents(pu, 0)
					}
				}
				f := newFake(t, replies...)
				p := newPlanner(t, f, func(o *openai.Options) { o.Stream = m.stream; o.MaxRetries = -1 })
				replans := 20
				h := plannertest.New(t, p, &plannertest.Options{TotalTokens: 1 << 24, MaxCostCents: 1e6, MaxReplanAttempts: &replans})
				res := h.Invoke()
				ctx := context.Background()
				stops := 0
				for range replies {
					if res.Status != decision.Escalated {
						break
					}
					stops++
					if s := res.Record.Rationale.Summary; !strings.Contains(s, "planner_failed") {
						t.Errorf("stop %d: rationale %q", stops, s)
					}
					var err error
					if res, err = h.Runtime().Resume(ctx, res.RunID, contextos.ResumeInput{}); err != nil {
						t.Fatal(err)
					}
				}
				contextostest.AssertStatus(t, res, decision.Decided)
				if stops != wantStops {
					t.Errorf("the run stopped %d times, want %d (every answer without usage or with a failed stream)", stops, wantStops)
				}
				got := plannertest.Usage(res)
				if got.Tokens != wantTokens || math.Abs(got.CostUSDCents-wantCents) > 1e-6 || got.Tokens < 0 || got.CostUSDCents < 0 {
					t.Errorf("charged %d tokens and %v cents, the server reported %d and %v", got.Tokens, got.CostUSDCents, wantTokens, wantCents)
				}
				if n := len(f.seen()); n != len(replies) {
					t.Errorf("%d requests for %d answers", n, len(replies))
				}
				before := len(f.seen())
				contextostest.AssertReplayEqual(t, h.Replay(res))
				if n := len(f.seen()); n != before {
					t.Errorf("the replay sent %d requests to the model", n-before)
				}
			})
		}
	}
}
