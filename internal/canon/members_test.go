package canon_test

import (
	"bytes"
	"encoding/json"
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
