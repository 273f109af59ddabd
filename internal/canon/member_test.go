package canon

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"
)

// AppendWithMember writes the bytes AppendValue writes for the map with
// the member added, wherever the key sorts and whatever the other
// members' values hold.
func TestAppendWithMemberSameAsEncoding(t *testing.T) {
	t.Parallel()
	keys := []string{"a", "amount_inr", "id", "idempotency", "idempotency_kex", "idempotency_key2", "idempotency_kez", "idempotency_keyz",
		"order_id", "z", "é", "\U0001F600", "\uE000", "Idempotency_key", "idempotency key", "", "q\"uote", "back\\slash"}
	values := []any{nil, true, false, "plain", "with } and ] and , and \" and \\ and \n", 1.5, -3.0, 1e21,
		map[string]any{}, map[string]any{"n": map[string]any{"x": "}", "y": []any{"]", ",", map[string]any{}}}},
		[]any{}, []any{"a,b", 2.0, []any{map[string]any{"k": "v"}}}, "é\U0001F600"}
	rng := rand.New(rand.NewPCG(1, 2))
	const key, value = "idempotency_key", "ik_0123456789abcdef"
	for i := range 3000 {
		m := map[string]any{}
		for range rng.IntN(len(keys) + 1) {
			k := keys[rng.IntN(len(keys))]
			if k == key {
				continue
			}
			m[k] = values[rng.IntN(len(values))]
		}
		if i%7 == 0 {
			m["k"+strconv.Itoa(i)] = "v"
		}
		obj, err := AppendValue(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendWithMember([]byte("prefix"), obj, m, key, value)
		if err != nil {
			t.Fatalf("%s: %v", obj, err)
		}
		m[key] = value
		want, err := AppendValue([]byte("prefix"), m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("with the member added:\n got %s\nwant %s", got, want)
		}
	}
}

// Bytes that are not the map's canonical form are refused, not spliced.
func TestAppendWithMemberRefuses(t *testing.T) {
	t.Parallel()
	m := map[string]any{"a": 1.0, "b": 2.0}
	for _, obj := range []string{"", "{", "[]", `{"a":1}`, `{"a":1,"b"`} {
		if got, err := AppendWithMember(nil, []byte(obj), m, "c", "v"); err == nil {
			t.Errorf("%q: got %s, want an error", obj, got)
		}
	}
	// A key that is not valid UTF-8 is ordered by its replaced form on
	// the general path: such a map is not spliced.
	bad := map[string]any{"a\xff": 1.0, "b": 2.0}
	obj, err := AppendValue(nil, bad)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := AppendWithMember(nil, obj, bad, "c", "v"); err == nil {
		t.Errorf("a key that is not valid UTF-8: got %s, want an error", got)
	}
}
