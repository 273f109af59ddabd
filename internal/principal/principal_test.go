package principal

import "testing"

func TestSame(t *testing.T) {
	t.Parallel()
	cases := []struct {
		a, b string
		want bool
	}{
		{"usr_771", "usr_771", true},
		{"usr_771", "usr_771\u200b", true},     // zero-width space
		{"usr_771", "\u200dusr_771", true},     // zero-width joiner
		{"usr_771", "usr_\u202e771", true},     // right-to-left override
		{"usr_771", "\ufeffusr_771", true},     // byte-order mark
		{"usr_771", "usr\u00ad_771", true},     // soft hyphen
		{"usr_771", "ｕｓｒ_７７１", true},           // full-width forms (NFKC)
		{"usr_771", "USR_771", true},           // case
		{"usr_771", " usr_771\t", true},        // surrounding space
		{"Straße", "STRASSE", true},            // full case folding
		{"usr_771", "usr_771\ufe0f", true},     // variation selector
		{"usr_771", "usr\u034f_771", true},     // combining grapheme joiner
		{"usr_771", "usr_771\u3164", true},     // Hangul filler
		{"usr_771", "usr_\u115f771", true},     // Hangul choseong filler
		{"usr_771", "usr_771\U000e0101", true}, // variation selector supplement
		{"\uaba6_1", "\u13d6_1", true},         // Cherokee: folding maps lower to upper case
		{"usr_771", "usr_772", false},
		{"usr_771", "usr 771", false},
		{"", "", false}, // an absent name matches nobody
		{"\u200b", "", false},
		{"\u200b", "\u200c", false},
	}
	for _, c := range cases {
		if got := Same(c.a, c.b); got != c.want {
			t.Errorf("Same(%+q, %+q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := Same(c.b, c.a); got != c.want {
			t.Errorf("Same(%+q, %+q) = %v, want %v (not symmetric)", c.b, c.a, got, c.want)
		}
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{"usr_771", "usr_771\u200b", "ｕｓｒ", "Straße", "\u202e", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := Canonical(s)
		if Canonical(c) != c {
			t.Fatalf("Canonical is not idempotent on %+q: %+q then %+q", s, c, Canonical(c))
		}
		if c != "" && !Same(s, c) {
			t.Fatalf("Same(%+q, Canonical) is false", s)
		}
	})
}

func BenchmarkSamePlain(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Same("usr_771", "usr_771")
	}
}
