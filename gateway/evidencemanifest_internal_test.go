package gateway

import (
	"math/rand/v2"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/canon"
)

// checkEvidenceManifest fails t when the writer's form of m is not
// canon.JSON's, or its digest not canon.Digest's.
func checkEvidenceManifest(t *testing.T, m []compiler.EvidenceManifestEntry) {
	t.Helper()
	want, werr := canon.JSON(m)
	got, gerr := evidenceManifest(m).AppendCanonical(nil)
	if (werr != nil) != (gerr != nil) || string(got) != string(want) {
		t.Fatalf("%#v:\nwriter %s (%v)\ncanon  %s (%v)", m, got, gerr, want, werr)
	}
	if werr != nil {
		return
	}
	dw, _ := canon.Digest(m)
	if dg, err := canon.DigestOf(evidenceManifest(m)); err != nil || dg != dw {
		t.Fatalf("%#v: digest %s (%v), want %s", m, dg, err, dw)
	}
}

// The evidence manifest's writer is canon.JSON of the same entries: nil,
// empty, every member set or empty, and strings JSON escapes, invalid
// UTF-8 and characters outside the BMP included.
func TestEvidenceManifestWriter(t *testing.T) {
	t.Parallel()
	strs := []string{"", "ev_1", "src:kb", "sha256:" + "ab", "\"q\\", "\u2028\u00e9\U0001F600", "\x00\x1f<>&", "\xff\xfe", "a\xc3"}
	checkEvidenceManifest(t, nil)
	checkEvidenceManifest(t, []compiler.EvidenceManifestEntry{})
	rng := rand.New(rand.NewPCG(37, 2))
	for range 2000 {
		m := make([]compiler.EvidenceManifestEntry, rng.IntN(4))
		for i := range m {
			m[i] = compiler.EvidenceManifestEntry{EvidenceRef: strs[rng.IntN(len(strs))], SourceID: strs[rng.IntN(len(strs))], Hash: strs[rng.IntN(len(strs))]}
		}
		checkEvidenceManifest(t, m)
	}
}

// FuzzEvidenceManifestWriter: for any entries, the writer writes what
// canon.JSON writes.
func FuzzEvidenceManifestWriter(f *testing.F) {
	f.Add("ev_1", "src", "sha256:00", "ev_2", "", "")
	f.Add("\xff", "\u2028", "\"", "", "\x00", "\U0001F600")
	f.Fuzz(func(t *testing.T, r1, s1, h1, r2, s2, h2 string) {
		checkEvidenceManifest(t, []compiler.EvidenceManifestEntry{{EvidenceRef: r1, SourceID: s1, Hash: h1}, {EvidenceRef: r2, SourceID: s2, Hash: h2}})
	})
}
