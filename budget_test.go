package contextos_test

import (
	"context"
	"errors"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/policy"
)

// Options.Policy reaches the compiler's policy evaluation: a budget the
// pack's rules exceed fails the run closed, naming the rule, before any
// tool is called.
func TestPolicyBudgetReachesTheRun(t *testing.T) {
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Policy: policy.Options{MaxOperations: 2}}})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 1200, true)
	_, err := h.Runtime.Invoke(context.Background(), req, rc)
	if !errors.Is(err, policy.ErrBudget) {
		t.Fatalf("Invoke = %v, want policy.ErrBudget", err)
	}
	var ee *policy.Error
	if !errors.As(err, &ee) || ee.RuleID == "" {
		t.Errorf("the error names no rule: %v", err)
	}
	for _, a := range []string{"adp_orders", "adp_policy", "adp_payments"} {
		if n := len(h.Adapter(a).Calls()); n != 0 {
			t.Errorf("%s was called %d times", a, n)
		}
	}
}
