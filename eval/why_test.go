package eval

import (
	"context"
	"strings"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/runcontext"
	"github.com/google/go-cmp/cmp"
)

// pack test's text says why each case failed: under the case, one line
// per expectation it missed, naming the expectation, what the run did and
// what the case expects.
func TestReportTextSaysWhyACaseFailed(t *testing.T) {
	t.Parallel()
	rep, err := Test(context.Background(), TestOptions{Pack: readTestFile(t, "testdata/packs/support-2.0.0-policy-regression.json"),
		Baseline: readTestFile(t, baselineFile), Golden: goldenDir, AllowUnsigned: true})
	if err != nil {
		t.Fatal(err)
	}
	text := rep.Text()
	failed := 0
	for _, c := range rep.Cases {
		if c.Passed {
			continue
		}
		failed++
		if len(c.Problems) == 0 {
			t.Errorf("case %s failed with no problem", c.Case)
		}
		var lines []string
		for _, p := range c.Problems {
			member := "" // a problem of no member (an ungated write) names none
			if m, ok := strings.CutPrefix(p.Path, c.Case+"."); ok {
				member = m + ": "
			}
			lines = append(lines, "         - "+member+p.Message+" ["+string(p.Code)+"]")
		}
		head := "  FAIL " + c.Case + " (" + c.Kind + ") "
		i := strings.Index(text, head)
		if i < 0 {
			t.Fatalf("the text has no line for failed case %s:\n%s", c.Case, text)
		}
		got := strings.Split(text[i:], "\n")[1 : 1+len(lines)]
		if diff := cmp.Diff(lines, got); diff != "" {
			t.Errorf("case %s: the lines under it (-want +got):\n%s", c.Case, diff)
		}
	}
	if failed == 0 {
		t.Fatal("the policy regression fails no case")
	}
	// The lines say what the run did and what the case expects.
	for _, want := range []string{
		"expect.status: the run ended DECIDED, the case expects DEFERRED [status]",
		`expect.runtime_controls: the runtime controls differ from the expected ones: at approval_gates_active[0], nothing; the case expects "GATE_FINANCE_APPROVAL" [runtime_controls]`,
		"expect.policy_results[1]: rule R_HIGH_VALUE_REQUIRES_APPROVAL did not decide allow; it decided not_applicable [policy_results]",
		"ran though the case expects the run to pause at GATE_FINANCE_APPROVAL, where it never paused [ungated_write]",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the text does not say %q:\n%s", want, text)
		}
	}
}

// Each expectation a run misses names what the run did, not only what the
// case expected.
func TestProblemsSayWhatTheRunDid(t *testing.T) {
	t.Parallel()
	budget := compiler.BudgetReport{TokensAllocated: map[runcontext.Bucket]int{runcontext.BucketEvidence: 400}, TokensUsedAtCompile: 830}
	tests := []struct {
		name string
		run  func(r *Run)
		want string
	}{
		{"calls", func(r *Run) {
			r.Expect.Calls = []string{"adp_payments.issue_refund"}
			r.Calls = []Call{{CapabilityID: "adp_policy.eval"}, {CapabilityID: "adp_orders.lookup"}}
		}, "adp_payments.issue_refund was never called; the run called adp_orders.lookup, adp_policy.eval"},
		{"calls, none made", func(r *Run) { r.Expect.Calls = []string{"adp_orders.lookup"} }, "adp_orders.lookup was never called; the run called nothing"},
		{"policy result not among the results", func(r *Run) {
			r.Expect.PolicyResults = []PolicyResult{{RuleID: "R_X", Outcome: "deny"}}
			r.Ledger = &compiler.ContextLedger{}
		}, "rule R_X did not decide deny; it decided nothing (it is not among the compile's policy results)"},
		{"budget report", func(r *Run) {
			want := budget
			want.TokensUsedAtCompile = 850
			r.Expect.BudgetReport = &want
			r.Compiled = &compiler.CompiledContext{BudgetReport: budget}
		}, "the budget report differs from the expected one: at tokens_used_at_compile, 830; the case expects 850"},
		{"budget report, a member the case lacks", func(r *Run) {
			want := budget
			want.TokensAllocated = map[runcontext.Bucket]int{}
			r.Expect.BudgetReport = &want
			r.Compiled = &compiler.CompiledContext{BudgetReport: budget}
		}, "the budget report differs from the expected one: at tokens_allocated.evidence, 400; the case expects nothing"},
		{"tool manifest, a capability the run lacks", func(r *Run) {
			r.Expect.ToolManifest = []compiler.ToolManifestEntry{{AdapterID: "adp_orders", Capabilities: []string{"lookup", "cancel"}}}
			r.Compiled = &compiler.CompiledContext{Manifests: compiler.Manifests{ToolManifest: []compiler.ToolManifestEntry{{AdapterID: "adp_orders", Capabilities: []string{"lookup"}}}}}
		}, `the compiled tool manifest differs from the expected one: at [0].capabilities[1], nothing; the case expects "cancel"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &Run{Case: "c1", Status: "DECIDED", Expect: Expect{Status: "DECIDED"}, ReplayEqual: true, Stable: true}
			tc.run(r)
			var got []string
			for _, p := range r.Problems() {
				got = append(got, p.Message)
			}
			if diff := cmp.Diff([]string{tc.want}, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDifference(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		want, got any
		say       string
	}{
		{"equal", map[string]any{"a": []any{1, "x"}}, map[string]any{"a": []any{1, "x"}}, ""},
		{"scalar", map[string]any{"a": 1}, map[string]any{"a": 2}, ": at a, 2; the case expects 1"},
		{"nested first in name order", map[string]any{"b": map[string]any{"c": true}, "a": 1}, map[string]any{"b": map[string]any{"c": false}, "a": 2}, ": at a, 2; the case expects 1"},
		{"extra element", []any{"x"}, []any{"x", "y"}, `: at [1], "y"; the case expects nothing`},
		{"other type", map[string]any{"a": []any{1}}, map[string]any{"a": "1"}, `: at a, "1"; the case expects [1]`},
		{"top level", 1, "1", `: at the top, "1"; the case expects 1`},
		{"long value clipped", map[string]any{"a": ""}, map[string]any{"a": strings.Repeat("x", 300)}, `: at a, "` + strings.Repeat("x", 119) + `…; the case expects ""`},
		{"no JSON form", func() {}, 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := difference(tc.want, tc.got); got != tc.say {
				t.Errorf("difference = %q, want %q", got, tc.say)
			}
		})
	}
}
