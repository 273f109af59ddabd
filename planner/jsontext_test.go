package planner

import (
	"bytes"
	"encoding/json"
	"testing"
)

// appendString writes what encoding/json writes without HTML escaping.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\/\n\r\t\b\f\x00\x1f", "<>&", "é\u2028\u2029", "\xff\xfe", "a\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendString(nil, s)
		want := marshal(s)
		if !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

// referenceWithout is objectWithout by way of a decoded map.
func referenceWithout(raw []byte, drop ...string) ([]byte, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, false
	}
	for _, k := range drop {
		delete(m, k)
	}
	if _, ok := m["type"]; !ok {
		m["type"] = json.RawMessage(`"object"`)
	}
	return marshal(m), true
}

func TestObjectWithout(t *testing.T) {
	for _, raw := range []string{
		`{"$schema":"x","$id":"y","type":"object","properties":{"a":{"type":"string","pattern":"^[{\"]"}}}`,
		` { "b" : [ 1 , { "c" : "}" } ] , "a" : true , "type" : "object" } `,
		`{"dup":1,"dup":2}`,
		`{"k\u00e9y":"v","k\\\"":null}`,
		`{}`,
		`{"anyOf":[{"required":["a"]}]}`,
	} {
		got, ok := objectWithout([]byte(raw), "$schema", "$id")
		want, wok := referenceWithout([]byte(raw), "$schema", "$id")
		if ok != wok || !bytes.Equal(got, want) {
			t.Errorf("%s: %s, %v; want %s, %v", raw, got, ok, want, wok)
		}
	}
	for _, raw := range []string{`[]`, `"s"`, `null`, `{"a":`, `{"a":1}}`, ``, `true`} {
		if got, ok := objectWithout([]byte(raw)); ok {
			t.Errorf("%q: %s, ok", raw, got)
		}
	}
}

func FuzzObjectWithout(f *testing.F) {
	f.Add(`{"$schema":"x","type":"object","properties":{"a":{"type":"string"}}}`)
	f.Add(`{"a":"\"}{","b":[{},[]],"a":1}`)
	f.Add(`[1]`)
	f.Fuzz(func(t *testing.T, raw string) {
		got, ok := objectWithout([]byte(raw), "$schema", "$id")
		want, wok := referenceWithout([]byte(raw), "$schema", "$id")
		if ok != wok || !bytes.Equal(got, want) {
			t.Fatalf("%q: %s, %v; want %s, %v", raw, got, ok, want, wok)
		}
	})
}
