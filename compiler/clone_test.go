package compiler_test

import (
	"reflect"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/deepcheck"
)

// TestCloneSharesNothing: a compiled context with every member set (by
// reflection, so a member added later is covered) clones to an equal one
// that shares no list, map or pointer with it; a compiled context as the
// compiler makes it too, and editing everything the clone reaches leaves
// the original as it was (its hash still verifies).
func TestCloneSharesNothing(t *testing.T) {
	t.Parallel()
	var filled compiler.CompiledContext
	deepcheck.Fill(reflect.ValueOf(&filled).Elem())
	tests := []struct {
		name string
		cc   *compiler.CompiledContext
	}{
		{"every member set", &filled},
		{"a compile's", canonicalScenario(t).compile(t)},
		{"the zero value", &compiler.CompiledContext{}},
	}
	for _, tc := range tests {
		c := tc.cc.Clone()
		if !reflect.DeepEqual(c, tc.cc) {
			t.Errorf("%s: the clone differs:\n%+v\n%+v", tc.name, c, tc.cc)
		}
		if s := deepcheck.Shared("cc", reflect.ValueOf(c), reflect.ValueOf(tc.cc)); s != "" {
			t.Errorf("%s: the clone shares %s", tc.name, s)
		}
	}
	cc := canonicalScenario(t).compile(t)
	if err := cc.Verify(); err != nil {
		t.Fatal(err)
	}
	deepcheck.Vandalize(reflect.ValueOf(cc.Clone()))
	if err := cc.Verify(); err != nil {
		t.Errorf("editing the clone changed the original: %v", err)
	}
	if (*compiler.CompiledContext)(nil).Clone() != nil {
		t.Error("nil does not clone to nil")
	}
}
