package engine

import (
	"math"
	"testing"

	"github.com/contextos/contextos/pack"
)

// TestAppendPreparedKeyIsRefEqualsHash holds the prepared packs' key,
// written into a buffer, to the form it had as a string: each pack's
// canonical ref, "=", its content hash and ";".
func TestAppendPreparedKeyIsRefEqualsHash(t *testing.T) {
	refs := []pack.Ref{
		{ID: "support", Major: 1, Minor: 2, Patch: 3},
		{ID: "a.b:c-d_e", Major: 0, Minor: 0, Patch: 0},
		{ID: "big", Major: math.MaxUint64, Minor: 1000, Patch: 99},
	}
	var b []byte
	want := ""
	for i, ref := range refs {
		h := "sha256:" + string(rune('a'+i))
		b = appendPreparedKey(b, ref, h)
		want += ref.String() + "=" + h + ";"
		if string(b) != want {
			t.Fatalf("key after %d packs = %q, want %q", i+1, b, want)
		}
	}
}

// TestPreparedKeyMakesNoString holds the prepared packs' lookup, for a
// run of one pack, to no allocation.
func TestPreparedKeyMakesNoString(t *testing.T) {
	m := map[string]int{"support@1.2.3=sha256:x;": 1}
	ref := pack.Ref{ID: "support", Major: 1, Minor: 2, Patch: 3}
	got := 0
	if n := testing.AllocsPerRun(100, func() {
		var buf [192]byte
		got = m[string(appendPreparedKey(buf[:0], ref, "sha256:x"))]
	}); n != 0 || got != 1 {
		t.Fatalf("lookup: %v allocations, found %d", n, got)
	}
}
