package canon

import (
	"bytes"
	"encoding/json"
	"testing"
)

type namedObject map[string]any

type jsonMaps struct {
	O  map[string]any                       `json:"o"`
	C  map[string]map[string]any            `json:"c,omitempty"`
	N  namedObject                          `json:"n,omitempty"`
	NC map[string]namedObject               `json:"nc"`
	D  map[string]map[string]map[string]any `json:"d"`
	A  []map[string]any                     `json:"a"`
}

// FuzzJSONMapsMatchSlow: maps of JSON values and of JSON objects (the
// ones written without reflection) come out of JSON exactly as the
// general path (encoding/json, then the canonical writer) writes them,
// and fail where it fails, for keys from the fuzzer (invalid UTF-8,
// keys sorting apart in UTF-8 and UTF-16, HTML characters, empty) and
// values decoded from its JSON; typed and named maps alike.
func FuzzJSONMapsMatchSlow(f *testing.F) {
	f.Add("a", "\U0001F600", "\uFFFD", []byte(`{"z":[1,2.5e-7,null],"a":{"y":-0.0}}`))
	f.Add("\xff", "\xfe", "", []byte(`1e21`))
	f.Add("<&>", "\u2028", "\x00", []byte(`"x"`))
	f.Fuzz(func(t *testing.T, k1, k2, k3 string, val []byte) {
		var v any
		if json.Unmarshal(val, &v) != nil {
			v = nil
		}
		var n json.Number
		_ = json.Unmarshal(val, &n)
		obj := map[string]any{k1: v, k2: map[string]any{k3: v, k1: n}, k3: []any{v, map[string]any(nil)}}
		objs := map[string]map[string]any{k1: obj, k2: nil, k3: {}}
		for _, x := range []any{
			obj, objs, namedObject(obj), map[string]namedObject{k2: obj, k3: nil},
			jsonMaps{O: obj, C: objs, N: obj, NC: map[string]namedObject{k1: obj}, D: map[string]map[string]map[string]any{k3: objs, k1: nil}, A: []map[string]any{obj, nil}},
			&jsonMaps{}, []any{objs, obj},
		} {
			want, werr := jsonSlow(x)
			got, gerr := JSON(x)
			if (werr == nil) != (gerr == nil) || !bytes.Equal(want, got) {
				t.Fatalf("%T %q:\n general %s %v\n JSON    %s %v", x, x, want, werr, got, gerr)
			}
		}
	})
}
