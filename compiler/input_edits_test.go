package compiler_test

import (
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/runcontext"
)

// TestCallerEditingItsPackAfterPrepareChangesNoCompile: Prepare checks the
// packs it is handed (their content hash, validation, compatibility) and
// compiles them from then on. A caller that edits a pack it handed to
// Prepare afterwards — its redaction rules, its guardrails, an adapter's
// approval mode — changes nothing a later compile of the Prepared
// enforces or records: the compiled context (its controls, tool surface
// and hash) is the one of the pack as it was handed over.
func TestCallerEditingItsPackAfterPrepareChangesNoCompile(t *testing.T) {
	t.Parallel()
	s := canonicalScenario(t)
	p, err := compiler.Prepare(s.inputs(), &s.opts)
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.Compile(ctx, s.req, s.rc)
	if err != nil {
		t.Fatal(err)
	}
	// The caller edits its own pack after Prepare.
	s.pack.PolicyLayer.Guardrails.RedactionRules = nil
	s.pack.PolicyLayer.Guardrails.MustRefuse = nil
	for i := range s.pack.ToolingLayer.AdapterRegistry {
		s.pack.ToolingLayer.AdapterRegistry[i].ApprovalMode = runcontext.ReadOnly
	}
	got, err := p.Compile(ctx, s.req, s.rc)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash() != want.Hash() {
		t.Errorf("compiled_context_hash %s, want %s: editing the pack after Prepare changed the compile (controls %+v, want %+v)",
			got.Hash(), want.Hash(), got.RuntimeControls, want.RuntimeControls)
	}
}
