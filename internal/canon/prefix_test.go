package canon

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"
)

// bytesAppender is canonical JSON given as bytes.
type bytesAppender []byte

func (b bytesAppender) AppendCanonical(dst []byte) ([]byte, error) { return append(dst, b...), nil }

// A digest from the remembered state is the digest of the whole
// encoding, whatever the encoding's length and first block, and whichever
// block the state remembers.
func TestPrefixStateSameDigest(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	blockA := bytes.Repeat([]byte("a"), 64)
	blockB := append(bytes.Repeat([]byte("a"), 63), 'b')
	var ps PrefixState
	for i := range 2000 {
		var b []byte
		switch i % 4 {
		case 0:
			b = append([]byte{}, blockA...)
		case 1:
			b = append([]byte{}, blockB...)
		case 2:
			b = append([]byte{}, blockA[:rng.IntN(64)]...)
		}
		for range rng.IntN(300) {
			b = append(b, byte(rng.IntN(256)))
		}
		want := DigestBytes(b)
		got, err := AppendDigestOfCached([]byte("x"), bytesAppender(b), &ps)
		if err != nil || string(got) != "x"+want {
			t.Fatalf("%d bytes: %s, want x%s (%v)", len(b), got, want, err)
		}
		if nilState, _ := AppendDigestOfCached(nil, bytesAppender(b), nil); string(nilState) != want {
			t.Fatalf("without a state: %s, want %s", nilState, want)
		}
	}
	if st := ps.p.Load(); st == nil || !bytes.Equal(st.block[:], blockA) {
		t.Fatal("the state does not remember the first block it was given")
	}
}

// Calls share a state safely, each getting its own digest.
func TestPrefixStateConcurrent(t *testing.T) {
	t.Parallel()
	var ps PrefixState
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				b := append(bytes.Repeat([]byte("p"), 64), byte(g), byte(i))
				got, _ := AppendDigestOfCached(nil, bytesAppender(b), &ps)
				if string(got) != DigestBytes(b) {
					t.Errorf("goroutine %d call %d: a wrong digest", g, i)
					return
				}
			}
		})
	}
	wg.Wait()
}
