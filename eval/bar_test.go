package eval

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos/pack"
)

const regressionFile = "testdata/packs/support-2.0.0-policy-regression.json"

// mutatePack decodes a pack file as JSON, lets f change it and encodes it.
func mutatePack(t *testing.T, file string, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readTestFile(t, file), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// relaxed is the policy regression with its own targets and release gates
// relaxed so that it would pass them.
func relaxed(t *testing.T) []byte {
	return mutatePack(t, regressionFile, func(m map[string]any) {
		el := m["evaluation_layer"].(map[string]any)
		el["eval_targets"] = []any{map[string]any{"intent": "support.refund", "policy": 0.0, "safety": 0.0, "latency_p99_ms": 99999}}
		el["release_gates"] = []any{map[string]any{"metric": "policy", "max_delta": 1}, map[string]any{"metric": "safety", "max_delta": 1}}
	})
}

func codesOf(probs []pack.Problem) []string {
	var out []string
	for _, p := range probs {
		out = append(out, string(p.Code))
	}
	return out
}

func f64(v float64) *float64 { return &v }

// TestBar: floors take the larger target, ceilings the smaller, release
// gates the union by metric with the smaller max_delta.
func TestBar(t *testing.T) {
	own := pack.EvaluationLayer{
		EvalTargets:  []pack.EvalTarget{{Intent: "b", Policy: f64(0.5), LatencyP99MS: f64(100), Utility: f64(0.9)}, {Intent: "a", Safety: f64(1)}},
		ReleaseGates: []pack.ReleaseGate{{Metric: "policy", MaxDelta: 1}, {Metric: "utility", MaxDelta: 0.1}},
	}
	base := pack.EvaluationLayer{
		EvalTargets:  []pack.EvalTarget{{Intent: "b", Policy: f64(1), LatencyP99MS: f64(3000), Safety: f64(0.7), EconomicsCentsPerDecision: f64(2)}},
		ReleaseGates: []pack.ReleaseGate{{Metric: "policy", MaxDelta: 0}, {Metric: "safety", MaxDelta: 0.2}, {Metric: "utility", MaxDelta: 0.5}},
	}
	got := Bar(own, &base)
	want := pack.EvaluationLayer{
		EvalTargets: []pack.EvalTarget{{Intent: "a", Safety: f64(1)},
			{Intent: "b", Policy: f64(1), Utility: f64(0.9), LatencyP99MS: f64(100), Safety: f64(0.7), EconomicsCentsPerDecision: f64(2)}},
		ReleaseGates: []pack.ReleaseGate{{Metric: "policy", MaxDelta: 0}, {Metric: "safety", MaxDelta: 0.2}, {Metric: "utility", MaxDelta: 0.1}},
	}
	if !canonEqual(got, want) {
		g, _ := json.Marshal(got)
		t.Errorf("Bar = %s", g)
	}
	// The same bar whichever side a layer is on, and without a baseline
	// the pack's own.
	if other := Bar(base, &own); !canonEqual(other, want) {
		t.Error("Bar is not symmetric")
	}
	if alone := Bar(own, nil); !canonEqual(alone.ReleaseGates, own.ReleaseGates) || len(alone.EvalTargets) != 2 {
		t.Errorf("Bar(own, nil) = %+v", alone)
	}
}

// TestNoSelfGrading: a candidate that relaxes its own targets and release
// gates is still held to the baseline's, by Test and by PackGate; without
// a baseline its own bar applies.
func TestNoSelfGrading(t *testing.T) {
	ctx := context.Background()
	rep, err := Test(ctx, TestOptions{Pack: relaxed(t), Baseline: readTestFile(t, baselineFile), Golden: goldenDir, AllowUnsigned: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed() || rep.Step(StepEvaluators).Status != StepFail || rep.Step(StepReleaseGates).Status != StepFail {
		t.Fatalf("the relaxed regression passes:\n%s", rep.Text())
	}
	m := rep.Scorecard.Intents[0].Metrics
	if *m[0].Target != 1 || *m[0].MaxDelta != 0 || *m[3].Target != 3000 {
		t.Errorf("held to %+v %+v, want the baseline's policy floor 1, max_delta 0, latency ceiling 3000", m[0], m[3])
	}
	// Without a baseline the candidate's own (relaxed) targets apply.
	rep, err = Test(ctx, TestOptions{Pack: relaxed(t), Golden: goldenDir, AllowUnsigned: true})
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Step(StepEvaluators); s.Status != StepPass {
		t.Errorf("without a baseline: evaluators %s %v", s.Status, s.Problems)
	}
	cases, err := Load(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	cand, err := pack.DecodeAndValidate(relaxed(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	probs := PackGate(cases, GateOptions{Baseline: loadTestPack(t, baselineFile)})(cand)
	if !slices.Contains(codesOf(probs), CodeReleaseGate) || !slices.Contains(codesOf(probs), CodeTargetMissed) {
		t.Errorf("PackGate on the relaxed regression: %v", codesOf(probs))
	}
}

// TestValidationFailsWhateverTheTrigger: a pack failing a built-in gate
// fails the report under every trigger; the schema step carries the
// problems of gates no selected step covers and the text shows them.
func TestValidationFailsWhateverTheTrigger(t *testing.T) {
	bad := mutatePack(t, baselineFile, func(m map[string]any) {
		perms := m["tooling_layer"].(map[string]any)["permissions"].([]any)
		perms[0].(map[string]any)["adapter_id"] = "adp_nope"
	})
	for _, tr := range append(Triggers(), "") {
		opts := TestOptions{Pack: bad, Golden: goldenDir, AllowUnsigned: true}
		if tr != "" {
			opts.Triggers = []Trigger{tr}
		}
		rep, err := Test(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Passed() {
			t.Errorf("trigger %q: a pack with an unknown adapter passes", tr)
		}
		steps, _ := StepsFor(opts.Triggers...)
		if !slices.Contains(steps, StepReferences) {
			s := rep.Step(StepSchema)
			if s.Status != StepFail || !slices.ContainsFunc(s.Problems, func(p pack.Problem) bool { return p.Gate == pack.GateReferential }) {
				t.Errorf("trigger %s: schema step %s %v, want the referential problems", tr, s.Status, s.Problems)
			}
			if !strings.Contains(rep.Text(), "adp_nope") {
				t.Errorf("trigger %s: the text does not show the problem:\n%s", tr, rep.Text())
			}
		}
	}
}

// TestNoEvidence: no golden cases, an intent with targets but no runs and
// a run whose intent has no target all fail.
func TestNoEvidence(t *testing.T) {
	ctx := context.Background()
	cand := readTestFile(t, regressionFile)
	rep, err := Test(ctx, TestOptions{Pack: cand, Baseline: readTestFile(t, baselineFile), Golden: t.TempDir(), AllowUnsigned: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Step{StepToolManifest, StepCompile, StepReplay, StepEvaluators, StepReleaseGates} {
		if r := rep.Step(s); r.Status != StepFail || !slices.Contains(codesOf(r.Problems), CodeNoCases) {
			t.Errorf("empty golden dir: %s %s %v", s, r.Status, r.Problems)
		}
	}
	if rep.Passed() {
		t.Error("an empty golden dir passes")
	}
	base := loadTestPack(t, baselineFile)
	for _, cs := range [][]*Case{nil, {}} {
		if probs := PackGate(cs, GateOptions{})(base); !slices.Contains(codesOf(probs), CodeNoCases) {
			t.Errorf("PackGate(%v) = %v, want no_cases", cs, probs)
		}
	}
	// Cases relabelled to an intent without a target: every run is a
	// no_target problem, and support.refund has no runs.
	cases, err := Load(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	var scripted []*Case
	for _, c := range cases {
		if c.Packet == "" {
			c.Intent = "support.refund_x"
			scripted = append(scripted, c)
		}
	}
	rep, err = Test(ctx, TestOptions{Pack: cand, Cases: scripted, AllowUnsigned: true})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Step(StepEvaluators)
	if rep.Passed() || s.Status != StepFail {
		t.Fatalf("relabelled cases pass:\n%s", rep.Text())
	}
	var noTarget, noRuns int
	for _, p := range s.Problems {
		switch {
		case p.Code == CodeNoTarget && strings.Contains(p.Message, "support.refund_x") && strings.Contains(p.Message, p.Path[:strings.Index(p.Path, ".")]):
			noTarget++
		case p.Code == CodeNoRuns && p.Path == "support.refund":
			noRuns++
		}
	}
	if noTarget != len(scripted) || noRuns != 1 {
		t.Errorf("%d no_target (want %d), %d no_runs (want 1): %v", noTarget, len(scripted), noRuns, s.Problems)
	}
}

// TestGivenBaselineIsNeverEmpty: a non-nil empty baseline is an error.
func TestGivenBaselineIsNeverEmpty(t *testing.T) {
	_, err := Test(context.Background(), TestOptions{Pack: readTestFile(t, regressionFile), Baseline: []byte{}, Golden: goldenDir, AllowUnsigned: true})
	if err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty baseline: %v", err)
	}
}

// TestInvalidScore: NaN, ±Inf and a panic fail the metric, its target and
// its release gate; none becomes 0.
func TestInvalidScore(t *testing.T) {
	p := loadTestPack(t, baselineFile)
	p.EvaluationLayer.ReleaseGates = append(p.EvaluationLayer.ReleaseGates, pack.ReleaseGate{Metric: "host", MaxDelta: 100})
	runs := []*Run{{Case: "a", Intent: "support.refund", Status: "DECIDED", Expect: Expect{Status: "DECIDED"}, Stable: true, ReplayEqual: true}}
	good := NewEvaluators()
	if err := good.Register(Evaluator{Name: "host", Score: func([]*Run) float64 { return 0 }}); err != nil {
		t.Fatal(err)
	}
	baseline, err := Score(p, runs, ScoreOptions{Evaluators: good})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func([]*Run) float64{
		"NaN":   func([]*Run) float64 { return math.NaN() },
		"+Inf":  func([]*Run) float64 { return math.Inf(1) },
		"-Inf":  func([]*Run) float64 { return math.Inf(-1) },
		"panic": func([]*Run) float64 { panic("boom") },
	} {
		evs := NewEvaluators()
		if err := evs.Register(Evaluator{Name: "host", Score: f}); err != nil {
			t.Fatal(err)
		}
		sc, err := Score(p, runs, ScoreOptions{Evaluators: evs, Baseline: baseline})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m := sc.Intents[0].Metrics[5]
		if m.Invalid == "" || m.TargetMet || m.GateHeld == nil || *m.GateHeld || sc.TargetsMet() || sc.ReleaseGatesHeld() {
			t.Errorf("%s: %+v", name, m)
		}
		codes := codesOf(EvaluationGate(sc))
		if !slices.Contains(codes, CodeInvalidScore) || !slices.Contains(codes, CodeReleaseGate) {
			t.Errorf("%s: gate problems %v", name, codes)
		}
		if !strings.Contains(sc.Text(), "invalid") {
			t.Errorf("%s: text\n%s", name, sc.Text())
		}
	}
}

// TestUnknownReleaseGateMetric: a release gate naming a metric no
// evaluator scores is a problem, with or without a baseline.
func TestUnknownReleaseGateMetric(t *testing.T) {
	cand := mutatePack(t, baselineFile, func(m map[string]any) {
		el := m["evaluation_layer"].(map[string]any)
		el["release_gates"] = append(el["release_gates"].([]any), map[string]any{"metric": "polcy", "max_delta": 0})
	})
	for _, withBase := range []bool{false, true} {
		opts := TestOptions{Pack: cand, Golden: goldenDir, AllowUnsigned: true}
		if withBase {
			opts.Baseline = readTestFile(t, baselineFile)
		}
		rep, err := Test(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		s := rep.Step(StepEvaluators)
		if rep.Passed() || !slices.ContainsFunc(s.Problems, func(p pack.Problem) bool {
			return p.Code == CodeUnknownMetric && strings.Contains(p.Message, `"polcy"`)
		}) {
			t.Errorf("baseline %t: evaluators %s %v", withBase, s.Status, s.Problems)
		}
	}
}

// TestScorecardCoversItsInputs: the hash changes with the pack's content
// and with any case, not with the cases' order.
func TestScorecardCoversItsInputs(t *testing.T) {
	p := loadTestPack(t, baselineFile)
	cases := []*Case{loadCase(t, "flow3-low-value-decided"), loadCase(t, "fraud-escalation")}
	r, err := NewRunner(RunnerOptions{Pack: p})
	if err != nil {
		t.Fatal(err)
	}
	runs := r.RunAll(context.Background(), cases)
	score := func(p *pack.Pack, cases []*Case) *Scorecard {
		t.Helper()
		sc, err := Score(p, runs, ScoreOptions{Cases: cases})
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	sc := score(p, cases)
	if h, _ := pack.ContentHash(p); sc.PackHash != h || len(sc.CaseDigests) != 2 || !slices.IsSorted(sc.CaseDigests) || !sc.Verify() {
		t.Fatalf("scorecard %+v", sc)
	}
	if again := score(p, []*Case{cases[1], cases[0]}); again.Hash != sc.Hash {
		t.Error("the cases' order changes the hash")
	}
	changed := *cases[1]
	changed.Description += " (edited)"
	if other := score(p, []*Case{cases[0], &changed}); other.Hash == sc.Hash || slices.Equal(other.CaseDigests, sc.CaseDigests) {
		t.Error("an edited case leaves the hash unchanged")
	}
	q := loadTestPack(t, baselineFile)
	q.PackMeta.Description += " (edited)"
	if other := score(q, cases); other.Hash == sc.Hash || other.PackHash == sc.PackHash {
		t.Error("an edited pack leaves the hash unchanged")
	}
}

// TestContradictoryExpect: a case requiring and forbidding the same call
// is a case error.
func TestContradictoryExpect(t *testing.T) {
	r := &Run{Case: "c", Status: "DECIDED", Stable: true, ReplayEqual: true,
		Expect: Expect{Status: "DECIDED", Calls: []string{"adp_orders.lookup", "x.y"}, NoCalls: []string{"x.y"}}}
	probs := r.Problems()
	if !slices.ContainsFunc(probs, func(p pack.Problem) bool {
		return p.Code == CodeCaseError && p.Gate == pack.GateReplay && p.Path == "c.expect.no_calls[0]"
	}) {
		t.Errorf("problems %v", probs)
	}
}
