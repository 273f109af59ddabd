package canon

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/contextos/contextos/internal/fixture"
)

// FuzzJSON: canonicalization never panics, accepts exactly what
// encoding/json accepts as one value (less non-finite numbers), is
// idempotent, and produces valid JSON equal in meaning to its input.
func FuzzJSON(f *testing.F) {
	seeds := []string{`{"b":1,"a":[true,null,"x"]}`, `1E30`, `"\u20ac\u000f"`, `{"\ud83d\ude00":1,"\ufb33":2}`, `-0`, `[]`, `{"a":{"b":{"c":0.000001}}}`}
	seeds = append(seeds, string(fixture.RunContext()))
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := JSON(json.RawMessage(in))
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("canonical output is not valid JSON: %q", c)
		}
		again, err := JSON(json.RawMessage(c))
		if err != nil {
			t.Fatalf("canonical output does not re-canonicalize: %v", err)
		}
		if !bytes.Equal(c, again) {
			t.Fatalf("not idempotent:\n%s\n%s", c, again)
		}
		var a, b any
		if json.Unmarshal(in, &a) != nil || json.Unmarshal(c, &b) != nil {
			t.Fatalf("input or output does not decode")
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("meaning changed:\n%s\n%s", in, c)
		}
	})
}

// plainASCIISlow is plainASCII one byte at a time.
func plainASCIISlow(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// TestPlainASCII puts every byte value at every position of strings of
// lengths around the eight-byte word, among plain and among non-plain
// neighbours, and holds the word-at-a-time check to the byte loop.
func TestPlainASCII(t *testing.T) {
	for n := 1; n <= 19; n++ {
		for _, fill := range []byte{'a', '~', ' ', 0x7f, 0x21, 0x23, 0x5b, 0x5d} {
			for pos := 0; pos < n; pos++ {
				for c := 0; c < 256; c++ {
					b := bytes.Repeat([]byte{fill}, n)
					b[pos] = byte(c)
					if got, want := plainASCII(string(b)), plainASCIISlow(string(b)); got != want || plainASCII(b) != want {
						t.Fatalf("plainASCII(%q) = %v (bytes %v), want %v", b, got, plainASCII(b), want)
					}
				}
			}
		}
	}
}

// FuzzPlainASCII: the word-at-a-time check agrees with the byte loop.
func FuzzPlainASCII(f *testing.F) {
	for _, s := range []string{"", "plain ascii text!", "tab\there", `quote"d`, `back\slash`, "€uro", "\x7f\x80", "01234567\x1f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := plainASCII(s), plainASCIISlow(s); got != want || plainASCII([]byte(s)) != want {
			t.Fatalf("plainASCII(%q) = %v (bytes %v), want %v", s, got, plainASCII([]byte(s)), want)
		}
	})
}
