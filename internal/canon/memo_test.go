package canon

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"
)

// A digest through the memo is the digest of the whole encoding, whatever
// it shares with the encoding remembered before it: equal, a prefix of
// it, longer, differing in any byte (inside or after a remembered
// stride), or nothing at all.
func TestHashMemoSameDigest(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	var m HashMemo
	base := make([]byte, 5*memoStride+77)
	for i := range base {
		base[i] = byte('a' + rng.IntN(26))
	}
	prev := base
	for i := range 3000 {
		var b []byte
		switch i % 6 {
		case 0:
			b = bytes.Clone(prev) // equal
		case 1:
			b = bytes.Clone(prev[:rng.IntN(len(prev)+1)]) // a prefix
		case 2:
			b = append(bytes.Clone(prev), bytes.Repeat([]byte("z"), rng.IntN(3*memoStride))...) // longer
		case 3:
			b = bytes.Clone(base)
			if len(b) > 0 {
				b[rng.IntN(len(b))] ^= 1 // one byte differs
			}
		case 4:
			b = make([]byte, rng.IntN(8*memoStride)) // unrelated
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
		case 5:
			b = bytes.Clone(base[:rng.IntN(2*memoStride)]) // short
		}
		got := string(m.appendDigest(nil, b))
		if want := DigestBytes(b); got != want {
			t.Fatalf("round %d (case %d, %d bytes): memo %s, whole %s", i, i%6, len(b), got, want)
		}
		prev = b
	}
}

// The memo keeps a copy: editing the encoding after it was digested does
// not change the digest of the next.
func TestHashMemoKeepsACopy(t *testing.T) {
	t.Parallel()
	var m HashMemo
	b := bytes.Repeat([]byte("x"), 3*memoStride+5)
	m.appendDigest(nil, b)
	b[10] = 'y'
	if got, want := string(m.appendDigest(nil, b)), DigestBytes(b); got != want {
		t.Fatalf("after an edit: %s, want %s", got, want)
	}
}

// Concurrent digests of encodings sharing prefixes are each the whole
// encoding's digest (run with -race).
func TestHashMemoConcurrent(t *testing.T) {
	t.Parallel()
	var m HashMemo
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 200 {
				b := bytes.Repeat([]byte("p"), 4*memoStride)
				b = append(b, byte(rng.IntN(4)))
				b = append(b, bytes.Repeat([]byte("q"), rng.IntN(2*memoStride))...)
				b[rng.IntN(len(b))] = byte(rng.IntN(3))
				if got, want := string(m.appendDigest(nil, b)), DigestBytes(b); got != want {
					t.Errorf("concurrent: %s, want %s", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// DigestOfMemo is DigestOf, with and without a memo.
func TestDigestOfMemo(t *testing.T) {
	t.Parallel()
	var m HashMemo
	for _, s := range []string{`{"a":1}`, `{"a":1}`, `{"a":2}`, string(bytes.Repeat([]byte("1"), 3000))} {
		want, _ := DigestOf(bytesAppender(s))
		for _, mm := range []*HashMemo{&m, nil} {
			if got, err := DigestOfMemo(bytesAppender(s), mm); err != nil || got != want {
				t.Fatalf("%q: %s %v, want %s", s, got, err, want)
			}
		}
	}
}
