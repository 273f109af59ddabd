package compiler

import (
	"strings"
	"testing"
	"unicode/utf8"
)

var runeCountSeeds = []string{"", "a", "abcdefg", "abcdefgh", "abcdefghi", "é", "aé", "abcdefgé", "abcdefghé",
	"\xff", "a\xffb", "\xe2\x82", "abcdefg\xe2\x82", "日本語のテキスト", "Refund order ord_881 for INR 4200 — ₹",
	strings.Repeat("x", 100) + "\xf0\x9f\x98\x80" + strings.Repeat("y", 9) + "\xed\xa0\x80", "\x80\x80\x80\x80\x80\x80\x80\x80\x80"}

// TestRuneCount holds runeCount, which EstimateTokenizer counts with, to
// utf8.RuneCountInString: ASCII runs of every length around its eight-byte
// step, multi-byte, invalid and truncated sequences at every offset.
func TestRuneCount(t *testing.T) {
	check := func(s string) {
		if got, want := runeCount(s), utf8.RuneCountInString(s); got != want {
			t.Fatalf("runeCount(%q) = %d, utf8.RuneCountInString says %d", s, got, want)
		}
	}
	for _, s := range runeCountSeeds {
		check(s)
	}
	for _, ins := range []string{"é", "\xff", "\xe2\x82", "\xf0\x9f\x98\x80", "\x80", "₹"} {
		for i := 0; i <= 20; i++ {
			for j := 0; j <= 20; j++ {
				check(strings.Repeat("a", i) + ins + strings.Repeat("b", j))
			}
		}
	}
}

func FuzzRuneCount(f *testing.F) {
	for _, s := range runeCountSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := runeCount(s), utf8.RuneCountInString(s); got != want {
			t.Fatalf("runeCount(%q) = %d, utf8.RuneCountInString says %d", s, got, want)
		}
	})
}
