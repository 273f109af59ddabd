package canon_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/contextos/contextos/internal/canon"
)

// An object written through Members is the canonical JSON of the map of
// the same names and values.
func TestMembersMatchesMap(t *testing.T) {
	for _, tc := range []struct {
		names  []string
		values []any
	}{
		{nil, nil},
		{[]string{"b", "a", "a"}, []any{1.0, "x", "x"}},
		{[]string{"user.role", "request.context.refund_amount", "tool.args.0"}, []any{"agent", 1200.0, nil}},
		{[]string{"\U0001F600", "\uFB01", "é", "z", ""}, []any{true, json.Number("1e2"), map[string]any{"k": []any{1.0}}, nil, "<&>"}},
	} {
		m, ok := canon.NewMembers(tc.names)
		if !ok {
			t.Fatalf("NewMembers(%q) refused valid names", tc.names)
		}
		byName := map[string]any{}
		for i, n := range tc.names {
			byName[n] = tc.values[i]
		}
		got, err := m.AppendObject(nil, func(i int) any { return byName[m.Names()[i]] })
		if err != nil {
			t.Fatal(err)
		}
		want, err := canon.JSON(byName)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("names %q: AppendObject = %s, the map = %s", tc.names, got, want)
		}
		// AppendDigestObject takes the values in m's order.
		ordered := make([]any, len(m.Names()))
		for i, n := range m.Names() {
			ordered[i] = byName[n]
		}
		wantDigest, err := canon.Digest(byName)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := m.AppendDigestObject([]byte("x"), ordered); err != nil || string(b) != "x"+wantDigest {
			t.Errorf("names %q: AppendDigestObject = %q, %v; want x then %s, the map's digest", tc.names, b, err, wantDigest)
		}
		if _, err := m.AppendDigestObject(nil, append(ordered, "extra")); err == nil {
			t.Errorf("names %q: AppendDigestObject took one value too many", tc.names)
		}
	}
	if _, ok := canon.NewMembers([]string{"ok", "\xff"}); ok {
		t.Error("NewMembers accepted a name that is not valid UTF-8")
	}
}

// AppendDigestScalars writes, for scalar values, the digest
// AppendDigestObject writes; it declines any other value and fails where
// the object has no canonical form.
func TestAppendDigestScalars(t *testing.T) {
	m, ok := canon.NewMembers([]string{"b", "a", "é", "a\\"})
	if !ok {
		t.Fatal("names refused")
	}
	cases := [][]any{
		{nil, "x", 1.0, true},
		{"q\"uote\\\n\u2028", "é😀", "bad\xffutf8", false},
		{1e21, math.Copysign(0, -1), 0.1, 123456789.125},
		{"", nil, 5e-324, "<>&"},
	}
	for _, vals := range cases {
		want, err := m.AppendDigestObject([]byte("k:"), vals)
		if err != nil {
			t.Fatal(err)
		}
		var scratch [8]byte // too small: the object grows past it
		got, ok, err := m.AppendDigestScalars([]byte("k:"), scratch[:], vals)
		if !ok || err != nil || string(got) != string(want) {
			t.Errorf("%q: AppendDigestScalars = %s, %v, %v; AppendDigestObject %s", vals, got, ok, err, want)
		}
	}
	for _, other := range []any{[]any{1.0}, map[string]any{}, 3, json.Number("1")} {
		if got, ok, err := m.AppendDigestScalars([]byte("k:"), nil, []any{"a", other, nil, nil}); ok || err != nil || string(got) != "k:" {
			t.Errorf("%T: AppendDigestScalars = %s, %v, %v; want it declined", other, got, ok, err)
		}
	}
	if _, ok, err := m.AppendDigestScalars(nil, nil, []any{math.NaN(), nil, nil, nil}); ok || err == nil {
		t.Errorf("NaN: ok %v, err %v; want an error", ok, err)
	}
}

// FuzzAppendDigestScalars: for any names and scalar values,
// AppendDigestScalars writes what AppendDigestObject writes, or fails
// where it fails; it declines nothing scalar.
func FuzzAppendDigestScalars(f *testing.F) {
	f.Add("a", "b", "x", 1.5, true, uint8(0))
	f.Add("é", "a\\", "bad\xffutf8\u2028", 1e21, false, uint8(7))
	f.Add("", "", "", math.Copysign(0, -1), true, uint8(3))
	f.Fuzz(func(t *testing.T, n1, n2, s string, x float64, b bool, shape uint8) {
		m, ok := canon.NewMembers([]string{n1, n2, "z"})
		if !ok {
			return
		}
		pool := []any{nil, s, x, b}
		vals := make([]any, len(m.Names()))
		for i := range vals {
			vals[i] = pool[(int(shape)>>(2*i))&3]
		}
		want, werr := m.AppendDigestObject([]byte("k:"), vals)
		var scratch [16]byte
		got, ok, err := m.AppendDigestScalars([]byte("k:"), scratch[:], vals)
		if (werr != nil) != (err != nil) || werr == nil && (!ok || !bytes.Equal(got, want)) {
			t.Fatalf("%q: AppendDigestScalars = %s, %v, %v; AppendDigestObject %s, %v", vals, got, ok, err, want, werr)
		}
	})
}
