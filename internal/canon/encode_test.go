package canon

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/contextos/contextos/internal/fixture"
	"github.com/gowebpki/jcs"
)

type textKey string

func (k textKey) MarshalText() ([]byte, error) { return []byte("k:" + string(k)), nil }

type ptrJSONMarshaler struct{ N int }

func (p *ptrJSONMarshaler) MarshalJSON() ([]byte, error) {
	return []byte(`{"ptr": true, "n": ` + string(rune('0'+p.N%10)) + `}`), nil
}

type zeroer struct{ V int }

func (z zeroer) IsZero() bool { return z.V < 0 }

type inner struct {
	A string `json:"a,omitempty"`
}

type edge struct {
	Name      string `json:"name"`
	Skip      string `json:"-"`
	Untagged  int
	Empty     string             `json:"empty,omitempty"`
	ZeroInt   int                `json:"zero_int,omitempty"`
	NilPtr    *int               `json:"nil_ptr"`
	NilPtrOE  *int               `json:"nil_ptr_oe,omitempty"`
	Ptr       *int               `json:"ptr"`
	F32       float32            `json:"f32"`
	F64       float64            `json:"f64"`
	Big       int64              `json:"big"`
	BigU      uint64             `json:"big_u"`
	Bytes     []byte             `json:"bytes"`
	NilSlice  []string           `json:"nil_slice"`
	EmptySl   []string           `json:"empty_sl,omitempty"`
	Arr       [2]int             `json:"arr"`
	Any       any                `json:"any"`
	Raw       json.RawMessage    `json:"raw"`
	Num       json.Number        `json:"num"`
	TextKeys  map[textKey]int    `json:"text_keys"`
	IntKeys   map[int]string     `json:"int_keys"`
	Nested    map[string]any     `json:"nested"`
	PtrM      *ptrJSONMarshaler  `json:"ptr_m"`
	ValM      ptrJSONMarshaler   `json:"val_m"`
	SliceM    []ptrJSONMarshaler `json:"slice_m"`
	Zero      zeroer             `json:"zero,omitzero"`
	NotZero   zeroer             `json:"not_zero,omitzero"`
	Time      time.Time          `json:"time"`
	Inner     inner              `json:"inner,omitzero"`
	Invalid   string             `json:"invalid"`
	Unicode   string             `json:"\u00e9t\u00e9"`
	Ordering  map[string]float64 `json:"ordering"`
	Interface map[string]any     `json:"interface"`
}

func edgeValue() edge {
	n := 7
	return edge{
		Name: "x<y>&", Skip: "no", Untagged: 3, NilPtr: nil, Ptr: &n, F32: 0.1, F64: 1e21, Big: -MaxSafeInteger, BigU: MaxSafeInteger,
		Bytes: []byte{0, 1, 254, 255}, Arr: [2]int{1, -0}, Any: []any{1.5, "s", nil, true}, Raw: json.RawMessage(` { "z" : 1 , "a" : [ 2.50 ] } `),
		Num: "1E3", TextKeys: map[textKey]int{"b": 1, "a": 2}, IntKeys: map[int]string{10: "x", 2: "y"},
		Nested: map[string]any{"\U0001F600": 1, "\ufb33": 2, "a": map[string]any{"c": math.Copysign(0, -1), "b": 1e-7}},
		PtrM:   &ptrJSONMarshaler{N: 3}, ValM: ptrJSONMarshaler{N: 4}, SliceM: []ptrJSONMarshaler{{N: 5}}, Zero: zeroer{V: -1}, NotZero: zeroer{V: 1},
		Time: time.Date(2026, 5, 4, 9, 31, 0, 123, time.UTC), Invalid: "a\xffb\xc3", Unicode: "\u2028\x01\"\\",
		Ordering: map[string]float64{"b": 333333333.33333329, "a": 4.5, "10": 1, "1": 2}, Interface: map[string]any{"n": json.Number("12.0")},
	}
}

// openDoc follows internal/wire's open-type convention: MarshalJSON writes
// the fields and the extension members, a field winning over a member.
type openDoc struct {
	A     string                     `json:"a"`
	B     int                        `json:"b,omitempty"`
	Extra map[string]json.RawMessage `json:"-" wire:"extra"`
}

type openDocPlain openDoc

