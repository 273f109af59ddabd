package eval_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/contextos/contextos/eval"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
)

func ExampleLoad() {
	cases, err := eval.Load("testdata/golden")
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range cases {
		kind := "scripted"
		if c.Packet != "" {
			kind = "packet"
		}
		fmt.Printf("%-28s %-8s expects %s\n", c.Name, kind, c.Expect.Status)
	}
	// Output:
	// correction-flow3             packet   expects DECIDED
	// flow1-high-value-approved    scripted expects DECIDED
	// flow1-pending-approval       scripted expects DEFERRED
	// flow2-unverified-denied      scripted expects DECIDED
	// flow3-low-value-decided      scripted expects DECIDED
	// flow4-replay                 packet   expects DECIDED
	// fraud-escalation             scripted expects ESCALATED
	// incident-refund-failed       packet   expects ESCALATED
	// refund-tool-fails            scripted expects ESCALATED
	// starved-evidence-budget      scripted expects DECIDED
	// unverified-identity-refused  scripted expects REJECTED
}

func ExampleRunner_Run() {
	p, err := pack.DecodeAndValidate(fixture.SupportPack(), nil) // ctxpack.support@1.0.0
	if err != nil {
		log.Fatal(err)
	}
	r, err := eval.NewRunner(eval.RunnerOptions{Pack: p})
	if err != nil {
		log.Fatal(err)
	}
	cases, err := eval.Load("testdata/golden")
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range cases {
		if c.Name != "flow1-high-value-approved" {
			continue
		}
		run := r.Run(context.Background(), c)
		fmt.Println(run.Status, run.Outcome, "paused on", run.Pauses)
		fmt.Printf("%d ms, %v cents, replay equal %t, %d problems\n", run.DurationMS, run.CostCents, run.ReplayEqual, len(run.Problems()))
	}
	// Output:
	// DECIDED approved paused on [GATE_FINANCE_APPROVAL]
	// 1850 ms, 0.9 cents, replay equal true, 0 problems
}

func ExampleScore() {
	p, err := pack.DecodeAndValidate(fixture.SupportPack(), nil) // ctxpack.support@1.0.0
	if err != nil {
		log.Fatal(err)
	}
	r, err := eval.NewRunner(eval.RunnerOptions{Pack: p})
	if err != nil {
		log.Fatal(err)
	}
	cases, err := eval.Load("testdata/golden")
	if err != nil {
		log.Fatal(err)
	}
	sc, err := eval.Score(p, r.RunAll(context.Background(), cases), eval.ScoreOptions{Cases: cases})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range sc.Intents[0].Metrics {
		fmt.Printf("%-28s %v (target met: %t)\n", m.Metric, m.Value, m.TargetMet)
	}
	fmt.Println("targets met:", sc.TargetsMet(), "hash verifies:", sc.Verify())
	// Output:
	// policy                       1 (target met: true)
	// safety                       1 (target met: true)
	// utility                      1 (target met: true)
	// latency_p99_ms               1850 (target met: true)
	// economics_cents_per_decision 0.645455 (target met: true)
	// targets met: true hash verifies: true
}

func ExampleTest() {
	candidate, err := os.ReadFile("testdata/packs/support-2.0.0-policy-regression.json")
	if err != nil {
		log.Fatal(err)
	}
	baseline := fixture.SupportPack() // ctxpack.support@1.0.0
	rep, err := eval.Test(context.Background(), eval.TestOptions{Pack: candidate, Baseline: baseline, Golden: "testdata/golden", AllowUnsigned: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range rep.Steps {
		fmt.Println(s.Step, s.Status)
	}
	held, evaluated := rep.ReleaseGates()
	fmt.Println("passed:", rep.Passed(), "release gates held:", held, "evaluated:", evaluated)
	// Output:
	// schema pass
	// references pass
	// policy pass
	// security pass
	// tool_manifest pass
	// compile pass
	// replay pass
	// evaluators fail
	// release_gates fail
	// diff pass
	// passed: false release gates held: false evaluated: true
}

func ExampleBar() {
	own := pack.EvaluationLayer{
		EvalTargets:  []pack.EvalTarget{{Intent: "support.refund", Policy: ptr(0.5), LatencyP99MS: ptr(2000)}},
		ReleaseGates: []pack.ReleaseGate{{Metric: "policy", MaxDelta: 1}},
	}
	baseline := pack.EvaluationLayer{
		EvalTargets:  []pack.EvalTarget{{Intent: "support.refund", Policy: ptr(1), LatencyP99MS: ptr(3000)}},
		ReleaseGates: []pack.ReleaseGate{{Metric: "policy", MaxDelta: 0}, {Metric: "safety", MaxDelta: 0}},
	}
	bar := eval.Bar(own, &baseline)
	t := bar.EvalTargets[0]
	fmt.Println(t.Intent, "policy >=", *t.Policy, "latency_p99_ms <=", *t.LatencyP99MS)
	for _, g := range bar.ReleaseGates {
		fmt.Println(g.Metric, "max_delta", g.MaxDelta)
	}
	// Output:
	// support.refund policy >= 1 latency_p99_ms <= 2000
	// policy max_delta 0
	// safety max_delta 0
}

func ptr(v float64) *float64 { return &v }
