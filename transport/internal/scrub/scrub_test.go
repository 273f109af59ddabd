package scrub_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/contextos/contextos/transport/internal/scrub"
)

const key = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"

func set(values ...string) *scrub.Set {
	_, s := scrub.With(context.Background())
	s.Add(values...)
	return s
}

func TestStringReplacesEveryForm(t *testing.T) {
	s := set(key, "a/b+c=d&e?f g")
	for name, text := range map[string]string{
		"raw":               "key " + key + " end",
		"base64":            base64.StdEncoding.EncodeToString([]byte(key)),
		"base64url raw":     base64.RawURLEncoding.EncodeToString([]byte(key)),
		"base64 offset 1":   base64.StdEncoding.EncodeToString([]byte("x" + key + "yz")),
		"base64 offset 2":   base64.StdEncoding.EncodeToString([]byte("xy" + key)),
		"base64 then more":  base64.StdEncoding.EncodeToString([]byte(key + "!")),
		"hex":               hex.EncodeToString([]byte(key)),
		"HEX":               strings.ToUpper(hex.EncodeToString([]byte(key))),
		"query escaped":     "q=" + url.QueryEscape("a/b+c=d&e?f g"),
		"path escaped":      "/p/" + url.PathEscape("a/b+c=d&e?f g"),
		"twice in one text": key + key,
	} {
		if got := s.String(text); got == text || !strings.Contains(got, scrub.Mask) {
			t.Errorf("%s: %q not scrubbed", name, text)
		}
	}
	if got := s.String("nothing secret here"); got != "nothing secret here" {
		t.Errorf("scrubbed clean text: %q", got)
	}
}

func TestShortSecretsOnlyAsWholeStrings(t *testing.T) {
	s := set("abc")
	if got := s.String("abc"); got != scrub.Mask {
		t.Errorf("whole %q", got)
	}
	if got := s.String("abcdef alphabet"); got != "abcdef alphabet" {
		t.Errorf("a 3-byte secret blanked ordinary text: %q", got)
	}
}

func TestValueScrubsKeysNumbersAndNesting(t *testing.T) {
	s := set(key, "839201746512")
	var v any
	json.Unmarshal([]byte(`{"a":["x`+key+`", {"`+key+`": 1}], "n": 839201746512, "m": 7, "`+key+`": "k", "[REDACTED]": "taken"}`), &v)
	got, _ := json.Marshal(s.Value(v))
	if strings.Contains(string(got), key) || strings.Contains(string(got), "839201746512") || !strings.Contains(string(got), `"m":7`) {
		t.Fatalf("%s", got)
	}
	// The renamed key does not overwrite the key it collides with.
	if !strings.Contains(string(got), `"[REDACTED]":"taken"`) || !strings.Contains(string(got), `"[REDACTED] (2)":"k"`) {
		t.Fatalf("%s", got)
	}
	var n any
	dec := json.NewDecoder(strings.NewReader(`{"n": 839201746512}`))
	dec.UseNumber()
	dec.Decode(&n)
	if b, _ := json.Marshal(s.Value(n)); strings.Contains(string(b), "839201746512") {
		t.Fatalf("json.Number %s", b)
	}
}

func TestNilAndEmptySetsChangeNothing(t *testing.T) {
	var s *scrub.Set
	m := map[string]any{"k": key}
	if s.String(key) != key || s.Map(m)["k"] != key || !s.Empty() || scrub.From(context.Background()) != nil {
		t.Fatal("a nil set scrubbed")
	}
	scrub.Add(context.Background(), key) // no set: a no-op, not a panic
	if set().String(key) != key {
		t.Fatal("an empty set scrubbed")
	}
}

// BenchmarkScrubOutput: one resolved bearer token scrubbed from a small
// tool output (the per-call cost on an authenticated endpoint).
func BenchmarkScrubOutput(b *testing.B) {
	s := set("tok_9f8e7d6c5b4a39281706")
	b.ReportAllocs()
	for b.Loop() {
		s.Map(map[string]any{"transaction_id": "txn_1", "amount": 1200.0, "status": "issued", "notes": []any{"refund of order ord_881"}})
	}
}
