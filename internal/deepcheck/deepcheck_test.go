package deepcheck

import (
	"reflect"
	"testing"
)

type inner struct {
	S []string
	M map[string]any
}

type outer struct {
	Name string
	N    int
	P    *inner
	L    []inner
	K    map[string]inner
}

// TestHelpers: Fill reaches every member, Shared finds what a shallow
// copy shares and nothing in a fresh value, and Vandalize edits what a
// value shares with another through it.
func TestHelpers(t *testing.T) {
	var a outer
	Fill(reflect.ValueOf(&a).Elem())
	if a.Name == "" || a.N == 0 || a.P == nil || len(a.P.S) != 1 || len(a.L) != 1 || len(a.K) != 1 || a.P.M["s"] == nil {
		t.Fatalf("Fill left members unset: %+v", a)
	}
	shallow := a
	var fresh outer
	Fill(reflect.ValueOf(&fresh).Elem())
	tests := []struct {
		name string
		b    outer
		want string
	}{
		{"a shallow copy", shallow, ".P"},
		{"a value of its own", fresh, ""},
	}
	for _, tc := range tests {
		if got := Shared("", reflect.ValueOf(a), reflect.ValueOf(tc.b)); got != tc.want {
			t.Errorf("%s: Shared = %q, want %q", tc.name, got, tc.want)
		}
	}
	Vandalize(reflect.ValueOf(shallow))
	if a.P.S[0] == "s" || a.L[0].S[0] == "s" || a.P.M["vandalized"] != true || a.Name != "s" {
		t.Errorf("Vandalize of a shallow copy: the original is %+v %+v", a, *a.P)
	}
}

// TestOverrun: Overrun writes past a list's length, where a longer list
// over the same array sees it, and leaves a list capped at its length
// and the elements within lengths as they were.
func TestOverrun(t *testing.T) {
	arr := []string{"a", "b", "c", "d"}
	v := outer{P: &inner{S: arr[:1]}, L: []inner{{S: arr[2:3:3]}}, K: map[string]inner{"k": {S: arr[1:2]}}}
	Overrun(reflect.ValueOf(&v))
	if arr[0] != "a" || arr[1] != "s" || arr[2] != "s" || arr[3] != "s" {
		t.Fatalf("array after Overrun = %q, want a, then s past the first list's length", arr)
	}
	arr = []string{"a", "b", "c"}
	capped := outer{L: []inner{{S: arr[0:1:1]}, {S: arr[1:2:2]}}, K: map[string]inner{"k": {S: arr[2:3:3]}}}
	Overrun(reflect.ValueOf(&capped))
	if arr[0] != "a" || arr[1] != "b" || arr[2] != "c" {
		t.Fatalf("capped lists after Overrun: %q", arr)
	}
	b := make([]byte, 1, 2)
	full := b[:2]
	Overrun(reflect.ValueOf(b))
	if full[0] != 0 || full[1] != 0x20 {
		t.Fatalf("bytes after Overrun = %v", full)
	}
}
