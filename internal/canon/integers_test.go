package canon

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

type bigStringOpt struct {
	N int64 `json:"n,string"`
}

type embedsBig struct {
	bigInner
	M int `json:"m"`
}

type bigInner struct {
	N int64 `json:"n"`
}

// Two embedded structs with a MarshalJSON each: neither method is
// promoted (the selector is ambiguous), so encoding/json writes their
// fields, flattened.
type ptrMarshalsN struct{ N int64 }

func (*ptrMarshalsN) MarshalJSON() ([]byte, error) { return []byte(`1`), nil }

type ptrMarshalsK struct{ K int64 }

func (*ptrMarshalsK) MarshalJSON() ([]byte, error) { return []byte(`2`), nil }

type ambiguousPtrMarshalers struct {
	ptrMarshalsN
	ptrMarshalsK
}

type valMarshalsN struct{ N int64 }

func (valMarshalsN) MarshalJSON() ([]byte, error) { return []byte(`1`), nil }

type valMarshalsK struct{ K int64 }

func (valMarshalsK) MarshalJSON() ([]byte, error) { return []byte(`2`), nil }

type ambiguousValMarshalers struct {
	valMarshalsN
	valMarshalsK
}

type ownJSON struct{ N int64 }

func (o ownJSON) MarshalJSON() ([]byte, error) { return []byte(`{"n":9223372036854775807}`), nil }

