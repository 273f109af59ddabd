package canon

import (
	"math/rand/v2"
	"testing"
)

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// TestCompareUTF16MatchesRuneOrder holds compareUTF16's byte fast path to
// the rune-by-rune order (compareRunes) in sign: ASCII, BMP above the
// surrogates, supplementary characters, invalid UTF-8, and prefixes.
func TestCompareUTF16MatchesRuneOrder(t *testing.T) {
	pieces := []string{"", "a", "b", "A", "_", "~", "\x7f", "é", "\uE000", "\uFFFD", "\U0001F600", "\U00010000",
		"\xe2", "\xe2\x82", "\xe2\x82\xac", "\xff", "\x80", "ab", "a\xe2", "a\uE000", "a\U0001F600", "idempotency_key", "amount_inr"}
	check := func(a, b string) {
		t.Helper()
		if got, want := sign(compareUTF16(a, b)), sign(compareRunes(a, b)); got != want {
			t.Fatalf("compareUTF16(%q, %q) sign %d, rune order %d", a, b, got, want)
		}
	}
	for _, x := range pieces {
		for _, y := range pieces {
			for _, z := range pieces {
				check(x+y, x+z)
				check(x+y, z)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{'a', 'b', 0x7f, 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xee, 0x80, 0xf0, 0x9f, 0x98, 0x80, 0xff}
	for range 20000 {
		a := make([]byte, rng.IntN(6))
		for i := range a {
			a[i] = alphabet[rng.IntN(len(alphabet))]
		}
		b := append([]byte(nil), a[:rng.IntN(len(a)+1)]...)
		for range rng.IntN(4) {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
		check(string(a), string(b))
		check(string(b), string(a))
	}
}
