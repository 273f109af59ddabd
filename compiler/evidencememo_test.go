package compiler_test

import (
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/canon"
)

// TestEvidenceHashOfEachCompile holds the evidence digest a Prepared keeps
// between compiles to the digest of what each compile retrieved: the same
// items again, items that differ in one member, none, and the first items
// once more all give canon.Digest of their own items, and the ledger hash
// of a compile is the one a fresh Prepared gives.
func TestEvidenceHashOfEachCompile(t *testing.T) {
	s := canonicalScenario(t)
	base := s.opts.Evidence.(compiler.StaticEvidence)
	edited := append(compiler.StaticEvidence(nil), base...)
	edited[1].Content += " (edited)"
	p, err := compiler.Prepare(s.inputs(), &s.opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range []compiler.StaticEvidence{base, base, edited, {}, base, edited, edited} {
		cc, err := p.WithSources(ev, nil).Compile(ctx, s.req, s.rc)
		if err != nil {
			t.Fatal(err)
		}
		items := []compiler.EvidenceItem(ev)
		if items == nil {
			items = []compiler.EvidenceItem{}
		}
		want, err := canon.Digest(items)
		if err != nil {
			t.Fatal(err)
		}
		if got := cc.ContextLedger.Inputs.EvidenceHash; got != want {
			t.Fatalf("compile %d: evidence_hash %s, its items digest to %s", i, got, want)
		}
		o := s.opts
		o.Evidence, o.Memory = ev, nil
		fresh, err := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &o)
		if err != nil {
			t.Fatal(err)
		}
		if cc.ContextLedger.LedgerHash != fresh.ContextLedger.LedgerHash || cc.Hash() != fresh.Hash() {
			t.Fatalf("compile %d: ledger %s and hash %s, a fresh Prepared gives %s and %s", i, cc.ContextLedger.LedgerHash, cc.Hash(), fresh.ContextLedger.LedgerHash, fresh.Hash())
		}
	}
}
