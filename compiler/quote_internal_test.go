package compiler

import (
	"strconv"
	"strings"
	"testing"
)

func quoted(s string) string {
	var b strings.Builder
	writeQuoted(&b, s)
	return b.String()
}

// writeQuoted writes exactly strconv.Quote's text: the plain-ASCII fast
// path included.
func TestWriteQuotedIsQuote(t *testing.T) {
	var cases []string
	for c := 0; c < 256; c++ {
		cases = append(cases, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"z")
	}
	cases = append(cases, "", "plain text 123", strings.Repeat("x", 300), "\u202e", "é", "line\nbreak", `q"uote`, `back\slash`, "\x7f", "tab\t", strings.Repeat("y", 200)+"\u2028")
	for _, s := range cases {
		if got, want := quoted(s), strconv.Quote(s); got != want {
			t.Errorf("writeQuoted(%q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzWriteQuotedIsQuote(f *testing.F) {
	for _, s := range []string{"", "abc", "\"", "\\", "\x00", "\xff", "é", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := quoted(s), strconv.Quote(s); got != want {
			t.Fatalf("writeQuoted(%q) = %s, want %s", s, got, want)
		}
	})
}
