package policy_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/contextos/contextos/internal/logic"
	"github.com/contextos/contextos/policy"
	"github.com/google/go-cmp/cmp"
)

// One error type for both boundaries: what it matches and how it reads
// depend on its Kind.
func TestErrorKinds(t *testing.T) {
	t.Parallel()
	cause := errors.New("unsupported operator \"set\"")
	for _, c := range []struct {
		name string
		err  *policy.Error
		text string
		is   []bool // ErrPrepare, ErrEvaluation, ErrBudget
	}{
		{"prepare", &policy.Error{Kind: policy.KindPrepare, BundleID: "b", RuleID: "r", Err: cause},
			`policy: cannot prepare bundle b rule r: unsupported operator "set"`, []bool{true, false, false}},
		{"prepare over the static budget", &policy.Error{Kind: policy.KindPrepare, GateID: "G", Err: fmt.Errorf("too deep: %w", logic.ErrBudget)},
			"policy: cannot prepare approval gate G: too deep: JsonLogic budget exceeded", []bool{true, false, true}},
		{"missing variable", &policy.Error{Kind: policy.KindMissingVariable, BundleID: "b", RuleID: "r", Path: "user.role", Msg: "absent"},
			"policy: bundle b rule r: missing_variable user.role: absent", []bool{false, true, false}},
		{"evaluation budget", &policy.Error{Kind: policy.KindBudget, GateID: "G", Path: "and[1].map"},
			"policy: approval gate G: budget_exceeded and[1].map", []bool{false, true, true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := []bool{errors.Is(c.err, policy.ErrPrepare), errors.Is(c.err, policy.ErrEvaluation), errors.Is(c.err, policy.ErrBudget)}
			if diff := cmp.Diff(c.is, got); diff != "" {
				t.Errorf("Is ErrPrepare, ErrEvaluation, ErrBudget (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.text, c.err.Error()); diff != "" {
				t.Errorf("Error() (-want +got):\n%s", diff)
			}
		})
	}
}
