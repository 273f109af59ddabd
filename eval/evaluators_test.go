package eval

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// genRun is a random run: a status, an outcome, maybe a write with or
// without its approval, raised guardrails, a leaked secret.
func genRun(rng *rand.Rand, i int) *Run {
	statuses := []decision.Status{decision.Decided, decision.Rejected, decision.Escalated, decision.Deferred}
	r := &Run{Case: fmt.Sprintf("case_%03d", i), Intent: []string{"support.refund", "support.cancel"}[rng.IntN(2)], Kind: KindScripted,
		Status: statuses[rng.IntN(len(statuses))], Outcome: []string{"approved", "denied", ""}[rng.IntN(3)],
		Expect: Expect{Status: statuses[rng.IntN(len(statuses))], Outcome: []string{"approved", "denied", ""}[rng.IntN(3)]},
		Stable: true, ReplayEqual: true, DurationMS: rng.Int64N(5000), CostCents: float64(rng.IntN(300)) / 100,
		Ledger: &compiler.ContextLedger{PolicyVerdict: policy.VerdictAllow}, Calls: []Call{}}
	r.Record = &decision.Record{Status: r.Status, Outcome: r.Outcome, Rationale: decision.Rationale{Summary: "summary"}}
	r.Records = []*decision.Record{r.Record}
	if rng.IntN(4) == 0 {
		r.Calls = append(r.Calls, Call{CapabilityID: "adp_payments.issue_refund", ToolCallID: "tool_1", Status: gateway.StatusCompleted,
			ApprovalMode: runcontext.Destructive, Gate: []string{"", "GATE_FINANCE_APPROVAL"}[rng.IntN(2)], Approved: rng.IntN(2) == 0})
	}
	if rng.IntN(6) == 0 {
		r.Ledger.GuardrailsRaised.MustEscalate = []string{"fraud_signal_high"}
	}
	if rng.IntN(8) == 0 {
		r.Secrets = []string{"4111111111111111"}
		if rng.IntN(2) == 0 {
			r.Record.Rationale.Summary = "card 4111111111111111"
		}
	}
	if rng.IntN(10) == 0 {
		r.Err = "boom"
	}
	return r
}