func (o openDoc) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(openDocPlain(o))
	if err != nil || len(o.Extra) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	json.Unmarshal(b, &m)
	for k, v := range o.Extra {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

func TestEncodeOpenTypes(t *testing.T) {
	for _, v := range []any{
		openDoc{A: "x"},
		openDoc{A: "x", Extra: map[string]json.RawMessage{"z": json.RawMessage(`[1, 2.50]`), "a": json.RawMessage(`"shadowed"`), "é": json.RawMessage(`{"b":1,"a":2}`)}},
		[]openDoc{{B: 3, Extra: map[string]json.RawMessage{"c": json.RawMessage(`null`)}}},
		&openDoc{A: "p", Extra: map[string]json.RawMessage{"q": json.RawMessage(`1`)}},
		[]*openDoc{nil},
	} {
		if flagsOf(reflect.TypeFor[openDoc]())&isOpen == 0 {
			t.Fatal("openDoc not recognised as open")
		}
		slow, _ := jsonSlow(v)
		fast, err := encode(v)
		if err != nil || !bytes.Equal(slow, fast) {
			t.Errorf("%v:\n slow %s\n fast %s %v", v, slow, fast, err)
		}
	}
}

// The fast encoder writes exactly what jcs writes from encoding/json's
// output.
func TestEncodeMatchesSlow(t *testing.T) {
	values := []any{edgeValue(), &edge{}, edge{}, []edge{edgeValue()}, map[string]edge{"k": edgeValue()},
		nil, true, 1, -1, 3.5, MaxSafeInteger, -MaxSafeInteger, "s", []int(nil), map[string]int(nil), [0]int{}, json.Number("-0"),
		struct {
			A int `json:"b"`
			B int `json:"a"`
		}{1, 2}}
	var doc any // the shared support RunContext, a representative document
	if err := json.Unmarshal(fixture.RunContext(), &doc); err != nil {
		t.Fatal(err)
	}
	values = append(values, doc)
	// Maps of JSON values and of JSON objects (a record's outputs, a
	// capability's constraints), as struct fields and alone: keys that
	// sort differently in UTF-16 and in UTF-8, a nil object, one with more
	// keys than fit on the stack.
	odd := map[string]any{"\U0001F600": 1.5, "\uFFFD": "x", "a<&>": []any{nil, true}, "": map[string]any{"z": "\u2028"}}
	big := map[string]any{}
	for i := range 20 {
		big[strconv.Itoa(i)] = i
	}
	objs := map[string]map[string]any{"\U0001F600": odd, "\uFFFD": nil, "b": big, "a": {}}
	values = append(values, odd, big, objs, map[string]map[string]any(nil), struct {
		O map[string]any                       `json:"o"`
		C map[string]map[string]any            `json:"c,omitempty"`
		N map[string]any                       `json:"n"`
		E map[string]map[string]any            `json:"e,omitempty"`
		D map[string]map[string]map[string]any `json:"d"`
	}{O: odd, C: objs, D: map[string]map[string]map[string]any{"k": objs}})
	for i, v := range values {
		slow, serr := reference(v)
		fast, ferr := encode(v)
		if ferr == errSlowPath {
			t.Errorf("value %d (%T) took the slow path", i, v)
			continue
		}
		if (serr == nil) != (ferr == nil) || !bytes.Equal(slow, fast) {
			t.Errorf("value %d (%T):\n slow %s %v\n fast %s %v", i, v, slow, serr, fast, ferr)
		}
	}
	// Non-finite numbers fail on both paths.
	for _, v := range []any{math.NaN(), float32(math.Inf(1)), map[string]any{"x": math.Inf(-1)}} {
		if _, err := encode(v); err == nil {
			t.Errorf("encode(%v) accepted a non-finite number", v)
		}
	}
	// Embedded structs go to the general path and still come out right.
	type base struct{ ID string }
	type withEmbed struct {
		base
		N int
	}
	if _, err := encode(withEmbed{}); err != errSlowPath {
		t.Errorf("embedded struct: %v", err)
	}
	got, _ := JSON(withEmbed{base{"x"}, 1})
	if string(got) != `{"ID":"x","N":1}` {
		t.Errorf("JSON(embedded) = %s", got)
	}
}

// FuzzEncodeMatchesSlow is the differential fuzz of the encoder against
// the reference: for any JSON decoded into Go values (as any, and into a
// typed struct), it writes what github.com/gowebpki/jcs writes from
// encoding/json's output, and fails where that fails.
func FuzzEncodeMatchesSlow(f *testing.F) {
	f.Add([]byte(`{"name":"a","f64":1e400}`))
	f.Add([]byte(`{"name":"\ud83d\ude00","any":[1,{"b":2,"a":1}],"nested":{"x":-0.0,"y":12345678901234567890},"f32":3.4e38,"big":-9007199254740993}`))
	b, _ := json.Marshal(edgeValue())
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) == nil {
			compare(t, v)
		}
		var e edge
		if json.Unmarshal(data, &e) == nil {
			compare(t, e)
			compare(t, &e)
		}
	})
}

func compare(t *testing.T, v any) {
	slow, serr := reference(v)
	fast, ferr := encode(v)
	if ferr == errSlowPath {
		return
	}
	if (serr == nil) != (ferr == nil) || !bytes.Equal(slow, fast) {
		t.Fatalf("%T:\n slow %s %v\n fast %s %v", v, slow, serr, fast, ferr)
	}
}

// reference is RFC 8785 as github.com/gowebpki/jcs writes it from
// encoding/json's output, refusing what checkIntegers refuses (a Go
// integer beyond ±MaxSafeInteger): what the encoder is held to.
func reference(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if err := checkIntegers(reflect.ValueOf(v)); err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// encode is JSON's fast path for Go values.
func encode(v any) ([]byte, error) {
	// As with encoding/json, a value passed by value is not addressable:
	// pointer-receiver marshalers apply only inside pointers and slices.
	return appendValue(nil, reflect.ValueOf(v))
}
