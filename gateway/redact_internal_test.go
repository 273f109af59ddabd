package gateway

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/sortedkeys"
	"github.com/google/go-cmp/cmp"
)

// redactValue copies, normalizes and redacts in one pass: what it returns
// is what normalizing and then redacting returned, and the input is left
// as it was.
func TestRedactValueNormalizes(t *testing.T) {
	type note struct {
		Text string `json:"text"`
		N    int    `json:"n"`
	}
	const card = "4111111111111111"
	rules := []Redactor{BuiltinRedactors()["credit_card"]}
	for _, c := range []struct {
		name    string
		in      any
		want    any
		changed bool
	}{
		{"nil map", map[string]any(nil), map[string]any{}, false},
		{"nil slice", []any(nil), []any{}, false},
		{"plain", map[string]any{"a": "x", "b": 1.5, "c": true, "d": nil}, map[string]any{"a": "x", "b": 1.5, "c": true, "d": nil}, false},
		{"ints", map[string]any{"i": 3, "j": int64(-4), "u": uint(5)}, map[string]any{"i": 3.0, "j": -4.0, "u": 5.0}, false},
		{"number", []any{json.Number("7.25"), json.Number("card " + card)}, []any{7.25, "card " + Redacted}, true},
		{"strings", map[string]any{"s": []string{"ok", "card " + card}}, map[string]any{"s": []any{"ok", "card " + Redacted}}, true},
		{"struct", map[string]any{"n": note{Text: card, N: 2}}, map[string]any{"n": map[string]any{"text": Redacted, "n": 2.0}}, true},
		{"nested", []any{map[string]any{"k": []any{card}}}, []any{map[string]any{"k": []any{Redacted}}}, true},
	} {
		before, _ := json.Marshal(c.in)
		got, changed := redactValue(c.in, rules)
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s: redactValue mismatch (-want +got):\n%s", c.name, diff)
		}
		if changed != c.changed {
			t.Errorf("%s: redactValue changed = %v, want %v", c.name, changed, c.changed)
		}
		if after, _ := json.Marshal(c.in); string(after) != string(before) {
			t.Errorf("%s: the input changed: %s → %s", c.name, before, after)
		}
	}
}

// allRules are the built-in rules, in name order, and a host regexp rule
// that matches the marker's own letters.
func allRules(t testing.TB) []Redactor {
	t.Helper()
	var rules []Redactor
	b := BuiltinRedactors()
	for _, name := range sortedkeys.Of(b) {
		rules = append(rules, b[name])
	}
	host, err := RegexpRedactor(`[A-Z]{4,}|\d{3}`)
	if err != nil {
		t.Fatal(err)
	}
	return append(rules, host)
}

// Keys that are themselves sensitive are renamed, without collisions and
// in the same way whatever the map's order; numbers that are card numbers
// become the marker; secret-named members lose their string values when
// the secret rule is active.
func TestRedactValueKeysNumbersSecrets(t *testing.T) {
	const card, amex = "4111111111111111", "378282246310005"
	b := BuiltinRedactors()
	cards, secret := []Redactor{b["credit_card"]}, []Redactor{b["credit_card"], b["secret"]}
	for _, c := range []struct {
		name    string
		rules   []Redactor
		in      any
		want    any
		changed bool
	}{
		{"card key", cards, map[string]any{card: "x", "a": 1.0}, map[string]any{Redacted: "x", "a": 1.0}, true},
		{"colliding card keys", cards, map[string]any{card: 1.0, amex: 2.0, "card " + card: 3.0},
			map[string]any{Redacted: 2.0, "[REDACTED#2]": 1.0, "card " + Redacted: 3.0}, true},
		{"key named like the marker", cards, map[string]any{Redacted: 0.0, card: 1.0}, map[string]any{Redacted: 0.0, "[REDACTED#2]": 1.0}, true},
		{"card as a number", cards, map[string]any{"n": 4111111111111111.0, "amount": 12.5, "ms": 1700000000000.0}, map[string]any{"n": Redacted, "amount": 12.5, "ms": 1700000000000.0}, true},
		{"card as a json.Number", cards, []any{json.Number(card), json.Number("12.50")}, []any{Redacted, 12.5}, true},
		{"card as an int64", cards, map[string]any{"n": int64(4111111111111111)}, map[string]any{"n": Redacted}, true},
		{"secret-named members", secret, map[string]any{"db_password": "hunter2", "apiKey": "k", "tokens": "many", "token_ref": "secret://x", "max_tokens": 5.0, "s": []any{"a"}},
			map[string]any{"db_password": Redacted, "apiKey": Redacted, "tokens": "many", "token_ref": "secret://x", "max_tokens": 5.0, "s": []any{"a"}}, true},
		{"secret list and nested object", secret, map[string]any{"secrets": []any{"a", "b"}, "credentials": map[string]any{"user": "bob", "password": "pw"}},
			map[string]any{"secrets": []any{Redacted, Redacted}, "credentials": map[string]any{"user": "bob", "password": Redacted}}, true},
		{"secret keys without the secret rule", cards, map[string]any{"password": "hunter2"}, map[string]any{"password": "hunter2"}, false},
		{"empty and redacted secrets stay", secret, map[string]any{"password": "", "token": Redacted}, map[string]any{"password": "", "token": Redacted}, false},
	} {
		for range 20 { // map order must not matter
			got, changed := redactValue(c.in, c.rules)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Fatalf("%s: redactValue mismatch (-want +got):\n%s", c.name, diff)
			}
			if changed != c.changed {
				t.Fatalf("%s: redactValue changed = %v, want %v", c.name, changed, c.changed)
			}
		}
	}
}

