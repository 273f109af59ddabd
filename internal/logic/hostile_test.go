package logic

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// Outcomes of a hostile expression; every one is closed.
const (
	refusedBudget = "compile refuses it as over budget"
	refused       = "compile refuses it as invalid"
	overBudget    = "evaluation stops with a *BudgetError"
	falsy         = "evaluates to a falsy value"
	truthy        = "evaluates to a truthy value"
)

func list(n int, v func(i int) any) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = v(i)
	}
	return out
}

func repeatJSON(n int, item string) string {
	return "[" + strings.Repeat(item+",", n-1) + item + "]"
}

// TestHostileExpressions: over-budget, malformed and NaN-laden expressions
// fail closed, quickly, without a panic or a stack overflow.
func TestHostileExpressions(t *testing.T) {
	million := list(1_000_000, func(i int) any { return float64(i) })
	selfRef := []any{"x", nil}
	selfRef[1] = selfRef
	nan := `{"/":[0,0]}`
	mib := strings.Repeat("y", 1<<20)

	cases := []struct {
		name string
		expr string
		data any
		lim  Limits
		want string
	}{
		{"100k-deep unary nesting", strings.Repeat(`{"!":`, 100_000) + "true" + strings.Repeat("}", 100_000), nil, Limits{}, refusedBudget},
		{"100k-deep list nesting", strings.Repeat(`{"!":[`, 100_000) + "true" + strings.Repeat("]}", 100_000), nil, Limits{}, refusedBudget},
		{"100k-deep array literal", strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000), nil, Limits{}, refusedBudget},
		{"65 nested operators", strings.Repeat(`{"!!":[`, 65) + "true" + strings.Repeat("]}", 65), nil, Limits{}, refusedBudget},
		{"and of 20,000 conditions", `{"and":` + repeatJSON(20_000, `{"var":"a"}`) + `}`, nil, Limits{}, refusedBudget},
		{"var default of 20,000 values", `{"var":["a",` + repeatJSON(20_000, "0") + `]}`, nil, Limits{}, refusedBudget},
		{"missing of 20,000 paths", `{"missing":` + repeatJSON(20_000, `"a"`) + `}`, nil, Limits{}, refusedBudget},
		{"constant reduce explosion", `{"reduce":[` + repeatJSON(64, "1") + `,{"cat":[{"var":"accumulator"},{"var":"accumulator"}]},"ab"]}`, nil, Limits{}, refusedBudget},
		{"constant nested map", `{"map":[` + repeatJSON(3000, "1") + `,{"map":[` + repeatJSON(3000, "1") + `,1]}]}`, nil, Limits{}, refusedBudget},
		{"costly constant in a branch never taken", `{"if":[true,1,{"map":[` + repeatJSON(3000, "1") + `,{"map":[` + repeatJSON(3000, "1") + `,1]}]}]}`, nil, Limits{}, refusedBudget},
		{"costly constant after a false and", `{"and":[false,{"map":[` + repeatJSON(3000, "1") + `,{"map":[` + repeatJSON(3000, "1") + `,1]}]}]}`, nil, Limits{}, refusedBudget},
		{"duplicate operator in an object", `{"==":[1,1],"==":[1,2]}`, nil, Limits{}, refused},
		{"duplicate operator spelled with an escape", `{"and":[{"\u0076ar":"a","var":"b"}]}`, nil, Limits{}, refused},
		{"invalid UTF-8 in a literal", "{\"==\":[\"a\xffb\",\"a\"]}", nil, Limits{}, refused},
		{"overlong encoding in a var path", "{\"var\":\"a\xc0\xaeb\"}", nil, Limits{}, refused},
		{"lone surrogate in a literal", `{"in":["\udc00","x"]}`, nil, Limits{}, refused},
		{"byte order mark", "\xef\xbb\xbf" + `{"==":[1,1]}`, nil, Limits{}, refused},
		{"map over a million elements", `{"map":[{"var":"n"},{"+":[{"var":""},1]}]}`, map[string]any{"n": million}, Limits{}, overBudget},
		{"filter over a million elements", `{"filter":[{"var":"n"},true]}`, map[string]any{"n": million}, Limits{}, overBudget},
		{"all over a million elements", `{"all":[{"var":"n"},true]}`, map[string]any{"n": million}, Limits{}, overBudget},
		{"none over a million elements", `{"none":[{"var":"n"},false]}`, map[string]any{"n": million}, Limits{}, overBudget},
		{"reduce over a million elements", `{"reduce":[{"var":"n"},{"+":[{"var":"current"},{"var":"accumulator"}]},0]}`, map[string]any{"n": million}, Limits{}, overBudget},
		{"reduce explosion over data", `{"reduce":[{"var":"n"},{"cat":[{"var":"accumulator"},{"var":"accumulator"}]},"ab"]}`, map[string]any{"n": list(64, func(int) any { return 1.0 })}, Limits{}, overBudget},
		{"cat of huge strings", `{"cat":[{"var":"s"},{"var":"s"},{"var":"s"}]}`, map[string]any{"s": strings.Repeat("x", 2<<20)}, Limits{}, overBudget},
		{"substr of a huge string in a loop", `{"map":[{"var":"n"},{"substr":[{"var":""},0,1]}]}`, map[string]any{"n": list(1000, func(int) any { return mib })}, Limits{}, overBudget},
		{"string comparison of huge strings in a loop", `{"all":[{"var":"n"},{"<=":[{"var":""},{"var":""}]}]}`, map[string]any{"n": list(1000, func(int) any { return mib })}, Limits{}, overBudget},
		{"merge of a million elements five times", `{"merge":[{"var":"n"},{"var":"n"},{"var":"n"},{"var":"n"},{"var":"n"}]}`, map[string]any{"n": million}, Limits{}, overBudget},
		{"nested maps over data", `{"map":[{"var":"n"},{"map":[{"var":""},1]}]}`, map[string]any{"n": list(1000, func(int) any { return list(1000, func(int) any { return 1.0 }) })}, Limits{}, overBudget},
		{"array string form of a huge array", `{"==":[{"var":"n"},"0"]}`, map[string]any{"n": million}, Limits{}, overBudget},
		{"self-referencing array", `{"cat":[{"var":"loop"}]}`, map[string]any{"loop": selfRef}, Limits{}, overBudget},
		{"a budget of ten operations", `{"and":[1,2,3,4,5,6,7,8,9,10,11]}`, nil, Limits{MaxOps: 10}, refusedBudget},
		{"NaN is falsy", nan, nil, Limits{}, falsy},
		{"NaN from string arithmetic", `{"-":[{"var":"s"},1]}`, map[string]any{"s": "abc"}, Limits{}, falsy},
		{"NaN from modulo by zero", `{"%":[{"var":"n"},0]}`, map[string]any{"n": 5.0}, Limits{}, falsy},
		{"NaN from the host", `{"var":"x"}`, map[string]any{"x": math.NaN()}, Limits{}, falsy},
		{"NaN as a json.Number from the host", `{"!!":{"var":"x"}}`, map[string]any{"x": json.Number("NaN")}, Limits{}, falsy},
		{"NaN greater than a threshold", `{">":[` + nan + `,3000]}`, nil, Limits{}, falsy},
		{"NaN not above a threshold", `{"<=":[` + nan + `,3000]}`, nil, Limits{}, falsy},
		{"NaN between bounds", `{"<":[0,{"var":"x"},10]}`, map[string]any{"x": math.NaN()}, Limits{}, falsy},
		{"NaN equal to itself", `{"==":[{"var":"x"},{"var":"x"}]}`, map[string]any{"x": math.NaN()}, Limits{}, falsy},
		{"NaN strictly equal to itself", `{"===":[{"var":"x"},{"var":"x"}]}`, map[string]any{"x": math.NaN()}, Limits{}, falsy},
		{"NaN in max", `{"max":[1,{"var":"x"}]}`, map[string]any{"x": math.NaN()}, Limits{}, falsy},
		{"NaN inside and", `{"and":[true,{"var":"x"},true]}`, map[string]any{"x": math.NaN()}, Limits{}, falsy},
		{"NaN in a loop body", `{"some":[[1,2],{"/":[0,0]}]}`, nil, Limits{}, falsy},
		{"null inside and", `{"and":[{"var":"x"},true]}`, map[string]any{"x": nil}, Limits{}, falsy},
		{"infinity is truthy", `{"/":[1,0]}`, nil, Limits{}, truthy},
		{"negative infinity below everything", `{"<":[{"/":[-1,0]},-1.7976931348623157e308]}`, nil, Limits{}, truthy},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			defer func() {
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("took %v", d)
				}
			}()
			p, err := Compile(json.RawMessage(tc.expr))
			if err == nil && tc.lim != (Limits{}) && p.Info().Constant {
				// A constant is checked with the default limits at compile
				// time; a host's smaller limits apply when it is evaluated.
				if _, err = p.Eval(nil, tc.lim); err == nil {
					t.Fatal("accepted")
				}
			}
			switch tc.want {
			case refusedBudget:
				var be *BudgetError
				if !errors.As(err, &be) || !errors.Is(err, ErrBudget) {
					t.Fatalf("err = %v, want a *BudgetError", err)
				}
				if len(err.Error()) > 1024 {
					t.Fatalf("error text is %d bytes", len(err.Error()))
				}
				return
			case refused:
				var le *Error
				if !errors.As(err, &le) || !errors.Is(err, ErrExpression) {
					t.Fatalf("err = %v, want an *Error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			out, err := p.Eval(tc.data, tc.lim)
			switch tc.want {
			case overBudget:
				var be *BudgetError
				if !errors.As(err, &be) || !errors.Is(err, ErrBudget) || out != nil {
					t.Fatalf("Eval = %v, %v; want a *BudgetError and no value", out, err)
				}
			case falsy, truthy:
				if err != nil {
					t.Fatal(err)
				}
				if Truthy(out) != (tc.want == truthy) {
					t.Fatalf("Eval = %v, want %s", out, tc.want)
				}
			}
		})
	}
}
