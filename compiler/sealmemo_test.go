package compiler_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/contextos/contextos/compiler"
)

// TestSealMemoHashesEachCompile holds the hashes of a Prepared whose
// compiles remember the encodings they hashed last to those of a fresh
// compile: the same run again, another run of the same request, evidence
// edited in one byte of an admitted item, none, and the first again all give the
// compiled_context_hash and ledger_hash compiler.Compile gives, and Verify
// agrees.
func TestSealMemoHashesEachCompile(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 1))
	s := canonicalScenario(t)
	s.opts.At = time.Date(2026, 5, 3, 9, 0, 0, 0, time.UTC)
	base := s.opts.Evidence.(compiler.StaticEvidence)
	edited := append(compiler.StaticEvidence(nil), base...)
	c := edited[3].Content // one byte of an admitted item, its length kept: the encodings share a long prefix
	edited[3].Content = c[:len(c)-1] + "X"
	p, err := compiler.Prepare(s.inputs(), &s.opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range []compiler.StaticEvidence{base, base, base, edited, {}, base, edited, base} {
		if i == 2 || i == 5 {
			runSpecific(t, s, rng)
		}
		cc, err := p.At(s.opts.At).WithSources(ev, s.opts.Memory).Compile(ctx, s.req, s.rc)
		if err != nil {
			t.Fatal(err)
		}
		if err := cc.Verify(); err != nil {
			t.Fatalf("compile %d: %v", i, err)
		}
		fresh := *s
		fresh.opts.Evidence = ev
		want := fresh.compile(t)
		if cc.Hash() != want.Hash() || cc.ContextLedger.LedgerHash != want.ContextLedger.LedgerHash {
			t.Fatalf("compile %d: hashes %s %s, a fresh compile's %s %s", i, cc.Hash(), cc.ContextLedger.LedgerHash, want.Hash(), want.ContextLedger.LedgerHash)
		}
	}
}
