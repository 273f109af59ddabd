package gateway

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/contextos/contextos/internal/canon"
)

// measured is what the meter charges for v, or -1 when it refuses it.
func measured(v any) int64 {
	m := newMeter(math.MaxInt64)
	if m.value(v, 0) != sizeOK {
		return -1
	}
	return math.MaxInt64 - m.left
}

// The meter never charges less than the canonical JSON a value is
// recorded in, and not much more (a separator per member).
func TestMeterBoundsTheCanonicalSize(t *testing.T) {
	for _, v := range []any{
		map[string]any{},
		map[string]any{"a": "b", "n": 4200.0, "f": 0.1, "big": 1e21, "neg": -1e-7, "t": true, "z": nil},
		map[string]any{"s": "quote\" back\\ ctl\x01\n tab\t", "u": "héllo ✓", "bad": "\xff\xfe"},
		map[string]any{"l": []any{1.0, "x", []any{}, map[string]any{"k": []any{nil}}}},
		map[string]any{"ints": []any{int64(-canon.MaxSafeInteger), uint64(canon.MaxSafeInteger), int32(-7)}, "j": json.Number("12.50")},
		map[string]any{"strs": []string{"a", "b"}, "fs": []float64{1.5, 2}, "m": map[string]float64{"x": 3}},
		// A nil map or slice is written as null (4 bytes), not {} or [].
		map[string]any(nil),
		map[string]any{"m": map[string]any(nil), "l": []any(nil), "s": []string(nil), "f": []float64(nil), "mf": map[string]float64(nil)},
	} {
		b, err := canon.JSON(v)
		if err != nil {
			t.Fatal(err)
		}
		got := measured(v)
		if got < int64(len(b)) || got > 2*int64(len(b))+16 {
			t.Errorf("%s (%d bytes) measured %d", b, len(b), got)
		}
	}
}

// An integer the canonical form cannot write exactly is refused by the
// meter as it is by the encoder, wherever it sits.
func TestMeterRefusesUnsafeIntegers(t *testing.T) {
	for _, v := range []any{
		map[string]any{"n": int64(1 << 53)},
		map[string]any{"n": -(1 << 53)},
		map[string]any{"l": []any{uint64(math.MaxUint64)}},
		map[string]any{"m": map[string]any{"n": uint(1 << 60)}},
		map[string]any{"s": struct{ N int }{math.MaxInt}},
	} {
		if got := measured(v); got != -1 {
			t.Errorf("%v measured %d, want a refusal", v, got)
		}
		if _, err := canon.JSON(v); !errors.Is(err, canon.ErrUnsafeInteger) {
			t.Errorf("%v: canon.JSON = %v, want ErrUnsafeInteger", v, err)
		}
	}
}

// FuzzMeter: for any JSON document, the meter charges at least its
// canonical size, and at a limit below that size refuses it as too large.
func FuzzMeter(f *testing.F) {
	f.Add(`{"a":"b","n":[1,2.5,1e300,-0],"o":{"k":null,"t":true}}`)
	f.Add(`{"s":"\u0001\"\\é\ud800"}`)
	f.Add(`{"deep":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var v map[string]any
		if json.Unmarshal([]byte(doc), &v) != nil {
			return
		}
		b, err := canon.JSON(v)
		if err != nil {
			return
		}
		got := measured(v)
		if got < 0 {
			// Only nesting beyond maxNesting is refused in a JSON document.
			if depthOf(v, 0) <= maxNesting {
				t.Fatalf("%s refused", doc)
			}
			return
		}
		if got < int64(len(b)) {
			t.Fatalf("%s: measured %d, canonical %d bytes", b, got, len(b))
		}
		if len(b) > 1 {
			m := newMeter(int64(len(b)) - 1)
			if v := m.value(v, 0); v != sizeTooLarge {
				t.Fatalf("%s at a limit of %d bytes: %v, want too large", b, len(b)-1, v)
			}
		}
	})
}

func depthOf(v any, d int) int {
	best := d
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			best = max(best, depthOf(e, d+1))
		}
	case []any:
		for _, e := range x {
			best = max(best, depthOf(e, d+1))
		}
	}
	return best
}
