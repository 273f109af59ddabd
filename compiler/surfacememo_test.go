package compiler_test

import (
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/runcontext"
)

// TestPreparedTextsFollowEachRun holds the compiles of one Prepared, which
// keeps the tool and policy blocks it wrote last, to fresh compiles while
// the run changes what they say: the refund amount (the finance gate
// active or not, other policy decisions), the safety mode (capabilities
// withheld) and back again each give the prompt, compiled_context_hash
// and ledger_hash of a fresh Prepare and Compile.
func TestPreparedTextsFollowEachRun(t *testing.T) {
	s := canonicalScenario(t)
	p, err := compiler.Prepare(s.inputs(), &s.opts)
	if err != nil {
		t.Fatal(err)
	}
	safety := s.rc.SafetyMode
	for i, run := range []struct {
		amount float64
		safety runcontext.ApprovalMode
	}{{4200, safety}, {4200, safety}, {1200, safety}, {4200, safety}, {4200, runcontext.ReadOnly}, {1200, runcontext.Network}, {4200, safety}, {3000, runcontext.Delegated}, {4200, safety}} {
		s.req.Input.Context["refund_amount"] = run.amount
		s.rc.SafetyMode = run.safety
		cc, err := p.Compile(ctx, s.req, s.rc)
		if err != nil {
			t.Fatal(err)
		}
		want := s.compile(t)
		if cc.CompiledPrompt.Render() != want.CompiledPrompt.Render() || cc.Hash() != want.Hash() || cc.ContextLedger.LedgerHash != want.ContextLedger.LedgerHash {
			t.Fatalf("compile %d (amount %v, safety %s): hashes %s %s, a fresh compile's %s %s", i, run.amount, run.safety, cc.Hash(), cc.ContextLedger.LedgerHash, want.Hash(), want.ContextLedger.LedgerHash)
		}
	}
}
