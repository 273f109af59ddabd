package engine

import (
	"testing"

	"github.com/contextos/contextos/compiler"
)

// TestLoopGuard: a plan of steps alone is sent back as a loop when its
// steps are those of the last plan that ran (or proposed a decision);
// plans whose steps never ran — the turn that took the run over its
// budget, a plan the guard itself sent back — are passed over.
func TestLoopGuard(t *testing.T) {
	t.Parallel()
	a := []Step{{CapabilityID: "x.a"}}
	b := []Step{{CapabilityID: "x.b"}}
	steps := func(s []Step) *Plan { return &Plan{Steps: s} }
	decide := &Plan{Decision: &DecisionProposal{DecisionKey: "k", Outcome: "approved"}}
	for _, tc := range []struct {
		name  string
		prior []*Plan
		ran   []int // the turns whose steps ran
		loop  bool
	}{
		{"first plan", nil, nil, false},
		{"the steps that just ran", []*Plan{steps(a)}, []int{0}, true},
		{"after other steps ran", []*Plan{steps(a), steps(b)}, []int{0, 1}, false},
		{"again after the guard sent them back", []*Plan{steps(a), steps(a)}, []int{0}, true},
		{"after a turn that never ran (over its budget)", []*Plan{steps(a)}, nil, false},
		{"after a decision was sent back", []*Plan{steps(a), decide}, []int{0}, false},
		{"after a sent-back plan of other steps", []*Plan{steps(a), steps(b)}, []int{0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cp := &checkpointState{Plans: append(append([]*Plan{}, tc.prior...), steps(a))}
			for _, turn := range tc.ran {
				cp.Results = append(cp.Results, StepResult{Turn: turn})
			}
			in := &CriticInput{Compiled: &compiler.CompiledContext{ContextLedger: compiler.ContextLedger{Tools: []string{"x.a", "x.b"}}}, Plan: cp.Plans[len(cp.Plans)-1]}
			j := builtinCritic{}.verify(in, cp)
			if got := j.Reason == "loop_guard: the plan repeats the previous steps"; got != tc.loop {
				t.Errorf("verify = %+v, want loop %t", j, tc.loop)
			}
		})
	}
}
