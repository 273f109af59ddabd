package engine

import (
	"reflect"
	"testing"

	"github.com/contextos/contextos/internal/deepcheck"
)

// TestCloneStepResultSharesNothing: a step result with every member set
// (by reflection, so a member added later is covered) copies to an equal
// one that shares no list, map or pointer with it.
func TestCloneStepResultSharesNothing(t *testing.T) {
	var s StepResult
	deepcheck.Fill(reflect.ValueOf(&s).Elem())
	tests := []struct {
		name string
		s    StepResult
	}{
		{"every member set", s},
		{"the zero value", StepResult{}},
	}
	for _, tc := range tests {
		c := cloneStepResult(tc.s)
		if !reflect.DeepEqual(c, tc.s) {
			t.Errorf("%s: the copy differs:\n%+v\n%+v", tc.name, c, tc.s)
		}
		if p := deepcheck.Shared("result", reflect.ValueOf(c), reflect.ValueOf(tc.s)); p != "" {
			t.Errorf("%s: the copy shares %s", tc.name, p)
		}
	}
}

// TestClonePlanSharesNothing: a plan with every member set copies to an
// equal one that shares no list, map or pointer with it.
func TestClonePlanSharesNothing(t *testing.T) {
	var p Plan
	deepcheck.Fill(reflect.ValueOf(&p).Elem())
	tests := []struct {
		name string
		p    *Plan
	}{
		{"every member set", &p},
		{"the zero value", &Plan{}},
	}
	for _, tc := range tests {
		c := clonePlan(tc.p)
		if !reflect.DeepEqual(c, tc.p) {
			t.Errorf("%s: the copy differs:\n%+v\n%+v", tc.name, c, tc.p)
		}
		if s := deepcheck.Shared("plan", reflect.ValueOf(c), reflect.ValueOf(tc.p)); s != "" {
			t.Errorf("%s: the copy shares %s", tc.name, s)
		}
	}
	if clonePlan(nil) != nil {
		t.Error("nil does not copy to nil")
	}
}
