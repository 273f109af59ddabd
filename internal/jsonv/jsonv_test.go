package jsonv

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNormalize(t *testing.T) {
	type point struct {
		X int `json:"x"`
	}
	in := map[string]any{"i": 3, "i64": int64(4), "f32": float32(1.5), "u": uint(2), "n": json.Number("7.25"), "bad": json.Number("x"),
		"s": []string{"a"}, "nested": []any{map[string]any{"k": int32(1)}}, "struct": point{X: 1}, "nil": nil, "ch": make(chan int)}
	want := map[string]any{"i": 3.0, "i64": 4.0, "f32": 1.5, "u": 2.0, "n": 7.25, "bad": "x",
		"s": []any{"a"}, "nested": []any{map[string]any{"k": 1.0}}, "struct": map[string]any{"x": 1.0}, "nil": nil, "ch": nil}
	if diff := cmp.Diff(want, Normalize(in)); diff != "" {
		t.Errorf("Normalize mismatch (-want +got):\n%s", diff)
	}
	src := map[string]any{"a": []any{1.0}}
	out := Normalize(src).(map[string]any)
	out["a"].([]any)[0] = 2.0
	if src["a"].([]any)[0] != 1.0 {
		t.Error("Normalize does not copy containers")
	}
}

// A cyclic value a Go caller built has no JSON form: Normalize makes the
// cycle nil and Finite reports false, where both recursed until the stack
// overflowed (a fatal error no recover stops).
func TestCyclicValuesEndInsteadOfOverflowing(t *testing.T) {
	m := map[string]any{"a": 1}
	m["self"] = m
	s := []any{1}
	s[0] = s
	deep := any("leaf")
	for range MaxDepth + 5 {
		deep = []any{deep}
	}
	for name, v := range map[string]any{"cyclic map": m, "cyclic slice": s, "nested beyond MaxDepth": deep} {
		if Finite(v) {
			t.Errorf("%s: Finite = true", name)
		}
		n := Normalize(v)
		if _, err := json.Marshal(n); err != nil {
			t.Errorf("%s: Normalize gave a value with no JSON form: %v", name, err)
		}
	}
	shallow := map[string]any{"a": []any{map[string]any{"b": 2.0}}}
	if !Finite(shallow) {
		t.Error("Finite(shallow) = false")
	}
	if diff := cmp.Diff(shallow, Normalize(shallow)); diff != "" {
		t.Errorf("a shallow value changed (-want +got):\n%s", diff)
	}
}

// TestClone: objects and arrays, and lists of strings, are copied at
// every depth, nil ones stay nil, and other values keep their types.
func TestClone(t *testing.T) {
	inner := map[string]any{"n": 1, "f": 1.5}
	list := []any{inner, "s"}
	v := map[string]any{"list": list, "nilmap": map[string]any(nil), "nillist": []any(nil), "strs": []string{"a"}, "raw": json.RawMessage(`{"a":1}`)}
	c := CloneObject(v)
	if !reflect.DeepEqual(c, v) {
		t.Fatalf("Clone = %v, want %v", c, v)
	}
	c["list"].([]any)[0].(map[string]any)["n"] = 2
	c["list"].([]any)[1] = "t"
	c["strs"].([]string)[0] = "b"
	c["raw"].(json.RawMessage)[1] = '['
	if inner["n"] != 1 || list[1] != "s" || v["strs"].([]string)[0] != "a" || string(v["raw"].(json.RawMessage)) != `{"a":1}` {
		t.Errorf("editing the clone edited the original: %v", v)
	}
	if c["nilmap"].(map[string]any) != nil || c["nillist"].([]any) != nil || CloneObject(nil) != nil {
		t.Errorf("nil containers did not stay nil: %v", c)
	}
}

func TestCloneRaw(t *testing.T) {
	if CloneRaw(nil) != nil {
		t.Error("a nil map's copy is not nil")
	}
	m := map[string]json.RawMessage{"a": json.RawMessage(`{"x":1}`), "b": nil}
	c := CloneRaw(m)
	if !reflect.DeepEqual(c, m) {
		t.Fatalf("copy %v of %v", c, m)
	}
	m["a"][2] = 'y'
	m["c"] = json.RawMessage(`2`)
	if string(c["a"]) != `{"x":1}` || len(c) != 2 {
		t.Errorf("editing the original edited its copy: %s", c)
	}
}
