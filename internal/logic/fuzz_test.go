package logic

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"
)

// sameValue is deep equality with NaN equal to NaN.
func sameValue(a, b any) bool {
	if x, ok := a.(float64); ok {
		y, ok := b.(float64)
		return ok && (x == y || math.IsNaN(x) && math.IsNaN(y))
	}
	if x, ok := a.([]any); ok {
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	if x, ok := a.(map[string]any); ok {
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if !sameValue(x[k], y[k]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// FuzzEval: any expression compiles or is refused with ErrExpression; a
// compiled one evaluates against any data without a panic, either to a
// value or to a *BudgetError; the result is deterministic, does not depend
// on the budget once the budget suffices, nor on whether the caller reads
// the top-level vars (EvalVars), and "!" negates its truthiness.
func FuzzEval(f *testing.F) {
	seeds := [][2]string{
		{`{"and":[{"==":[{"var":"a"},1]},{">":[{"var":"b"},2]}]}`, `{"a":1,"b":3}`},
		{`{"some":[{"var":"x"},{"in":["q",{"var":""}]}]}`, `{"x":["aq","b"]}`},
		{`{"reduce":[{"var":"x"},{"cat":[{"var":"accumulator"},{"var":"current"}]},""]}`, `{"x":["a",1,null,[2]]}`},
		{`{"substr":[{"var":"s"},-3,{"var":"n"}]}`, `{"s":"héllo wörld","n":-1}`},
		{`{"<":[{"var":"a"},{"/":[0,0]},{"var":"b"}]}`, `{"a":"1","b":[2]}`},
		{`{"merge":[{"var":"a"},[1,[2]],{"missing":["a","z"]}]}`, `{"a":[[3]]}`},
		{`{"if":[{"missing_some":[1,["a","b"]]},{"-":["5"]},{"*":["2","3x"]}]}`, `{"b":""}`},
		{`{"!=":[{"var":"a"},{"var":"a"}]}`, `{"a":[1]}`},
		{`{"max":[{"var":"0"},"7"]}`, `[1e308,"Infinity"]`},
	}
	for _, s := range seeds {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, expr, data []byte) {
		p, err := Compile(expr)
		if err != nil {
			if !errors.Is(err, ErrExpression) {
				t.Fatalf("compile error does not match ErrExpression: %v", err)
			}
			return
		}
		var d any
		if json.Unmarshal(data, &d) != nil {
			d = nil
		}
		small := Limits{MaxOps: 2000, MaxBytes: 1 << 16}
		out, err := p.Eval(d, small)
		if err != nil {
			var be *BudgetError
			if !errors.As(err, &be) || out != nil {
				t.Fatalf("Eval = %v, %v", out, err)
			}
			return
		}
		again, err := p.Eval(d, Limits{MaxOps: 1 << 20, MaxBytes: 1 << 24})
		if err != nil || !sameValue(out, again) {
			t.Fatalf("with a larger budget: %#v, %v; with the small one %#v", again, err, out)
		}
		// With its top-level vars read by the caller, as lookup reads them,
		// the same value.
		vars := func(i int) (any, bool) { return lookup(norm(d), Segments(p.Info().Vars[i])) }
		if given, err := p.EvalVars(d, small, vars); err != nil || !sameValue(out, given) {
			t.Fatalf("EvalVars = %#v, %v; Eval %#v", given, err, out)
		}
		if p.Info().Constant && len(p.Info().Vars) == 0 && p.Info().Truthy != Truthy(out) {
			t.Fatalf("Info.Truthy = %v, value %#v", p.Info().Truthy, out)
		}
		neg, err := Compile(json.RawMessage(`{"!":[` + string(expr) + `]}`))
		if err != nil {
			return // one level deeper can be over the depth limit
		}
		n, err := neg.Eval(d, Limits{MaxOps: 1 << 20, MaxBytes: 1 << 24})
		if err != nil || n != !Truthy(out) {
			t.Fatalf("! of %#v = %v, %v", out, n, err)
		}
	})
}
