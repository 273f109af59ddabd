package anthropic_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/planner/internal/plannertest"
)

const overloadedEvent = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`

// A turn whose answer carries no usage fails closed (ErrUsageUnknown); a
// stream that fails after message_start reports the usage it had (the
// input, and the output so far) with the error.
func TestTurnUsageErrors(t *testing.T) {
	t.Parallel()
	a := &answer{blocks: []block{tool("toolu_1", fnLookup, `{"order_id":"ord_881"}`)}, stop: "tool_use", in: 300, read: 1200, write: 100, out: 40}
	startUsage := contextos.PlanUsage{InputTokens: 1600, CachedInputTokens: 1200, OutputTokens: 1}
	startUsage.CostCents = testPrice.Cents(startUsage, 100)
	for _, tc := range []struct {
		name      string
		stream    bool
		rep       reply
		unknown   bool
		wantUsage *contextos.PlanUsage
		check     func(t *testing.T, err error)
	}{
		{"message without usage", false, reply{answer: a, noUsage: true}, true, nil, nil},
		{"stream without message_delta usage", true, reply{answer: a, noUsage: true}, true, nil, nil},
		{"error event after message_start", true, reply{answer: a, event: overloadedEvent}, false, &startUsage, func(t *testing.T, err error) {
			var ae *sdk.Error
			if !errors.As(err, &ae) {
				t.Errorf("the SDK's error is lost: %v", err)
			}
		}},
		{"second message_start", true, reply{answer: a, restart: true}, false, &startUsage, func(t *testing.T, err error) {
			if !strings.Contains(err.Error(), "started a second message") {
				t.Errorf("error %v", err)
			}
		}},
		{"stream cut after message_start", true, reply{answer: a, cut: true}, false, &startUsage, func(t *testing.T, err error) {
			if !strings.Contains(err.Error(), "ended before message_stop") {
				t.Errorf("error %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tc.rep)
			p := newPlanner(t, f, tc.stream, nil)
			plan, err := p.Plan(context.Background(), capturedRequest(t))
			if err == nil {
				t.Fatalf("no error; plan %+v", plan)
			}
			if !strings.HasPrefix(err.Error(), "anthropic: messages: ") {
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
				if ue.Usage != *tc.wantUsage {
					t.Errorf("usage %+v, want %+v", ue.Usage, *tc.wantUsage)
				}
			}
			if tc.check != nil {
				tc.check(t, err)
			}
		})
	}
}

// Over generated runs of random answers (text-only replans, answers
// without usage, streams that fail after message_start), each failed
// turn resumed: the run's budget is charged exactly the usage the server
// reported, and the run ends decided; it replays without asking the
// model.
func TestUsageChargedAsReported(t *testing.T) {
	t.Parallel()
	runs := 8
	if testing.Short() {
		runs = 3
	}
	for seed := range runs {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprint(seed, "/stream=", stream), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(uint64(seed), 1920))
				var script []reply
				var wantTokens, wantStops int
				var wantCents float64
				for range 1 + rng.IntN(5) {
					a := &answer{blocks: []block{tool("toolu_x", fnLookup, `{"order_id":"ord_881"}`)}, stop: "tool_use",
						in: 1 + rng.IntN(900), read: rng.IntN(1500), write: rng.IntN(300), out: 1 + rng.IntN(200)}
					switch k := rng.IntN(3); {
					case k == 0:
						a.blocks = []block{text("Let me think about it.")}
						a.stop = "end_turn"
						script = append(script, reply{answer: a})
						tk, c := turnUsage(a)
						wantTokens, wantCents = wantTokens+tk, wantCents+c
					case k == 1 || !stream:
						script = append(script, reply{answer: a, noUsage: true})
						wantStops++
					default:
						script = append(script, reply{answer: a, event: overloadedEvent})
						start := *a
						start.out = 1 // what message_start reported
						tk, c := turnUsage(&start)
						wantTokens, wantCents, wantStops = wantTokens+tk, wantCents+c, wantStops+1
					}
				}
				deny := &answer{blocks: []block{tool("toolu_d", fnDecision, `{"decision_key":"support.refund.execute","outcome":"denied","rationale":"Not eligible.","evidence_refs":["`+plannertest.OrderEvidence+`"]}`)},
					stop: "tool_use", in: 400, read: 1800, out: 60}
				script = append(script, ok(lookupAndEval()), ok(deny))
				tk, c := sumUsage(lookupAndEval(), deny)
				wantTokens, wantCents = wantTokens+tk, wantCents+c

				f := newFake(t, script...)
				p := newPlanner(t, f, stream, nil)
				replans := 20
				h := plannertest.New(t, p, &plannertest.Options{TotalTokens: 1 << 24, MaxCostCents: 1e6, MaxReplanAttempts: &replans})
				res := h.Invoke()
				stops := 0
				for range script {
					if res.Status != decision.Escalated {
						break
					}
					stops++
					var err error
					if res, err = h.Runtime().Resume(context.Background(), res.RunID, contextos.ResumeInput{}); err != nil {
						t.Fatal(err)
					}
				}
				contextostest.AssertStatus(t, res, decision.Decided)
				if stops != wantStops {
					t.Errorf("the run stopped %d times, want %d", stops, wantStops)
				}
				got := plannertest.Usage(res)
				if got.Tokens != wantTokens || math.Abs(got.CostUSDCents-wantCents) > 1e-6 {
					t.Errorf("charged %d tokens and %v cents, the server reported %d and %v", got.Tokens, got.CostUSDCents, wantTokens, wantCents)
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