// randomValue builds a JSON-shaped value from sensitive and ordinary
// pieces, in keys and values.
func randomValue(r *rand.Rand, depth int) any {
	pieces := []string{"4111111111111111", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00", "bob@example.com", "+1 415 555 0100",
		"123-45-6789", "ABCPE1234F", "password", "password=hunter2", "Bearer abcdef123456", "AKIAIOSFODNN7EXAMPLE", Redacted,
		"[REDACTED#2]", "ok", "ord_881", "12.50", "REDACTED", "x", "db_password", "token", "sha256:96bee2696c42a756ce877831d9163298675321875a3aeac4c06dad73fc68301f"}
	str := func() string {
		var b strings.Builder
		for n := r.IntN(3); n >= 0; n-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
			if r.IntN(2) == 0 {
				b.WriteByte(' ')
			}
		}
		return b.String()
	}
	switch k := r.IntN(6); {
	case depth > 2 || k == 0:
		return str()
	case k == 1:
		return []float64{4111111111111111, 12.5, 378282246310005, 1700000000000}[r.IntN(4)]
	case k == 2:
		out := []any{}
		for n := r.IntN(4); n > 0; n-- {
			out = append(out, randomValue(r, depth+1))
		}
		return out
	default:
		out := map[string]any{}
		for n := r.IntN(5); n > 0; n-- {
			out[str()] = randomValue(r, depth+1)
		}
		return out
	}
}

// Redacting a value twice changes nothing the second time, and the
// result does not depend on map order.
func TestRedactValueIdempotentProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 1))
	rules := allRules(t)
	for range 3000 {
		v := randomValue(r, 0)
		checkRedactValue(t, v, rules)
	}
}

func checkRedactValue(t *testing.T, v any, rules []Redactor) {
	t.Helper()
	out, _ := redactValue(v, rules)
	first, _ := json.Marshal(out)
	for range 3 {
		again, _ := redactValue(v, rules)
		if b, _ := json.Marshal(again); string(b) != string(first) {
			t.Fatalf("redactValue(%v) is not deterministic: %s then %s", v, first, b)
		}
	}
	out2, changed := redactValue(out, rules)
	if b, _ := json.Marshal(out2); string(b) != string(first) || changed {
		t.Fatalf("not idempotent: %s → %s (changed %v)", first, b, changed)
	}
}

// A host expression yields an idempotent rule whatever it matches,
// markers included; an invalid one is ErrConfig.
func TestRegexpRedactor(t *testing.T) {
	if _, err := RegexpRedactor(`a(`); !errors.Is(err, ErrConfig) {
		t.Errorf("invalid expression: %v", err)
	}
	for _, c := range []struct{ expr, in, want string }{
		{`\bEMP-\d{6}\b`, "employee EMP-123456 left", "employee [REDACTED] left"},
		{`[A-Z]+`, "ID AB and [REDACTED]", "[REDACTED] [REDACTED] and [REDACTED]"},
		{`D\] x`, "[REDACTED] x", "[REDACTED]"},
		{`a*`, "bbb", "bbb"},
		{`\d`, "[REDACTED#2] 7", "[REDACTED#2] [REDACTED]"},
	} {
		r, err := RegexpRedactor(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := r(c.in)
		if got != c.want {
			t.Errorf("%s on %q = %q, want %q", c.expr, c.in, got, c.want)
		}
		if again, changed := r(got); again != got || changed {
			t.Errorf("%s: not idempotent: %q → %q", c.expr, got, again)
		}
	}
}
