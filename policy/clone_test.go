package policy_test

import (
	"reflect"
	"testing"

	"github.com/contextos/contextos/internal/deepcheck"
	"github.com/contextos/contextos/policy"
)

// TestEvaluationCloneSharesNothing: a clone of an evaluation with every
// member filled is equal to it and shares no list or pointer with it, so
// editing one (a gate switched off, a decision's allow flipped) leaves the
// other as it was.
func TestEvaluationCloneSharesNothing(t *testing.T) {
	var e policy.Evaluation
	deepcheck.Fill(reflect.ValueOf(&e).Elem())
	c := e.Clone()
	if !reflect.DeepEqual(c, &e) {
		t.Fatalf("clone\n%+v\nof\n%+v", c, e)
	}
	if p := deepcheck.Shared("Evaluation", reflect.ValueOf(&e).Elem(), reflect.ValueOf(c).Elem()); p != "" {
		t.Errorf("the clone shares %s", p)
	}
	if (*policy.Evaluation)(nil).Clone() != nil {
		t.Error("a nil evaluation's clone is not nil")
	}
}
