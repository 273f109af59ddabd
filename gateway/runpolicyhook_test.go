package gateway_test

import (
	"reflect"
	"testing"

	"github.com/contextos/contextos/internal/gatewayhook"
	"github.com/contextos/contextos/policy"
)

// TestRunPolicyHookIsTheRunsOwn: gatewayhook.RunPolicy is the evaluation
// Run.Policy copies, as the run holds it: equal to the copy, the same
// value each time, and sharing nothing with the copy.
func TestRunPolicyHookIsTheRunsOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	own, ok := gatewayhook.RunPolicy(f.run).(*policy.Evaluation)
	if !ok || own == nil {
		t.Fatalf("RunPolicy = %#v, want the run's *policy.Evaluation", gatewayhook.RunPolicy(f.run))
	}
	copied := f.run.Policy()
	if !reflect.DeepEqual(own, copied) {
		t.Errorf("RunPolicy\n%+v\nis not what Run.Policy copies\n%+v", own, copied)
	}
	if again := gatewayhook.RunPolicy(f.run).(*policy.Evaluation); again != own {
		t.Error("RunPolicy returned another value the second time: a copy, not the run's own")
	}
	if own == copied || len(own.Decisions) == 0 || &own.Decisions[0] == &copied.Decisions[0] {
		t.Error("Run.Policy shares the run's evaluation")
	}
}
