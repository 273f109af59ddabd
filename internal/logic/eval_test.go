package logic

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustCompile(t testing.TB, expr string) *Program {
	t.Helper()
	p, err := Compile(json.RawMessage(expr))
	if err != nil {
		t.Fatalf("Compile(%s) = %v", expr, err)
	}
	return p
}

func jsonValue(t testing.TB, s string) any {
	t.Helper()
	if s == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad JSON %s: %v", s, err)
	}
	return v
}

// TestEvalSemantics pins JsonLogic's semantics (jsonlogic.com and its
// reference implementation, json-logic-js), operator by operator.
func TestEvalSemantics(t *testing.T) {
	cases := []struct{ expr, data, want string }{
		// literals and truthiness
		{`true`, ``, `true`},
		{`"pear"`, ``, `"pear"`},
		{`[1,"b"]`, ``, `[1,"b"]`},
		{`{"if":[[], "y", "n"]}`, ``, `"n"`},
		{`{"if":[[0], "y", "n"]}`, ``, `"y"`},
		{`{"if":["0", "y", "n"]}`, ``, `"y"`},
		{`{"if":["", "y", "n"]}`, ``, `"n"`},
		{`{"if":[0, "y", "n"]}`, ``, `"n"`},
		{`{"if":[-0.5, "y", "n"]}`, ``, `"y"`},
		{`{"if":[true]}`, ``, `true`},
		{`{"if":[false, "y"]}`, ``, `null`},
		{`{"if":[false, 1, false, 2, 3]}`, ``, `3`},
		{`{"if":[false, 1, true, 2, 3]}`, ``, `2`},
		{`{"?:":[{">":[3,1]}, "hi", "lo"]}`, ``, `"hi"`},
		// equality
		{`{"==":[1,"1"]}`, ``, `true`},
		{`{"==":[0,false]}`, ``, `true`},
		{`{"==":["",0]}`, ``, `true`},
		{`{"==":[null,0]}`, ``, `false`},
		{`{"==":[null,null]}`, ``, `true`},
		{`{"==":[[1],1]}`, ``, `true`},
		{`{"==":[[1,2],"1,2"]}`, ``, `true`},
		{`{"==":[true,"1"]}`, ``, `true`},
		{`{"===":[1,"1"]}`, ``, `false`},
		{`{"===":[0,{"+":"0"}]}`, ``, `true`},
		{`{"!=":[1,"1"]}`, ``, `false`},
		{`{"!==":[1,"1"]}`, ``, `true`},
		// comparisons
		{`{">":["2",1]}`, ``, `true`},
		{`{"<":["10","9"]}`, ``, `true`},
		{`{"<":["10",9]}`, ``, `false`},
		{`{"<":[1,2,3]}`, ``, `true`},
		{`{"<":[1,1,3]}`, ``, `false`},
		{`{"<=":[1,1,3]}`, ``, `true`},
		{`{"<=":[1,4,3]}`, ``, `false`},
		{`{">=":["a","a"]}`, ``, `true`},
		{`{"<":[null,1]}`, ``, `true`},
		{`{"<":["abc",1]}`, ``, `false`},
		{`{">=":["abc",1]}`, ``, `false`},
		// logic
		{`{"!":[[]]}`, ``, `true`},
		{`{"!!":["0"]}`, ``, `true`},
		{`{"!":0}`, ``, `true`},
		{`{"and":[1,3]}`, ``, `3`},
		{`{"and":[3,false]}`, ``, `false`},
		{`{"and":[[],true]}`, ``, `[]`},
		{`{"and":[null,true]}`, ``, `null`},
		{`{"and":[0,5]}`, ``, `0`},
		{`{"or":[0,"",3]}`, ``, `3`},
		{`{"or":[false,0]}`, ``, `0`},
		// arithmetic
		{`{"+":[1,"2"]}`, ``, `3`},
		{`{"+":["3.5kg",1]}`, ``, `4.5`},
		{`{"+":[]}`, ``, `0`},
		{`{"*":[2,"3"]}`, ``, `6`},
		{`{"*":["4"]}`, ``, `"4"`},
		{`{"-":["5",2]}`, ``, `3`},
		{`{"-":[2]}`, ``, `-2`},
		{`{"/":[1,4]}`, ``, `0.25`},
		{`{"%":[-7,3]}`, ``, `-1`},
		{`{"max":[1,"7",3]}`, ``, `7`},
		{`{"min":[4,-2,9]}`, ``, `-2`},
		// strings
		{`{"cat":["a",1,null,true,[1,[2,null]]]}`, ``, `"a1true1,2,"`},
		{`{"cat":[0.1,1e21,1e-7,-0,123456789012]}`, ``, `"0.11e+211e-70123456789012"`},
		{`{"cat":"x"}`, ``, `"x"`},
		{`{"in":["Spring","Springfield"]}`, ``, `true`},
		{`{"in":[1,"a1"]}`, ``, `true`},
		{`{"in":["",""]}`, ``, `false`},
		{`{"in":["b",["a","b"]]}`, ``, `true`},
		{`{"in":[1,["1"]]}`, ``, `false`},
		{`{"in":["a",null]}`, ``, `false`},
		{`{"substr":["jsonlogic",4]}`, ``, `"logic"`},
		{`{"substr":["jsonlogic",-5]}`, ``, `"logic"`},
		{`{"substr":["jsonlogic",1,3]}`, ``, `"son"`},
		{`{"substr":["jsonlogic",-5,-2]}`, ``, `"log"`},
		{`{"substr":["jsonlogic",1,-5]}`, ``, `"son"`},
		{`{"substr":["héllo",1,2]}`, ``, `"él"`},
		{`{"substr":["abc",10]}`, ``, `""`},
		{`{"substr":[null,0,2]}`, ``, `"nu"`},
		{`{"substr":["abc",1,null]}`, ``, `""`},
		{`{"substr":["abc",1,"-1"]}`, ``, `"b"`},
		// data
		{`{"var":"a.b"}`, `{"a":{"b":"c"}}`, `"c"`},
		{`{"var":"a.q"}`, `{"a":{"b":"c"}}`, `null`},
		{`{"var":["a.q",9]}`, `{"a":{"b":"c"}}`, `9`},
		{`{"var":["a",9]}`, `{"a":null}`, `null`},
		{`{"var":1}`, `["x","y"]`, `"y"`},
		{`{"var":"1.1"}`, `["x",["y","z"]]`, `"z"`},
		{`{"var":"01"}`, `["x","y"]`, `null`},
		{`{"var":"a"}`, ``, `null`},
		{`{"var":""}`, `7`, `7`},
		{`{"missing":["a","b.c"]}`, `{"a":1,"b":{"d":1}}`, `["b.c"]`},
		{`{"missing":["a"]}`, `{"a":""}`, `["a"]`},
		{`{"missing_some":[1,["a","b"]]}`, `{"b":1}`, `[]`},
		{`{"missing_some":[2,["a","b","c"]]}`, `{"a":1}`, `["b","c"]`},
		// arrays
		{`{"merge":[[1],2,[[3]]]}`, ``, `[1,2,[3]]`},
		{`{"merge":1}`, ``, `[1]`},
		{`{"map":[{"var":"n"},{"*":[{"var":""},2]}]}`, `{"n":[1,2,3]}`, `[2,4,6]`},
		{`{"map":[{"var":"n"},{"*":[{"var":""},2]}]}`, ``, `[]`},
		{`{"filter":[{"var":"n"},{"%":[{"var":""},2]}]}`, `{"n":[1,2,3]}`, `[1,3]`},
		{`{"reduce":[{"var":"n"},{"+":[{"var":"current"},{"var":"accumulator"}]},{"var":"s"}]}`, `{"n":[1,2,3,4],"s":59}`, `69`},
		{`{"reduce":[{"var":"n"},{"+":[{"var":"current"},{"var":"accumulator"}]},0]}`, ``, `0`},
		{`{"reduce":[{"var":"d"},{"+":[{"var":"accumulator"},{"var":"current.q"}]},0]}`, `{"d":[{"q":2},{"q":3}]}`, `5`},
		{`{"reduce":[[1,2],{"var":""},0]}`, ``, `{"accumulator":{"accumulator":0,"current":1},"current":2}`},
		{`{"all":[{"var":"n"},{">=":[{"var":""},1]}]}`, `{"n":[1,2]}`, `true`},
		{`{"all":[{"var":"n"},{">=":[{"var":""},1]}]}`, `{"n":[]}`, `false`},
		{`{"none":[{"var":"n"},{"<":[{"var":""},1]}]}`, `{"n":[]}`, `true`},
		{`{"some":[{"var":"items"},{">":[{"var":"qty"},1]}]}`, `{"items":[{"qty":1},{"qty":2}]}`, `true`},
		{`[1,{"var":"x"},3]`, `{"x":2}`, `[1,2,3]`},
	}
	for _, tc := range cases {
		p := mustCompile(t, tc.expr)
		got, err := p.Eval(jsonValue(t, tc.data), Limits{})
		if err != nil {
			t.Errorf("%s on %s: %v", tc.expr, tc.data, err)
			continue
		}
		if diff := cmp.Diff(jsonValue(t, tc.want), got); diff != "" {
			t.Errorf("%s on %s mismatch (-want +got):\n%s", tc.expr, tc.data, diff)
		}
	}
}

