package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type color string

func (c *color) UnmarshalText(b []byte) error {
	if string(b) != "red" && string(b) != "blue" {
		return errors.New("color must be red or blue")
	}
	*c = color(b)
	return nil
}

type inner struct {
	Name  string  `json:"name"`
	Color color   `json:"color,omitempty"`
	Tags  []inner `json:"tags,omitempty"`
}

type Embedded struct {
	Base string `json:"base"`
}

type outer struct {
	Embedded
	ID    string                     `json:"id"`
	Inner *inner                     `json:"inner,omitempty"`
	Map   map[string]inner           `json:"map,omitempty"`
	Raw   json.RawMessage            `json:"raw,omitempty"`
	Any   any                        `json:"any,omitempty"`
	Extra map[string]json.RawMessage `json:"-" wire:"extra"`
}

type nums struct {
	N  int64   `json:"n"`
	U  uint    `json:"u"`
	I8 int8    `json:"i8"`
	F  float64 `json:"f"`
	B  bool    `json:"b"`
}

type closedOuter struct {
	ID string `json:"id"`
}

type withRequired struct {
	A string  `json:"a" jsonschema:"required"`
	B *inner  `json:"b,omitempty" jsonschema:"required"`
	C []inner `json:"c,omitempty"`
}

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		doc    string
		target any
		want   []Problem
		filled bool
	}{
		{"ok", `{"id":"a","base":"b","inner":{"name":"x","color":"red"},"raw":{"Any":1},"any":{"X":1},"unknown":1}`, &outer{}, nil, true},
		{"case variant", `{"ID":"a"}`, &outer{}, []Problem{{"ID", `unknown field "ID": field names are case-sensitive (did you mean "id"?)`}}, true},
		{"closed unknown", `{"id":"a","x":1}`, &closedOuter{}, []Problem{{"x", `unknown field "x"`}}, true},
		{"nested", `{"inner":{"name":"x","Nmae":1,"tags":[{"name":"y","z":2}]}}`, &outer{}, []Problem{{"inner.tags[0].z", `unknown field "z"`}, {"inner.Nmae", `unknown field "Nmae"`}}, true},
		{"map values", `{"map":{"k":{"q":1}}}`, &outer{}, []Problem{{"map.k.q", `unknown field "q"`}}, true},
		{"enum text", `{"inner":{"color":"green"}}`, &outer{}, []Problem{{"inner.color", "color must be red or blue"}}, true},
		{"type", `{"id":5}`, &outer{}, []Problem{{"id", "expected a string, got a number"}}, true},
		{"shape", `{"inner":[]}`, &outer{}, []Problem{{"inner", "expected an object, got an array"}}, true},
		{"several at once", `{"id":true,"inner":{"name":1,"color":"green","tags":"x"}}`, &outer{}, []Problem{{"id", "expected a string, got a boolean"}, {"inner.name", "expected a string, got a number"}, {"inner.color", "color must be red or blue"}, {"inner.tags", "expected an array, got a string"}}, true},
		{"integers", `{"n":1.5,"u":-1,"i8":300}`, &nums{}, []Problem{{"n", "expected an integer that fits in 64 bits, got 1.5"}, {"u", "expected a non-negative integer that fits in 64 bits, got -1"}, {"i8", "expected an integer that fits in 8 bits, got 300"}}, true},
		{"syntax", `{"id":`, &outer{}, []Problem{{"", "invalid JSON: empty document"}}, false},
		{"trailing", `{} []`, &outer{}, []Problem{{"", "invalid JSON: trailing data after the document"}}, false},
		{"required", `{"c":[{"name":"x"}]}`, &withRequired{}, []Problem{{"a", "is required"}, {"b", "is required"}}, true},
		{"required present", `{"a":"","b":null}`, &withRequired{}, nil, true},
		{"embedded exact", `{"base":"x"}`, &closedOuter{}, []Problem{{"base", `unknown field "base"`}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, filled := Decode([]byte(tc.doc), tc.target)
			// Problems come sorted by key within an object, depth first.
			if diff := cmp.Diff(normalize(tc.want), normalize(got)); diff != "" {
				t.Errorf("Decode(%s) problems mismatch (-want +got):\n%s", tc.doc, diff)
			}
			if filled != tc.filled {
				t.Errorf("filled = %v, want %v", filled, tc.filled)
			}
		})
	}
	if p, _ := Decode([]byte(`{}`), outer{}); len(p) != 1 {
		t.Error("non-pointer target accepted")
	}
	// A case-variant key is never folded onto the real field.
	var o outer
	Decode([]byte(`{"ID":"evil"}`), &o)
	if o.ID != "" {
		t.Errorf("case-variant key filled the field: %q", o.ID)
	}
	// Values with problems are dropped; the rest is decoded.
	var n nums
	Decode([]byte(`{"n":"x","f":2.5,"b":true}`), &n)
	if n.F != 2.5 || !n.B || n.N != 0 {
		t.Errorf("rest of document not decoded: %+v", n)
	}
}

func normalize(ps []Problem) map[Problem]bool {
	m := map[Problem]bool{}
	for _, p := range ps {
		m[p] = true
	}
	return m
}

type openDoc struct {
	A     string                     `json:"a"`
	Extra map[string]json.RawMessage `json:"-" wire:"extra"`
}

type openDocWire openDoc

func TestOpen(t *testing.T) {
	var w openDocWire
	extra, err := UnmarshalOpen([]byte(`{"a":"x","b":[1],"c":null}`), &w)
	if err != nil || w.A != "x" || len(extra) != 2 || string(extra["b"]) != "[1]" {
		t.Fatalf("UnmarshalOpen = %v %v %v", w, extra, err)
	}
	b, err := MarshalOpen(w, map[string]json.RawMessage{"b": json.RawMessage(`[1]`), "a": json.RawMessage(`"shadow"`)})
	if err != nil || string(b) != `{"a":"x","b":[1]}` {
		t.Errorf("MarshalOpen = %s, %v", b, err)
	}
	if extra, _ := UnmarshalOpen([]byte(`{"a":"x"}`), &w); extra != nil {
		t.Errorf("no extras should give nil, got %v", extra)
	}
	if !IsOpen(reflect.TypeFor[*openDoc]()) || IsOpen(reflect.TypeFor[closedOuter]()) || IsOpen(reflect.TypeFor[string]()) {
		t.Error("IsOpen wrong")
	}
	if Join("", "a") != "a" || Join("a", "b") != "a.b" || Index("a", 2) != "a[2]" {
		t.Error("path helpers wrong")
	}
}
