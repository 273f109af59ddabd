package planner

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/contextos/contextos"
)

// stdJSON is v as encoding/json writes it without HTML escaping, or nil
// when it cannot.
func stdJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// The fast path writes what encoding/json writes, byte for byte, or
// declines (and marshal falls back to encoding/json).
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	type other struct{ A int }
	values := []any{
		nil, "", "plain", "quote \" backslash \\ <html> & \u2028 \u2029 \x00 \x1f \t\n\r\b\f", "bad \xff utf8", "é 日本",
		true, false, 0, -1, math.MaxInt64, int64(math.MinInt64), int32(7), uint64(math.MaxUint64),
		0.0, math.Copysign(0, -1), 1.5, 1e-7, 1e21, 123456789.125, 1e20, 5e-324, math.MaxFloat64, -2.5e-9,
		json.Number("12"), json.Number("-0.5e+10"), json.Number(""), json.Number("01"), json.Number("1."), json.Number("abc"),
		map[string]any(nil), map[string]any{}, map[string]any{"b": 1, "a": []any{"x", 2.5, nil, map[string]any{"z": true}}, "é": "é"},
		[]any(nil), []any{}, []string(nil), []string{"a", "b"},
		map[string]any{"nan": math.NaN()}, []any{math.Inf(1)}, map[string]any{"other": other{A: 1}},
		map[string]string{"a": "b"}, float32(1.5),
		resultDoc{Status: "ok", Output: map[string]any{"k": json.Number("4200")}},
		resultDoc{Status: "error", Error: &errorDoc{Code: "E", Message: "m", Retryable: true}, Truncated: true, OutputBytes: 12, Output: ""},
		resultDoc{Status: "error", Error: &errorDoc{Code: "E"}},
		resultDoc{Status: "ok", Output: map[string]any{"nan": math.NaN()}},
		contextos.DecisionOption{DecisionKey: "k", AllowedOutcomes: []string{"a"}},
		contextos.DecisionOption{DecisionKey: "k", AllowedOutcomes: []string{"a", "b"}, RefusalOutcomes: []string{"b"}, EscalationOutcomes: []string{"e"}, RequiredEvidence: []string{"r"}},
		contextos.DecisionOption{},
	}
	for _, v := range values {
		want := stdJSON(v)
		if want == nil {
			want = []byte("null")
		}
		if got := marshal(v); !bytes.Equal(got, want) {
			t.Errorf("marshal(%#v) = %s, encoding/json writes %s", v, got, want)
		}
	}
}

// appendDecisionOption writes every field of DecisionOption: a field
// added to it must be added there too.
func TestDecisionOptionFields(t *testing.T) {
	if n := reflect.TypeFor[contextos.DecisionOption]().NumField(); n != 5 {
		t.Errorf("DecisionOption has %d fields; appendDecisionOption writes 5", n)
	}
}

// Any JSON document decoded as the runtime decodes arguments and outputs
// (numbers as json.Number, or as float64) is written by the fast path as
// encoding/json writes it.
func FuzzAppendJSON(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[true,null,"x"],"c":{"d":-1.5e-7}}`, `"\u2028<>&"`, `[1e21, 0.000001, 123456789012345678901234567890]`, `{"é":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, useNumber := range []bool{false, true} {
			dec := json.NewDecoder(bytes.NewReader(doc))
			if useNumber {
				dec.UseNumber()
			}
			var v any
			if dec.Decode(&v) != nil {
				return
			}
			if got, want := marshal(v), stdJSON(v); !bytes.Equal(got, want) {
				t.Fatalf("marshal = %s, encoding/json writes %s", got, want)
			}
		}
	})
}

// plain8 holds exactly when each of the 8 bytes is written as it is, for
// every byte value at every position.
func TestPlain8(t *testing.T) {
	for pos := range 8 {
		for b := range 256 {
			s := []byte("abcdefgh")
			s[pos] = byte(b)
			want := b >= 0x20 && b < 0x80 && b != '"' && b != '\\'
			if got := plain8(string(s)); got != want {
				t.Errorf("plain8 with byte %#x at %d = %v, want %v", b, pos, got, want)
			}
		}
	}
}