// TestNaNIsFalsy: NaN is falsy, every comparison with it is false, and no
// operator panics on NaN or infinity.
func TestNaNIsFalsy(t *testing.T) {
	if Truthy(math.NaN()) {
		t.Error("Truthy(NaN) = true")
	}
	if !Truthy(math.Inf(1)) || !Truthy(math.Inf(-1)) {
		t.Error("infinity is falsy")
	}
	nan := `{"/":[0,0]}`
	cases := map[string]bool{
		`{"!!":[` + nan + `]}`:                    false,
		`{"!":[` + nan + `]}`:                     true,
		`{"if":[` + nan + `,true,false]}`:         false,
		`{"and":[true,` + nan + `]}`:              false,
		`{"or":[` + nan + `,false]}`:              false,
		`{"==":[` + nan + `,` + nan + `]}`:        false,
		`{"===":[` + nan + `,` + nan + `]}`:       false,
		`{"!=":[` + nan + `,` + nan + `]}`:        true,
		`{"<":[` + nan + `,1]}`:                   false,
		`{">":[` + nan + `,1]}`:                   false,
		`{"<=":[` + nan + `,1]}`:                  false,
		`{">=":[` + nan + `,1]}`:                  false,
		`{"<":[0,` + nan + `,1]}`:                 false,
		`{">":[{"max":[1,` + nan + `]},0]}`:       false,
		`{"!!":[{"-":["abc",1]}]}`:                false,
		`{"!!":[{"*":["abc",1]}]}`:                false,
		`{"!!":[{"%":[5,0]}]}`:                    false,
		`{">":[{"/":[1,0]},1e308]}`:               true,
		`{"<":[{"/":[-1,0]},-1e308]}`:             true,
		`{"==":[{"/":[1,0]},"Infinity"]}`:         true,
		`{"in":["NaN",{"cat":[` + nan + `]}]}`:    true,
		`{"!!":[{"substr":["abc",` + nan + `]}]}`: true,
	}
	for expr, want := range cases {
		out, err := mustCompile(t, expr).Eval(nil, Limits{})
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		if Truthy(out) != want {
			t.Errorf("%s = %v, want truthy %v", expr, out, want)
		}
	}
}

