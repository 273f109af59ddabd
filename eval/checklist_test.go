package eval

import (
	"context"
	"crypto/ed25519"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/pack/packtest"
	"github.com/contextos/contextos/runcontext"
)

var allCases = []string{"correction-flow3", "flow1-high-value-approved", "flow1-pending-approval", "flow2-unverified-denied", "flow3-low-value-decided",
	"flow4-replay", "fraud-escalation", "incident-refund-failed", "refund-tool-fails", "starved-evidence-budget", "unverified-identity-refused"}

// TestSupportPack runs the CI checklist on the support pack and its
// candidate variants against the golden directory and checks every
// step's status and every case's pass or fail.
func TestSupportPack(t *testing.T) {
	t.Parallel()
	pass, fail, skip := StepPass, StepFail, StepSkipped
	tests := []struct {
		name      string
		pack      string
		baseline  bool
		steps     map[Step]StepStatus
		failCases []string
		codes     map[Step][]string // problem codes expected in a failed step
		gatesHeld bool
	}{
		{
			name: "baseline alone", pack: baselineFile,
			steps: map[Step]StepStatus{StepSchema: pass, StepReferences: pass, StepPolicy: pass, StepSecurity: pass, StepToolManifest: pass,
				StepCompile: pass, StepReplay: pass, StepEvaluators: pass, StepReleaseGates: skip, StepDiff: skip},
		},
		{
			name: "policy change regresses the policy score", pack: "testdata/packs/support-2.0.0-policy-regression.json", baseline: true,
			steps: map[Step]StepStatus{StepSchema: pass, StepReferences: pass, StepPolicy: pass, StepSecurity: pass, StepToolManifest: pass,
				StepCompile: pass, StepReplay: pass, StepEvaluators: fail, StepReleaseGates: fail, StepDiff: pass},
			failCases: []string{"flow1-high-value-approved", "flow1-pending-approval", "flow4-replay"},
			codes:     map[Step][]string{StepEvaluators: {CodeTargetMissed}, StepReleaseGates: {CodeReleaseGate}},
		},
		{
			name: "new capability changes the tool manifest", pack: "testdata/packs/support-1.1.0-new-tool.json", baseline: true,
			steps: map[Step]StepStatus{StepSchema: pass, StepReferences: pass, StepPolicy: pass, StepSecurity: pass, StepToolManifest: fail,
				StepCompile: fail, StepReplay: pass, StepEvaluators: pass, StepReleaseGates: pass, StepDiff: pass},
			failCases: []string{"flow1-high-value-approved", "flow1-pending-approval", "flow2-unverified-denied", "flow3-low-value-decided", "refund-tool-fails", "starved-evidence-budget"},
			codes:     map[Step][]string{StepToolManifest: {CodeToolSurface}, StepCompile: {CodeBudgetReport}},
			gatesHeld: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := TestOptions{Pack: readTestFile(t, tc.pack), Golden: goldenDir, AllowUnsigned: true}
			if tc.baseline {
				opts.Baseline = readTestFile(t, baselineFile)
			}
			rep, err := Test(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(rep.Steps); got != len(Steps()) {
				t.Fatalf("%d steps, want %d", got, len(Steps()))
			}
			for _, s := range rep.Steps {
				if s.Status != tc.steps[s.Step] {
					t.Errorf("step %s = %s, want %s: %v", s.Step, s.Status, tc.steps[s.Step], s.Problems)
				}
				for _, code := range tc.codes[s.Step] {
					if !slices.ContainsFunc(s.Problems, func(p pack.Problem) bool { return string(p.Code) == code }) {
						t.Errorf("step %s has no %s problem: %v", s.Step, code, s.Problems)
					}
				}
			}
			var names, failed []string
			for _, c := range rep.Cases {
				names = append(names, c.Case)
				if !c.Passed {
					failed = append(failed, c.Case)
				}
			}
			if !slices.Equal(names, allCases) {
				t.Errorf("cases = %v, want %v", names, allCases)
			}
			if !slices.Equal(failed, tc.failCases) {
				t.Errorf("failed cases = %v, want %v", failed, tc.failCases)
			}
			wantPassed := !slices.Contains(slices.Collect(maps.Values(tc.steps)), StepFail)
			if rep.Passed() != wantPassed {
				t.Errorf("Passed = %t, want %t", rep.Passed(), wantPassed)
			}
			held, evaluated := rep.ReleaseGates()
			if evaluated != tc.baseline || held != tc.gatesHeld {
				t.Errorf("ReleaseGates = %t, %t; want %t, %t", held, evaluated, tc.gatesHeld, tc.baseline)
			}
			if rep.Scorecard == nil || !rep.Scorecard.Verify() {
				t.Errorf("scorecard missing or its hash does not verify")
			}
		})
	}
}

