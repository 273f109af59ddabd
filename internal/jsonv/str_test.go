package jsonv

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestStringsWordAtATime: AppendString, which skips eight plain bytes at
// a time (and tries the last eight of a string as one word, overlapping
// bytes already read, or the bytes of a string shorter than eight one by
// one), writes json.Marshal's bytes for strings of 0 to 24 bytes holding
// each byte at each place (and a multi-byte rune before it), and for
// words of bytes around every boundary.
func TestStringsWordAtATime(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 3))
	check := func(w []byte) {
		want, _ := json.Marshal(string(w))
		if got := AppendString(nil, string(w)); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, json.Marshal %s", w, got, want)
		}
	}
	const plain = "abcdefghijklmnopqrstuvwx"
	for n := 0; n <= len(plain); n++ {
		for c := range 256 {
			for pos := range n {
				w := []byte(plain[:n])
				w[pos] = byte(c)
				check(w)
				if pos >= 2 {
					copy(w[pos-2:], "é") // a rune of two bytes just before it
					check(w)
				}
			}
		}
	}
	for range 100000 {
		w := make([]byte, rng.IntN(17))
		for i := range w {
			w[i] = byte(0x1c + rng.IntN(0x66)) // around every boundary
		}
		check(w)
	}
}