func TestNumberString(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0", 1: "1", -1.5: "-1.5", 0.1: "0.1", 1e21: "1e+21", 1e20: "100000000000000000000",
		1.5e-7: "1.5e-7", 0.000001: "0.000001", 123.456: "123.456", math.MaxFloat64: "1.7976931348623157e+308",
		math.Inf(1): "Infinity", math.NaN(): "NaN", 5e-324: "5e-324",
	} {
		if got := numberString(f); got != want {
			t.Errorf("numberString(%v) = %q, want %q", f, got, want)
		}
	}
	for s, want := range map[string]float64{"": 0, " 12 ": 12, "0x1f": 31, "1e3": 1000, ".5": 0.5, "5.": 5, "-Infinity": math.Inf(-1), "1_0": math.NaN(), "inf": math.NaN(), "0x": math.NaN(), "+-1": math.NaN()} {
		got := stringToNumber(s)
		if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("stringToNumber(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestCompileConstant: a constant expression is evaluated once at
// compile time and its truthiness reported.
func TestCompileConstant(t *testing.T) {
	for expr, want := range map[string]bool{`{"==":[1,1]}`: true, `{"and":[null,true]}`: false, `{"/":[0,0]}`: false, `[]`: false, `{"var":"x"}`: false} {
		info, err := Check(json.RawMessage(expr))
		if err != nil {
			t.Fatal(err)
		}
		if info.Constant && info.Truthy != want {
			t.Errorf("%s: Truthy = %v", expr, info.Truthy)
		}
	}
}

// TestEvalBudget: the limits are enforced, and raising them lets the same
// expression through.
func TestEvalBudget(t *testing.T) {
	list := make([]any, 2000)
	for i := range list {
		list[i] = float64(i)
	}
	p := mustCompile(t, `{"some":[{"var":"n"},{"<":[{"var":""},-1]}]}`)
	_, err := p.Eval(map[string]any{"n": list}, Limits{MaxOps: 1000})
	var be *BudgetError
	if !errors.As(err, &be) || be.Limit != LimitOperations || !strings.HasPrefix(be.Path, "some") || !errors.Is(err, ErrBudget) || errors.Is(err, ErrExpression) {
		t.Fatalf("err = %v", err)
	}
	if out, err := p.Eval(map[string]any{"n": list}, Limits{MaxOps: 10000}); err != nil || out != false {
		t.Fatalf("with a larger budget: %v, %v", out, err)
	}
	p = mustCompile(t, `{"cat":[{"var":"s"},{"var":"s"}]}`)
	big := string(make([]byte, 600))
	if _, err := p.Eval(map[string]any{"s": big}, Limits{MaxBytes: 1000}); !errors.As(err, &be) || be.Limit != LimitBytes {
		t.Fatalf("bytes: %v", err)
	}
}

// StrictNumbers: a value read as a number that is not one is a
// *NumberError, where JsonLogic gives NaN (every comparison false) or a
// coercion; numbers, two strings compared, and any expression without a
// numeric operator evaluate as without it.
func TestStrictNumbers(t *testing.T) {
	strict := Limits{StrictNumbers: true}
	data := map[string]any{"n": 5.0, "s": "abc", "z": nil, "lines": []any{map[string]any{"a": 1.0}, map[string]any{}}}
	for _, tc := range []struct {
		expr string
		want any // nil: a *NumberError
	}{
		{`{">":[{"var":"n"},3]}`, true},
		{`{"<":["a","b"]}`, true},
		{`{"<":[1,{"var":"n"},9]}`, true},
		{`{"+":[{"var":"n"},1]}`, 6.0},
		{`{"max":[{"var":"n"},1]}`, 5.0},
		{`{"==":[{"var":"s"},5]}`, false},
		{`{"cat":[{"var":"s"},1]}`, "abc1"},
		{`{">":[{"var":"s"},3]}`, nil},
		{`{">":[{"var":"z"},3]}`, nil},
		{`{"<":[1,{"var":"s"},9]}`, nil},
		{`{"<":[1,5,{"var":"s"}]}`, nil},
		{`{"+":[{"var":"n"},"5,000"]}`, nil},
		{`{"*":[{"var":"n"},true]}`, nil},
		{`{"-":[{"var":"s"}]}`, nil},
		{`{"/":[{"var":"n"},[1]]}`, nil},
		{`{"%":[{"var":"n"},{"var":"z"}]}`, nil},
		{`{"min":[{"var":"n"},"1"]}`, nil},
		{`{">":[{"/":[0,{"-":[{"var":"n"},5]}]},1]}`, nil},
		{`{">":[{"reduce":[{"var":"lines"},{"+":[{"var":"accumulator"},{"var":"current.a"}]},0]},0]}`, nil},
	} {
		p, err := Compile(json.RawMessage(tc.expr))
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		got, err := p.Eval(data, strict)
		var ne *NumberError
		switch {
		case tc.want == nil && !errors.As(err, &ne):
			t.Errorf("%s = %v, %v; want a *NumberError", tc.expr, got, err)
		case tc.want != nil && (err != nil || got != tc.want):
			t.Errorf("%s = %v, %v; want %v", tc.expr, got, err, tc.want)
		}
		if _, err := p.Eval(data, Limits{}); err != nil {
			t.Errorf("%s without StrictNumbers: %v", tc.expr, err)
		}
	}
}

// EvalVars, given the values the data holds at Info.Vars, evaluates as
// Eval does; the values it is given are what its top-level vars read (and
// only those: a var inside a map, filter, reduce, all, none or some body
// reads the element).
func TestEvalVars(t *testing.T) {
	data := jsonValue(t, `{"a":1,"b":{"c":[10,20],"d":"x"},"xs":[1,2,3],"":{"e":true},"n":null}`)
	exprs := []string{
		`{"==":[{"var":"a"},1]}`,
		`{"var":"b.c.1"}`,
		`{"var":["b.c.7","dflt"]}`,
		`{"var":["zz",{"var":"a"}]}`,
		`{"var":""}`,
		`{"var":[]}`,
		`{"var":".e"}`,
		`{"var":1}`,
		`{"var":"n"}`,
		`{"map":[{"var":"xs"},{"+":[{"var":""},{"var":"a"}]}]}`,
		`{"reduce":[{"var":"xs"},{"+":[{"var":"current"},{"var":"accumulator"}]},{"var":"a"}]}`,
		`{"some":[{"var":"b.c"},{">":[{"var":""},15]}]}`,
		`{"missing":["a","zz"]}`,
		`{"and":[{"var":"a"},{"cat":[{"var":"b.d"},{"var":"a"}]}]}`,
		`{"in":[{"var":"b.d"},"xyz"]}`,
	}
	for _, expr := range exprs {
		p := mustCompile(t, expr)
		want, werr := p.Eval(data, Limits{})
		vars := func(i int) (any, bool) { return lookup(data, Segments(p.Info().Vars[i])) }
		got, err := p.EvalVars(data, Limits{}, vars)
		if (err != nil) != (werr != nil) || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: EvalVars = %v, %v; Eval = %v, %v", expr, got, err, want, werr)
		}
	}
	// The values given are the ones read, at the top level only.
	p := mustCompile(t, `{"cat":[{"var":"a"},{"map":[{"var":"xs"},{"var":""}]}]}`)
	lie := func(i int) (any, bool) {
		switch p.Info().Vars[i] {
		case "a":
			return "A", true
		case "xs":
			return []any{"x"}, true
		}
		return nil, false
	}
	if got, err := p.EvalVars(data, Limits{}, lie); err != nil || got != "Ax" {
		t.Errorf("EvalVars with given values = %v, %v; want Ax", got, err)
	}
}