// TestReportGolden holds the report of the policy regression, as JSON and
// text, to golden files; the same inputs give the same bytes.
func TestReportGolden(t *testing.T) {
	opts := TestOptions{Pack: readTestFile(t, "testdata/packs/support-2.0.0-policy-regression.json"), Baseline: readTestFile(t, baselineFile),
		Golden: goldenDir, AllowUnsigned: true}
	rep, err := Test(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	j, err := rep.JSON()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Test(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	j2, _ := again.JSON()
	if string(j) != string(j2) {
		t.Error("two reports of the same inputs differ")
	}
	golden(t, "testdata/report.golden.json", j)
	golden(t, "testdata/report.golden.txt", []byte(rep.Text()))
	golden(t, "testdata/scorecard.golden.txt", []byte(rep.Scorecard.Text()))
	sj, err := rep.Scorecard.JSON()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/scorecard.golden.json", append(sj, '\n'))
}

// TestTriggers selects the steps each trigger requires.
func TestTriggers(t *testing.T) {
	tests := []struct {
		triggers []Trigger
		want     []Step
	}{
		{nil, Steps()},
		{[]Trigger{TriggerPolicyBundleUpdated}, []Step{StepSchema, StepPolicy, StepToolManifest, StepCompile, StepReplay}},
		{[]Trigger{TriggerOntologyUpdated}, []Step{StepSchema, StepReferences, StepCompile}},
		{[]Trigger{TriggerAdapterSchemaUpdated}, []Step{StepSchema, StepReferences, StepToolManifest, StepCompile, StepReplay}},
		{[]Trigger{TriggerDecisionCatalogUpdated}, []Step{StepSchema, StepReferences, StepCompile}},
		{[]Trigger{TriggerMemoryPolicyUpdated}, []Step{StepSchema, StepSecurity, StepCompile}},
		{[]Trigger{TriggerEvaluatorUpdated}, []Step{StepSchema, StepCompile, StepReplay, StepEvaluators, StepReleaseGates}},
		{[]Trigger{TriggerModelConfigUpdated}, []Step{StepSchema, StepCompile, StepReplay}},
		{[]Trigger{TriggerModelConfigUpdated, TriggerMemoryPolicyUpdated}, []Step{StepSchema, StepSecurity, StepCompile, StepReplay}},
	}
	for _, tc := range tests {
		got, err := StepsFor(tc.triggers...)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("StepsFor(%v) = %v, %v; want %v", tc.triggers, got, err, tc.want)
		}
	}
	for _, tr := range Triggers() {
		if p, err := ParseTrigger(string(tr)); err != nil || p != tr {
			t.Errorf("ParseTrigger(%s) = %s, %v", tr, p, err)
		}
	}
	for _, bad := range []string{"", "policy_bundle_updated", "PACK_UPDATED"} {
		_, err := ParseTrigger(bad)
		var te *TriggerError
		if !errors.Is(err, ErrTrigger) || !errors.As(err, &te) || te.Trigger != bad {
			t.Errorf("ParseTrigger(%q) = %v, want a *TriggerError", bad, err)
		}
		if _, err := StepsFor(Trigger(bad)); !errors.Is(err, ErrTrigger) {
			t.Errorf("StepsFor(%q) = %v, want ErrTrigger", bad, err)
		}
		if _, err := Test(context.Background(), TestOptions{Pack: []byte("{}"), Triggers: []Trigger{Trigger(bad)}}); !errors.Is(err, ErrTrigger) {
			t.Errorf("Test with trigger %q = %v, want ErrTrigger", bad, err)
		}
	}
	// A trigger runs only its steps.
	rep, err := Test(context.Background(), TestOptions{Pack: readTestFile(t, "testdata/packs/support-2.0.0-policy-regression.json"),
		Baseline: readTestFile(t, baselineFile), Golden: goldenDir, AllowUnsigned: true, Triggers: []Trigger{TriggerModelConfigUpdated}})
	if err != nil {
		t.Fatal(err)
	}
	var ran []Step
	for _, s := range rep.Steps {
		ran = append(ran, s.Step)
	}
	if !slices.Equal(ran, []Step{StepSchema, StepCompile, StepReplay}) || !rep.Passed() {
		t.Errorf("steps = %v, passed %t; want schema, compile, replay passing", ran, rep.Passed())
	}
	if _, evaluated := rep.ReleaseGates(); evaluated {
		t.Error("release gates reported evaluated though not selected")
	}
}

// TestTestInputs: bad options are errors; a bad pack is a failed report.
func TestTestInputs(t *testing.T) {
	ctx := context.Background()
	base := readTestFile(t, baselineFile)
	if _, err := Test(ctx, TestOptions{}); err == nil {
		t.Error("Test without a pack: no error")
	}
	if _, err := Test(ctx, TestOptions{Pack: base, AllowUnsigned: true, Golden: "testdata/none"}); err == nil {
		t.Error("Test with a missing golden dir: no error")
	}
	if _, err := Test(ctx, TestOptions{Pack: base, Baseline: base}); err == nil {
		t.Error("Test with an unsigned baseline without AllowUnsigned: no error")
	}
	// A signed pack verifies with the key; with another key it fails the
	// schema step and nothing else runs.
	signer, other := packtest.NewSigner(1), packtest.NewSigner(2)
	signed := signer.Sign(t, loadTestPack(t, baselineFile))
	for _, tc := range []struct {
		name string
		key  packtest.Signer
		pass bool
	}{{"right key", signer, true}, {"wrong key", other, false}} {
		keys := runcontext.NewStaticKeys(map[string]ed25519.PublicKey{tc.key.Kid: tc.key.Public()})
		rep, err := Test(ctx, TestOptions{Pack: signed, Keys: keys, Golden: goldenDir})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if rep.Passed() != tc.pass || (rep.Step(StepCompile).Status == StepPass) != tc.pass {
			t.Errorf("%s: passed %t compile %s, want passed %t", tc.name, rep.Passed(), rep.Step(StepCompile).Status, tc.pass)
		}
	}
	for name, doc := range map[string][]byte{"unsigned": base, "malformed": []byte("{"), "invalid": []byte(`{"pack_meta":{}}`)} {
		rep, err := Test(ctx, TestOptions{Pack: doc, AllowUnsigned: name != "unsigned", Golden: goldenDir})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rep.Passed() || rep.Step(StepSchema).Status != StepFail {
			t.Errorf("%s: passed %t, schema %s; want a failed schema step", name, rep.Passed(), rep.Step(StepSchema).Status)
		}
		if s := rep.Step(StepCompile); s.Status != StepSkipped {
			t.Errorf("%s: compile = %s, want skipped", name, s.Status)
		}
	}
}

// docs/pack-ci.md shows the report of the policy regression: it is this
// golden file, byte for byte.
func TestDocsShowTheReport(t *testing.T) {
	page := string(readTestFile(t, filepath.Join("..", "docs", "pack-ci.md")))
	report := string(readTestFile(t, "testdata/report.golden.txt"))
	if !strings.Contains(page, "```\n"+report+"```\n") {
		t.Error("docs/pack-ci.md does not show testdata/report.golden.txt; copy it there")
	}
}

// The risk gate's warnings are in the report, by gate id, on the step that
// reports the risk gate (or on the schema step when the triggers select no
// such step), and never fail it.
func TestReportWarnings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		triggers []Trigger
		on       Step
	}{
		{"every step", nil, StepPolicy},
		{"triggers without the policy step", []Trigger{TriggerMemoryPolicyUpdated}, StepSchema},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := Test(context.Background(), TestOptions{Pack: readTestFile(t, baselineFile), AllowUnsigned: true, Triggers: tc.triggers})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range rep.Steps {
				want := 0
				if s.Step == tc.on {
					want = 1
				}
				if len(s.Warnings) != want {
					t.Fatalf("step %s has %d warnings, want %d: %v", s.Step, len(s.Warnings), want, s.Warnings)
				}
			}
			s := rep.Step(tc.on)
			w := s.Warnings[0]
			if s.Status != StepPass || w.Gate != pack.GateRisk || w.Code != pack.CodeCallerAssertedControl ||
				!strings.Contains(w.Message, "gate GATE_FINANCE_APPROVAL") || !strings.Contains(w.Message, "tool.args.amount_inr") {
				t.Errorf("step %s: %s, warning %+v", s.Step, s.Status, w)
			}
			if txt := rep.Text(); !strings.Contains(txt, "warning: risk: policy_layer.approval_gates[0].when: gate GATE_FINANCE_APPROVAL") {
				t.Errorf("the text report does not show the warning:\n%s", txt)
			}
		})
	}
}
