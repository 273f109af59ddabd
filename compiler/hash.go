package compiler

import (
	"errors"
	"fmt"

	"github.com/contextos/contextos/internal/canon"
)

// Form is a version of the compiled form: what compiled_context_hash
// covers and what the prompt shows. A compile uses the current form; a
// replay of a packet recorded in an earlier form compiles it in that form,
// so the packet's hash and record are reproduced as they were recorded.
type Form int

const (
	// FormCurrent is the current form, Form3.
	FormCurrent Form = 0
	// Form1 is the form before Form2: compiled_context_hash over the whole
	// compiled context, its ledger (run, request and trace ids) included;
	// the policy decision id of each policy block in its provenance refs;
	// no environment defaults, data classification or ledger_hash. Its
	// hash is run-specific. Kept to replay packets recorded in it.
	Form1 Form = 1
	// Form2: compiled_context_hash over the compiled prompt, manifests,
	// runtime controls and budget report (seed 001); the prompt carries no
	// run-specific id; the ledger carries its own ledger_hash; the pack's
	// environment defaults fill the locale, currency and timezone the
	// request leaves empty; the ledger records the data classification.
	// Its session block does not show the request's input.context, so
	// requests that differ only there share a hash. Kept to replay
	// packets recorded in it.
	Form2 Form = 2
	// Form3 is Form2 with the whole request input in the compiled prompt:
	// the session block shows input.context, in canonical JSON, as quoted
	// data, and marks the locale, currency and timezone the pack's
	// environment_defaults filled ("(pack default)"). Any change of the
	// request's input moves compiled_context_hash (seed 003: "change one
	// input and the hash moves").
	Form3 Form = 3
)

func (f Form) resolve() Form {
	if f == FormCurrent {
		return Form3
	}
	return f
}

// EarlierForms returns the forms before the current one, newest first: a
// replay of a packet whose compiled_context_hash the current form does
// not reproduce tries each in turn.
func EarlierForms() []Form { return []Form{Form2, Form1} }

// ErrHash reports a compiled context whose compiled_context_hash or
// ledger_hash does not match its content.
var ErrHash = errors.New("compiler: hash does not match the compiled context")

// compiledContent is what compiled_context_hash covers (Form2 and later).
type compiledContent struct {
	CompiledPrompt  CompiledPrompt  `json:"compiled_prompt"`
	Manifests       Manifests       `json:"manifests"`
	RuntimeControls RuntimeControls `json:"runtime_controls"`
	BudgetReport    BudgetReport    `json:"budget_report"`
}

// contentHash returns the compiled_context_hash of c's content (Form2 and
// later):
// sha256 over the RFC 8785 form of {compiled_prompt, manifests,
// runtime_controls, budget_report}. The ledger is not part of it.
func contentHash(c *CompiledContext) (string, error) {
	return canon.DigestOf(contentEncoding{c})
}

// LedgerHash returns the ledger_hash of l: sha256 over the RFC 8785 form
// of the ledger without ledger_hash.
func LedgerHash(l *ContextLedger) (string, error) {
	return canon.DigestOf(ledgerEncoding{l, true})
}

// sealMemo remembers the content encoding a Prepared's compiles hashed
// last (canon.HashMemo): runs of the same pack and evidence share most of
// their compiled content (another request's input first differs in the
// session block, past the pack's blocks and the evidence), and a stretch
// of it that is byte for byte the one hashed before is not compressed
// again. The hash is the same as without it. The ledger has no memo: it
// differs from run to run within its first kilobyte (request and run
// context hashes).
type sealMemo struct {
	content canon.HashMemo
}

// seal sets the hashes of cc in form f, with m (nil: none) remembering
// the content encoding hashed.
func seal(cc *CompiledContext, f Form, m *sealMemo) error {
	l := &cc.ContextLedger
	l.CompiledContextHash, l.LedgerHash = "", ""
	var err error
	if f == Form1 {
		l.CompiledContextHash, err = canon.Digest(cc) // the hash field is empty and omitted
		return err
	}
	var cm *canon.HashMemo
	if m != nil {
		cm = &m.content
	}
	if l.CompiledContextHash, err = canon.DigestOfMemo(contentEncoding{cc}, cm); err != nil {
		return err
	}
	l.LedgerHash, err = LedgerHash(l)
	return err
}

// Verify recomputes c's compiled_context_hash and ledger_hash (Form2) and
// returns an error matching ErrHash naming the one that does not match.
func (c *CompiledContext) Verify() error {
	h, err := contentHash(c)
	if err != nil {
		return fmt.Errorf("%w: compiled_context_hash: %w", ErrHash, err)
	}
	if h != c.ContextLedger.CompiledContextHash {
		return fmt.Errorf("%w: compiled_context_hash is %s, the content hashes to %s", ErrHash, c.ContextLedger.CompiledContextHash, h)
	}
	lh, err := LedgerHash(&c.ContextLedger)
	if err != nil {
		return fmt.Errorf("%w: ledger_hash: %w", ErrHash, err)
	}
	if lh != c.ContextLedger.LedgerHash {
		return fmt.Errorf("%w: ledger_hash is %s, the ledger hashes to %s", ErrHash, c.ContextLedger.LedgerHash, lh)
	}
	return nil
}
