package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"
)

// htmlMarshaler writes JSON holding what json.Marshal escapes.
type htmlMarshaler struct{}

func (htmlMarshaler) MarshalJSON() ([]byte, error) {
	return []byte("{ \"<a>\" : \"&\u2028\u2029\" ,\n \"b\":[ 1 , 2 ] }"), nil
}

// badMarshaler writes no JSON.
type badMarshaler struct{}

func (badMarshaler) MarshalJSON() ([]byte, error) { return []byte(`{"a":`), nil }

// failingMarshaler fails.
type failingMarshaler struct{}

func (failingMarshaler) MarshalJSON() ([]byte, error) { return nil, errors.New("no") }

// ptrMarshaler marshals through a pointer receiver only (a map's values
// are not addressable: json.Marshal encodes the struct).
type ptrMarshaler struct{ A string }

func (*ptrMarshaler) MarshalJSON() ([]byte, error) { return []byte(`"ptr"`), nil }

// textKey is a map key type with a text form.
type textKey int

func (k textKey) MarshalText() ([]byte, error) { return []byte("k<" + string(rune('0'+k)) + ">"), nil }

// TestEnvelopeEncodingOfHostileValues: inputs of every kind json.Marshal
// treats specially — marshalers writing HTML characters, U+2028 and white
// space, invalid or failing marshalers, raw messages and numbers good and
// bad, text-marshaled keys, invalid UTF-8 keys that collide once
// replaced, slices and maps nested past the direct depth, cycles through
// slices — encode as json.Marshal encodes them, both as the envelope and
// as input_raw (appendValue of the input alone).
func TestEnvelopeEncodingOfHostileValues(t *testing.T) {
	cyclicSlice := []any{nil}
	cyclicSlice[0] = cyclicSlice
	var deepSlice any = "leaf"
	for range 150 {
		deepSlice = []any{deepSlice, map[string]any{"<": deepSlice}}[0:1]
	}
	var nilMap *map[string]any
	inputs := []map[string]any{
		{"m": htmlMarshaler{}, "mp": &htmlMarshaler{}},
		{"bad": badMarshaler{}},
		{"fail": failingMarshaler{}},
		{"ptr": ptrMarshaler{A: "<"}, "ptrp": &ptrMarshaler{}},
		{"raw": json.RawMessage("\"<\u2028>\" "), "rawnil": json.RawMessage(nil), "rawempty": json.RawMessage{}},
		{"raw bad": json.RawMessage(`{"a":}`)},
		{"num": json.Number(""), "num2": json.Number("-0"), "num3": json.Number("1e400")},
		{"num bad": json.Number("0x10")},
		{"tk": map[textKey]any{1: "<", 2: 3.0}},
		{"\xff": 1.0, "\xfe": 2.0, "\ufffd": 3.0, "<>&": "\u2028", "": nil},
		{"floats": []any{math.Copysign(0, -1), 1e21, 1e-7, float32(1e-7), float32(3.4e38), float32(math.Inf(1)) * 0}},
		{"f32inf": float32(math.Inf(1))},
		{"deep": deepSlice},
		{"cycle": cyclicSlice},
		{"nilptr": nilMap, "err": errors.New("x"), "time": time.Time{}, "dur": time.Second, "bytes": []byte{0xff, '<'}, "nilbytes": []byte(nil)},
		{"anyptr": func() *any { var v any = map[string]any{"a": "<"}; return &v }()},
		{"iface": []error{nil}},
		{"uint": uint64(math.MaxUint64), "i8": int8(-8), "uintptr": uintptr(7)},
		{"complex": complex(1, 2)},
		{"func": func() {}},
	}
	for _, in := range inputs {
		sameAsMarshal(t, &Request{Tool: Tool{Name: "t"}, Input: in})
		want, wantErr := json.Marshal(in)
		got, gotErr := appendValue(nil, in, 0)
		if (wantErr != nil) != (gotErr != nil) || wantErr == nil && !bytes.Equal(got, want) {
			t.Fatalf("input_raw %s, %v; json.Marshal %s, %v", got, gotErr, want, wantErr)
		}
	}
}