// An integer beyond ±(2^53−1) has no canonical form that reads back as
// itself: every way into the encoder refuses it with an *IntegerError
// (which does not echo it), and integers within the range, floats and
// JSON's own numbers (raw documents, json.Number) are written as before.
func TestUnsafeIntegers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    any
		want string // canonical JSON; "" for a refusal
	}{
		{"max safe int64", int64(MaxSafeInteger), "9007199254740991"},
		{"min safe int64", int64(-MaxSafeInteger), "-9007199254740991"},
		{"max safe uint64", uint64(MaxSafeInteger), "9007199254740991"},
		{"2^53", int64(1 << 53), ""},
		{"-2^53", int64(-1 << 53), ""},
		{"max int64", int64(math.MaxInt64), ""},
		{"min int64", int64(math.MinInt64), ""},
		{"max int", math.MaxInt, ""},
		{"max uint64", uint64(math.MaxUint64), ""},
		{"2^53 uint", uint(1 << 53), ""},
		{"in a map of any", map[string]any{"tokens": int64(1 << 62)}, ""},
		{"in a slice of any", []any{1, math.MaxInt}, ""},
		{"in a struct", struct {
			Tokens int `json:"tokens"`
		}{math.MaxInt}, ""},
		{"behind a pointer", &struct{ N *int64 }{N: new(int64(math.MaxInt64))}, ""},
		{"embedded (general path)", embedsBig{bigInner: bigInner{N: math.MaxInt64}}, ""},
		{"embedded, safe (general path)", embedsBig{bigInner: bigInner{N: 5}, M: 1}, `{"m":1,"n":5}`},
		{"string option is a string", bigStringOpt{N: math.MaxInt64}, `{"n":"9223372036854775807"}`},
		{"map key is a string", map[int64]string{math.MaxInt64: "x"}, `{"9223372036854775807":"x"}`},
		{"float64 is a double", float64(1 << 62), "4611686018427388000"},
		{"json.Number is JSON's number", json.Number("9223372036854775807"), "9223372036854776000"},
		{"raw JSON is JSON's numbers", json.RawMessage(`{"n":9223372036854775807}`), `{"n":9223372036854776000}`},
		{"a MarshalJSON writes its own JSON", ownJSON{}, `{"n":9223372036854776000}`},
		// encoding/json calls a pointer-receiver MarshalJSON only on an
		// addressable value: held by value, the struct's fields are written.
		{"pointer-receiver MarshalJSON on a value", struct{ M ptrJSONMarshaler }{ptrJSONMarshaler{N: math.MaxInt}}, ""},
		{"embedded marshalers that cancel out (pointer receivers)", &ambiguousPtrMarshalers{ptrMarshalsN: ptrMarshalsN{N: math.MaxInt64}}, ""},
		{"embedded marshalers that cancel out (value receivers)", ambiguousValMarshalers{valMarshalsN: valMarshalsN{N: math.MaxInt64}}, ""},
		{"embedded marshalers that cancel out, safe", ambiguousValMarshalers{valMarshalsN: valMarshalsN{N: 5}}, `{"K":0,"N":5}`},
		{"pointer-receiver MarshalJSON behind a pointer", &struct{ M ptrJSONMarshaler }{ptrJSONMarshaler{N: math.MaxInt}}, `{"M":{"n":7,"ptr":true}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := JSON(tc.v)
			_, derr := Digest(tc.v)
			_, aerr := AppendValue(nil, tc.v)
			_, xerr := DigestExcluding(tc.v, []string{"x"})
			if tc.want != "" {
				if err != nil || string(got) != tc.want || derr != nil || aerr != nil || xerr != nil {
					t.Fatalf("JSON = %s, %v (Digest %v, AppendValue %v, DigestExcluding %v); want %s", got, err, derr, aerr, xerr, tc.want)
				}
				return
			}
			for _, e := range []error{err, derr, aerr, xerr} {
				var ie *IntegerError
				if !errors.Is(e, ErrUnsafeInteger) || !errors.Is(e, ErrNotCanonicalizable) || !errors.As(e, &ie) || ie.Digits < 16 {
					t.Fatalf("err = %v, want an *IntegerError matching ErrUnsafeInteger and ErrNotCanonicalizable", e)
				}
			}
			if got != nil {
				t.Errorf("a refused value wrote %s", got)
			}
		})
	}
}

// The error names the integer's length, never its digits: a 16-digit
// integer may be a card number.
func TestUnsafeIntegerErrorEchoesNothing(t *testing.T) {
	t.Parallel()
	const card = 9111111111111111 // beyond 2^53−1
	for _, v := range []any{int64(card), uint64(card), map[string]any{"pan": card}, embedsBig{bigInner: bigInner{N: card}}} {
		_, err := JSON(v)
		if err == nil || strings.Contains(err.Error(), "9111111111111111") || !strings.Contains(err.Error(), "16-digit") {
			t.Errorf("JSON(%T) err = %v", v, err)
		}
	}
	if _, err := AppendInt(nil, -card); err == nil || strings.Contains(err.Error(), "911111") {
		t.Errorf("AppendInt err = %v", err)
	}
}

// Of several unsafe integers in a map, the general path reports the same
// one every time: the first in the order the canonical form writes the
// members, not the map's own order, which changes from one range to the
// next.
func TestUnsafeIntegerInAMapIsReportedDeterministically(t *testing.T) {
	type keyed map[string]any
	big := map[string]int64{}
	ints := map[int]int64{}
	for i := 0; i < 40; i++ {
		n := int64(1) << (54 + i%9) // 17 to 19 digits
		big["k"+strconv.Itoa(i)] = n
		ints[i] = n
	}
	for _, tc := range []struct {
		name string
		v    any
		want int
	}{
		{"string keys", struct{ M map[string]int64 }{big}, 17},     // "k0" sorts first: 2^54
		{"int keys", struct{ M map[int]int64 }{ints}, 17},          // "0" sorts first: 2^54
		{"nested", struct{ M keyed }{keyed{"a": big, "b": 1}}, 17}, // through an interface
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < 50; i++ {
				err := checkIntegers(reflect.ValueOf(tc.v))
				var ie *IntegerError
				if !errors.As(err, &ie) || ie.Digits != tc.want {
					t.Fatalf("try %d: %v, want an *IntegerError of %d digits", i, err, tc.want)
				}
			}
		})
	}
}
