package logic

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

func TestCheck(t *testing.T) {
	good := []struct {
		expr     string
		vars     []string
		constant bool
	}{
		{`{"==": [{"var": "request.context.identity_verified"}, true]}`, []string{"request.context.identity_verified"}, false},
		{`{"and": [{"==": [{"var": "user.role"}, "support_agent"]}, {">": [{"var": "request.context.refund_amount"}, 3000]}]}`, []string{"request.context.refund_amount", "user.role"}, false},
		{`{"var": ["intent", "none"]}`, []string{"intent"}, false},
		{`{"some": [{"var": "request.context.items"}, {">": [{"var": "price"}, 10]}]}`, []string{"request.context.items"}, false},
		{`{"missing": ["a.b", "c"]}`, []string{"a.b", "c"}, false},
		{`{"missing_some": [1, ["x", "y"]]}`, []string{"x", "y"}, false},
		{`{"<": [1, {"var": "n"}, 10]}`, []string{"n"}, false},
		{`{"==": [1, 2]}`, nil, true},
		{`true`, nil, true},
		{`{"!": {"var": "x"}}`, []string{"x"}, false},
		{`{"var": 0}`, []string{"0"}, false},
	}
	for _, tc := range good {
		info, err := Check(json.RawMessage(tc.expr))
		if err != nil {
			t.Errorf("Check(%s) = %v", tc.expr, err)
			continue
		}
		if !slices.Equal(info.Vars, tc.vars) || info.Constant != tc.constant {
			t.Errorf("Check(%s) = %+v, want vars %v constant %v", tc.expr, info, tc.vars, tc.constant)
		}
	}
	info, _ := Check(json.RawMessage(`{"and":[{"var":"a"},{"var":["b",1]},{"missing":["c"]},{"some":[{"var":"d"},{"var":"e"}]}]}`))
	if !slices.Equal(info.Required, []string{"a", "d"}) {
		t.Errorf("Required = %v, want [a d]", info.Required)
	}
	bad := []struct{ expr, path string }{
		{``, ""},
		{`null`, ""},
		{`{`, ""},
		{`{"set": ["a", 1]}`, "set"},
		{`{"and": [{"abs": [-1]}]}`, "and[0].abs"},
		{`{"==": [1, 2], "!=": [1, 2]}`, ""},
		{`{"==": [1]}`, "=="},
		{`{"?:": [1, 2]}`, "?:"},
		{`{"var": {"a": 1}}`, "var"},
		{`{"missing_some": [1, "x"]}`, "missing_some"},
		{`{"if": [{"xor": [1]}, 1, 2]}`, "if[0].xor"},
	}
	for _, tc := range bad {
		_, err := Check(json.RawMessage(tc.expr))
		var le *Error
		if !errors.As(err, &le) || !errors.Is(err, ErrExpression) || le.Path != tc.path {
			t.Errorf("Check(%s) = %v, want *Error at %q", tc.expr, err, tc.path)
		}
	}
	deep := `{"!":` + string(repeat(`{"!":`, 70)) + `true` + string(repeat(`}`, 71))
	if _, err := Check(json.RawMessage(deep)); !errors.Is(err, ErrExpression) {
		t.Errorf("deep nesting: %v", err)
	}
	if Root("request.context.x") != "request" || Root("intent") != "intent" {
		t.Error("Root wrong")
	}
}

func repeat(s string, n int) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = append(b, s...)
	}
	return b
}

// Every supported operator is evaluated (by Program.Eval, and by the
// library pack validation still uses).
func TestSupportedOperatorsEvaluate(t *testing.T) {
	samples := map[string]string{
		"var": `{"var":"a"}`, "missing": `{"missing":["zz"]}`, "missing_some": `{"missing_some":[1,["a","zz"]]}`,
		"if": `{"if":[true,1,2]}`, "?:": `{"?:":[true,1,2]}`, "==": `{"==":[1,1]}`, "===": `{"===":[1,1]}`,
		"!=": `{"!=":[1,2]}`, "!==": `{"!==":[1,2]}`, "!": `{"!":[false]}`, "!!": `{"!!":[1]}`,
		"or": `{"or":[false,true]}`, "and": `{"and":[true,true]}`, ">": `{">":[2,1]}`, ">=": `{">=":[2,2]}`,
		"<": `{"<":[1,2]}`, "<=": `{"<=":[1,1]}`, "max": `{"max":[1,2]}`, "min": `{"min":[1,2]}`,
		"+": `{"+":[1,2]}`, "-": `{"-":[3,1]}`, "*": `{"*":[2,3]}`, "/": `{"/":[6,3]}`, "%": `{"%":[7,3]}`,
		"map": `{"map":[[1,2],{"*":[{"var":""},2]}]}`, "filter": `{"filter":[[1,2,3],{">":[{"var":""},1]}]}`,
		"reduce": `{"reduce":[[1,2],{"+":[{"var":"current"},{"var":"accumulator"}]},0]}`,
		"all":    `{"all":[[1,2],{">":[{"var":""},0]}]}`, "none": `{"none":[[1,2],{">":[{"var":""},5]}]}`,
		"some": `{"some":[[1,2],{">":[{"var":""},1]}]}`, "merge": `{"merge":[[1],[2]]}`, "in": `{"in":["a","abc"]}`,
		"cat": `{"cat":["a","b"]}`, "substr": `{"substr":["abc",1]}`,
	}
	for _, op := range Supported() {
		expr, ok := samples[op]
		if !ok {
			t.Errorf("no sample for supported operator %q", op)
			continue
		}
		if _, err := Check(json.RawMessage(expr)); err != nil {
			t.Errorf("Check(%s) = %v", expr, err)
		}
		if _, err := mustCompile(t, expr).Eval(map[string]any{"a": 1.0}, Limits{}); err != nil {
			t.Errorf("cannot evaluate %q: %v", op, err)
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"and":[{"==":[{"var":"a"},1]},{">":[{"var":"b"},2]}]}`, `{"some":[{"var":"x"},{"var":""}]}`, `{"var":["a",1]}`, `[1,{"!":[]}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		info, err := Check(in)
		if err != nil {
			if !errors.Is(err, ErrExpression) {
				t.Fatalf("error does not match ErrExpression: %v", err)
			}
			return
		}
		if info.Constant && len(info.Vars) > 0 {
			t.Fatalf("constant expression with vars: %+v", info)
		}
	})
}
