package jsonv

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// normalizeByKey and cloneByKey are Normalize and CloneObject of a map as
// they were before the flat fast path: every member put into a new map one
// by one.
func normalizeByKey(m map[string]any, depth int) map[string]any {
	out := make(map[string]any, len(m))
	for k, e := range m {
		out[k] = normalize(e, depth+1)
	}
	return out
}

func cloneByKey(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, e := range m {
		out[k] = Clone(e)
	}
	return out
}

// A flat map's copy (maps.Clone) is what copying it member by member
// gives, and shares nothing with it; a map that is not flat takes the
// general path.
func TestFlatCopySameAsByKey(t *testing.T) {
	t.Parallel()
	big := map[string]any{}
	for i := range 40 {
		big["k"+strconv.Itoa(i)] = float64(i)
	}
	shrunk := map[string]any{"keep": "a"}
	for i := range 30 {
		shrunk["gone"+strconv.Itoa(i)] = true
	}
	for i := range 30 {
		delete(shrunk, "gone"+strconv.Itoa(i))
	}
	for _, c := range []struct {
		name string
		in   map[string]any
		flat bool
	}{
		{"empty", map[string]any{}, true},
		{"scalars", map[string]any{"s": "x", "f": 1.5, "b": true, "n": nil}, true},
		{"many members", big, true},
		{"grown then shrunk", shrunk, true},
		{"an int", map[string]any{"s": "x", "i": 3}, false},
		{"a json.Number", map[string]any{"n": json.Number("7")}, false},
		{"nested", map[string]any{"m": map[string]any{"a": "b"}, "l": []any{1.0}}, false},
	} {
		if got := Flat(c.in); got != c.flat {
			t.Errorf("%s: Flat = %v, want %v", c.name, got, c.flat)
		}
		for _, f := range []struct {
			name      string
			got, want map[string]any
		}{
			{"Normalize", Normalize(c.in).(map[string]any), normalizeByKey(c.in, 0)},
			{"CloneObject", CloneObject(c.in), cloneByKey(c.in)},
			{"Clone", Clone(c.in).(map[string]any), cloneByKey(c.in)},
		} {
			if diff := cmp.Diff(f.want, f.got); diff != "" {
				t.Errorf("%s: %s mismatch (-by key +got):\n%s", c.name, f.name, diff)
			}
			before := cmp.Diff(nil, c.in)
			for k := range f.got {
				f.got[k] = "edited"
			}
			f.got["added"] = 1.0
			if after := cmp.Diff(nil, c.in); after != before {
				t.Errorf("%s: editing %s's copy changed the map", c.name, f.name)
			}
		}
	}
	var null map[string]any
	if got := Normalize(null); got == nil || len(got.(map[string]any)) != 0 || got.(map[string]any) == nil {
		t.Errorf("Normalize of a nil map = %#v, want an empty map", got)
	}
	if got := CloneObject(null); got != nil {
		t.Errorf("CloneObject of a nil map = %#v, want nil", got)
	}
}

// A flat map nested MaxDepth deep has its members beyond the bound: they
// become nil, as they always did (the fast path is not taken there).
func TestFlatCopyAtMaxDepth(t *testing.T) {
	t.Parallel()
	var v any = map[string]any{"a": "b"}
	for range MaxDepth {
		v = map[string]any{"x": v}
	}
	got := Normalize(v)
	for range MaxDepth {
		got = got.(map[string]any)["x"]
	}
	if diff := cmp.Diff(map[string]any{"a": nil}, got); diff != "" {
		t.Errorf("the innermost map (-want +got):\n%s", diff)
	}
}
