package sensitive

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// redactMapByKey is redactMap as it was before it started from the map's
// own copy: every member put into a new map one by one. The fast path
// must give the same map.
func redactMapByKey[R ~func(string) (string, bool)](x map[string]any, rules []R, secretKeys bool) (any, bool) {
	out := make(map[string]any, len(x))
	changed := false
	type renamed struct {
		from, to string
		v        any
	}
	var moved []renamed
	for k, e := range x {
		nk, kc := RedactString(k, rules)
		secret := secretKeys && (IsSecretKey(k) || kc && IsSecretKey(nk))
		val, c := redactAny(e, rules, secretKeys, secret)
		changed = changed || c
		if kc {
			moved = append(moved, renamed{k, nk, val})
			continue
		}
		out[k] = val
	}
	if len(moved) == 0 {
		return out, changed
	}
	slices.SortFunc(moved, func(a, b renamed) int { return strings.Compare(a.from, b.from) })
	for _, m := range moved {
		name := m.to
		for n := 2; ; n++ {
			if _, taken := out[name]; !taken {
				break
			}
			name = numbered(m.to, n)
		}
		out[name] = m.v
	}
	return out, true
}

// redactMap gives the map, and the answer, redacting member by member
// gives; the copy shares nothing the caller can change with the input.
func TestRedactMapSameAsByKey(t *testing.T) {
	t.Parallel()
	email, _ := Rule("email")
	rules := []func(string) (string, bool){
		func(s string) (string, bool) { return Redact(s, Secrets) },
		func(s string) (string, bool) { return Redact(s, email) },
	}
	big := map[string]any{}
	for i := range 40 {
		big["k"+strconv.Itoa(i)] = "v" + strconv.Itoa(i)
	}
	shrunk := map[string]any{"keep": "a"}
	for i := range 30 {
		shrunk["gone"+strconv.Itoa(i)] = 1.0
	}
	for i := range 30 {
		delete(shrunk, "gone"+strconv.Itoa(i))
	}
	for _, c := range []struct {
		name string
		in   map[string]any
	}{
		{"nil", nil},
		{"empty", map[string]any{}},
		{"flat and clean", map[string]any{"ok": true, "id": "ord_881", "n": 42.5, "none": nil}},
		{"flat, a value redacted", map[string]any{"ok": true, "to": "ann@example.com", "n": 1.0}},
		{"flat, a secret-named member", map[string]any{"api_key": "v1", "ok": false}},
		{"a key renamed", map[string]any{"ann@example.com": "x", "id": "y"}},
		{"renamed keys collide", map[string]any{"ann@example.com": 1.0, "bob@example.com": 2.0, Redacted: 3.0}},
		{"a renamed key onto a kept one", map[string]any{"a ann@example.com": 1.0, "a " + Redacted: 2.0}},
		{"nested", map[string]any{"order": map[string]any{"to": "ann@example.com", "n": 1.0}, "list": []any{"a", 2.0}, "id": "x"}},
		{"json.Number and Go numbers", map[string]any{"n": json.Number("7"), "i": 3, "s": []string{"a"}}},
		{"card number", map[string]any{"card": 4111111111111111.0, "id": "x"}},
		{"many members", big},
		{"grown then shrunk", shrunk},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, secretKeys := range []bool{false, true} {
				want, wantChanged := redactMapByKey(c.in, rules, secretKeys)
				got, changed := redactMap(c.in, rules, secretKeys)
				if diff := cmp.Diff(want, got); diff != "" || changed != wantChanged {
					t.Fatalf("secretKeys %v: changed %v (want %v), mismatch (-by key +got):\n%s", secretKeys, changed, wantChanged, diff)
				}
				if c.in == nil {
					continue
				}
				before := cmp.Diff(nil, c.in)
				m := got.(map[string]any)
				for k := range m {
					m[k] = "edited"
				}
				m["added"] = 1.0
				if after := cmp.Diff(nil, c.in); after != before {
					t.Fatalf("editing the redacted copy changed the input")
				}
			}
		})
	}
}