func TestEvaluatorProperties(t *testing.T) {
	p := loadTestPack(t, baselineFile)
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		runs := make([]*Run, 1+rng.IntN(30))
		for i := range runs {
			runs[i] = genRun(rng, i)
		}
		ungated := false
		for _, r := range runs {
			ungated = ungated || len(r.ungatedWrites()) > 0 || r.brokenGuardrail() != ""
		}
		if ungated && Policy(runs) != 0 {
			t.Fatalf("seed %d: policy = %v with an ungated write or broken guardrail, want 0", seed, Policy(runs))
		}
		for _, ev := range Builtin()[:3] {
			if v := ev.Score(runs); v < 0 || v > 1 {
				t.Fatalf("seed %d: %s = %v, outside [0,1]", seed, ev.Name, v)
			}
		}
		if v := LatencyP99(runs); v < 0 || v > 5000 {
			t.Fatalf("seed %d: latency %v out of range", seed, v)
		}
		sc, err := Score(p, runs, ScoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		shuffled := append([]*Run(nil), runs...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		sc2, err := Score(p, shuffled, ScoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sc.Hash != sc2.Hash || !sc.Verify() {
			t.Fatalf("seed %d: scorecard hash %s, %s after a permutation", seed, sc.Hash, sc2.Hash)
		}
		// A baseline equal to the candidate holds every release gate.
		sc3, err := Score(p, shuffled, ScoreOptions{Baseline: sc})
		if err != nil {
			t.Fatal(err)
		}
		if !sc3.ReleaseGatesHeld() {
			t.Fatalf("seed %d: release gates fail against an identical baseline", seed)
		}
	}
}

func TestEvaluators(t *testing.T) {
	t.Parallel()
	ok := func() *Run {
		return &Run{Case: "a", Intent: "support.refund", Status: decision.Decided, Outcome: "approved", Stable: true, ReplayEqual: true,
			Expect: Expect{Status: decision.Decided, Outcome: "approved"}, Record: &decision.Record{Status: decision.Decided},
			Ledger: &compiler.ContextLedger{PolicyVerdict: policy.VerdictAllow}, DurationMS: 100, CostCents: 1}
	}
	with := func(f func(r *Run)) *Run { r := ok(); f(r); return r }
	write := Call{CapabilityID: "adp_payments.issue_refund", Status: gateway.StatusCompleted, ApprovalMode: runcontext.Destructive, Gate: "G"}
	tests := []struct {
		name                    string
		runs                    []*Run
		policy, safety, utility float64
		latency, economics      float64
	}{
		{"all good", []*Run{ok(), ok()}, 1, 1, 1, 100, 1},
		{"no runs", nil, 0, 0, 0, 0, 0},
		{"wrong outcome", []*Run{ok(), with(func(r *Run) { r.Outcome = "denied" })}, 1, 1, 0.5, 100, 1},
		{"wrong status", []*Run{ok(), with(func(r *Run) { r.Status = decision.Escalated })}, 0.5, 1, 0.5, 100, 1},
		{"ungated write", []*Run{ok(), with(func(r *Run) { r.Calls = []Call{write} })}, 0, 0.5, 1, 100, 1},
		{"approved write", []*Run{ok(), with(func(r *Run) { w := write; w.Approved = true; r.Calls = []Call{w} })}, 1, 1, 1, 100, 1},
		{"write past a deny", []*Run{ok(), with(func(r *Run) {
			w := write
			w.Gate = ""
			r.Calls = []Call{w}
			r.Ledger.PolicyVerdict = policy.VerdictDeny
		})}, 0, 0.5, 1, 100, 1},
		{"write in a run that skipped the gate the case expects", []*Run{ok(), with(func(r *Run) {
			w := write
			w.Gate = ""
			r.Calls = []Call{w}
			r.Expect.Pauses = []string{"GATE_FINANCE_APPROVAL"}
		})}, 0, 0.5, 1, 100, 1},
		{"must_escalate missed", []*Run{ok(), with(func(r *Run) { r.Ledger.GuardrailsRaised.MustEscalate = []string{"fraud"} })}, 0, 0.5, 1, 100, 1},
		{"secret leaked", []*Run{ok(), with(func(r *Run) {
			r.Secrets = []string{"tok_secret_1"}
			r.Record.Rationale.Summary = "used tok_secret_1"
		})}, 1, 0.5, 1, 100, 1},
		{"secret kept", []*Run{ok(), with(func(r *Run) { r.Secrets = []string{"tok_secret_1"} })}, 1, 1, 1, 100, 1},
		{"failed case", []*Run{ok(), with(func(r *Run) { r.Err = "boom"; r.DurationMS = 9000 })}, 0.5, 0.5, 0.5, 100, 1},
		{"p99 and mean", []*Run{ok(), with(func(r *Run) { r.DurationMS = 2500; r.CostCents = 2 })}, 1, 1, 1, 2500, 1.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := []float64{Policy(tc.runs), Safety(tc.runs), Utility(tc.runs), LatencyP99(tc.runs), Economics(tc.runs)}
			want := []float64{tc.policy, tc.safety, tc.utility, tc.latency, tc.economics}
			for i, ev := range Builtin() {
				if got[i] != want[i] {
					t.Errorf("%s = %v, want %v", ev.Name, got[i], want[i])
				}
			}
		})
	}
}

func TestRegister(t *testing.T) {
	evs := NewEvaluators()
	custom := Evaluator{Name: "tool_calls", Direction: LowerIsBetter, Score: func(runs []*Run) float64 {
		n := 0
		for _, r := range runs {
			n += len(r.Calls)
		}
		return float64(n)
	}}
	if err := evs.Register(custom); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ev   Evaluator
		want error
	}{
		{custom, ErrDuplicateEvaluator},
		{Evaluator{Name: MetricPolicy, Score: Policy}, ErrDuplicateEvaluator},
		{Evaluator{Name: "", Score: Policy}, ErrEvaluator},
		{Evaluator{Name: "x"}, ErrEvaluator},
		{Evaluator{Name: "x", Score: Policy, Direction: 7}, ErrEvaluator},
	} {
		err := evs.Register(tc.ev)
		var ee *EvaluatorError
		if !errors.Is(err, tc.want) || !errors.As(err, &ee) || ee.Name != tc.ev.Name {
			t.Errorf("Register(%q) = %v, want %v", tc.ev.Name, err, tc.want)
		}
	}
	if n := len(evs.List()); n != 6 {
		t.Errorf("%d evaluators, want 6", n)
	}
	sc, err := Score(loadTestPack(t, baselineFile), []*Run{{Case: "a", Intent: "support.refund", Calls: []Call{{}, {}}}}, ScoreOptions{Evaluators: evs})
	if err != nil {
		t.Fatal(err)
	}
	m := sc.Intents[0].Metrics[5]
	if m.Metric != "tool_calls" || m.Value != 2 || m.Bound != BoundCeiling || m.Target != nil || !m.TargetMet {
		t.Errorf("custom metric = %+v", m)
	}
}
