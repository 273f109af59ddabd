package gateway

import (
	"strings"
	"testing"
)

// Every arg_constraints kind, met, broken and malformed: a malformed
// constraint refuses every call that names the argument (fail closed),
// and each problem points at its argument.
func TestArgConstraints(t *testing.T) {
	for _, c := range []struct {
		name string
		cons map[string]any
		args map[string]any
		want string // "" when the arguments pass
	}{
		{"required met", map[string]any{"required": true}, map[string]any{"x": "a"}, ""},
		{"required missing", map[string]any{"required": true}, map[string]any{}, "argument x is required"},
		{"not required", map[string]any{"required": false}, map[string]any{}, ""},
		{"required malformed", map[string]any{"required": "yes"}, map[string]any{"x": "a"}, "required constraint on x is not true or false"},
		{"min met", map[string]any{"min": 1}, map[string]any{"x": 1.0}, ""},
		{"min broken", map[string]any{"min": 1}, map[string]any{"x": 0.5}, "0.5 is below the minimum 1 allowed for x"},
		{"max broken", map[string]any{"max": 50000.0}, map[string]any{"x": 60000.0}, "60000 is above the maximum 50000 allowed for x"},
		{"max absent", map[string]any{"max": 1.0}, map[string]any{}, ""},
		{"max not a number", map[string]any{"max": "10"}, map[string]any{"x": 1.0}, "max constraint on x is not a number"},
		{"min on a string", map[string]any{"min": 1}, map[string]any{"x": "2"}, "argument x must be a number"},
		{"enum met", map[string]any{"enum": []any{"INR", 2.0}}, map[string]any{"x": 2.0}, ""},
		{"enum broken", map[string]any{"enum": []any{"INR"}}, map[string]any{"x": "USD"}, "x must be one of [INR]"},
		{"enum malformed", map[string]any{"enum": "INR"}, map[string]any{"x": "INR"}, "enum constraint on x is not a list"},
		{"pattern met", map[string]any{"pattern": "^ord_[0-9]+$"}, map[string]any{"x": "ord_881"}, ""},
		{"pattern broken", map[string]any{"pattern": "^ord_[0-9]+$"}, map[string]any{"x": "ord_x"}, "x does not match the pattern ^ord_[0-9]+$"},
		{"pattern does not compile", map[string]any{"pattern": "("}, map[string]any{"x": "a"}, "pattern on x does not compile"},
		{"pattern not a string", map[string]any{"pattern": 7.0}, map[string]any{"x": "a"}, "pattern on x does not compile"},
		{"pattern on a number", map[string]any{"pattern": "a"}, map[string]any{"x": 1.0}, "argument x must be a string"},
		{"min_length broken", map[string]any{"min_length": 3}, map[string]any{"x": "éé"}, "x must be at least 3 characters"},
		{"max_length broken", map[string]any{"max_length": 2}, map[string]any{"x": "abc"}, "x must be at most 2 characters"},
		{"max_length malformed", map[string]any{"max_length": true}, map[string]any{"x": "a"}, "max_length on x is not a number"},
		{"unknown", map[string]any{"multiple_of": 2}, map[string]any{"x": 4.0}, `constraint "multiple_of" on x that the gateway does not support`},
		{"first problem only", map[string]any{"max": 1.0, "min": 5.0}, map[string]any{"x": 3.0}, "3 is above the maximum 1"},
	} {
		probs := validateArgs(nil, nil, c.args, compileConstraints(map[string]map[string]any{"x": c.cons}), "")
		switch {
		case c.want == "" && len(probs) > 0:
			t.Errorf("%s: problems %v, want none", c.name, probs)
		case c.want != "" && (len(probs) != 1 || probs[0].Pointer != "/x" || !strings.Contains(probs[0].Message, c.want)):
			t.Errorf("%s: problems %v, want one at /x containing %q", c.name, probs, c.want)
		}
	}
	// Arguments are checked in name order; pointers are escaped.
	probs := validateArgs(nil, nil, map[string]any{}, compileConstraints(map[string]map[string]any{"b/c": {"required": true}, "a~": {"required": true}}), "")
	if len(probs) != 2 || probs[0].Pointer != "/a~0" || probs[1].Pointer != "/b~1c" {
		t.Errorf("problems = %v", probs)
	}
}
