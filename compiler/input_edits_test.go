package compiler_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/pack"
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

// TestCallerEditingItsOverlayAfterPrepareChangesNoCompile: the overlays
// of the Options handed to Prepare are applied once, as they were: a
// caller that edits an overlay afterwards (the cap of a permission it
// restates) changes no later compile of the Prepared.
func TestCallerEditingItsOverlayAfterPrepareChangesNoCompile(t *testing.T) {
	t.Parallel()
	s := canonicalScenario(t)
	ov := &pack.Overlay{OverlayID: "ov_prod_cap", Base: "ctxpack.support@1.0.0", Environment: "prod",
		Permissions: []pack.Permission{{PermissionID: "p_issue_refund", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true,
			RequiresApprovalGate: "GATE_FINANCE_APPROVAL",
			ArgConstraints:       map[string]map[string]any{"amount_inr": {"min": 1, "max": 1000}, "idempotency_key": {"required": true}}}}}
	s.opts.Overlays = []*pack.Overlay{ov}
	p, err := compiler.Prepare(s.inputs(), &s.opts)
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.Compile(ctx, s.req, s.rc)
	if err != nil {
		t.Fatal(err)
	}
	ov.Permissions[0].ArgConstraints["amount_inr"]["max"] = 50000
	got, err := p.Compile(ctx, s.req, s.rc)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash() != want.Hash() {
		t.Errorf("editing the overlay after Prepare changed the compile: refund constraints %v, want %v",
			got.Manifests.ToolManifest[2].CapabilityMetadata["issue_refund"].Constraints, want.Manifests.ToolManifest[2].CapabilityMetadata["issue_refund"].Constraints)
	}
}

// editingEvidence is an evidence source that serves its items and edits
// the request context it is handed.
type editingEvidence struct{ compiler.StaticEvidence }

func (e editingEvidence) Evidence(ctx context.Context, q compiler.EvidenceQuery) ([]compiler.EvidenceItem, error) {
	q.Context["refund_amount"] = 99999
	q.Context["identity_verified"] = false
	return e.StaticEvidence.Evidence(ctx, q)
}

// TestEvidenceSourceEditingItsQueryChangesNothing: an evidence source is
// handed the request's context to pick its items by. What it does to
// that context changes neither the compile (its prompt and hash) nor the
// request the caller compiled (whose context a runtime's record reads
// for required evidence and its replay packet pins).
func TestEvidenceSourceEditingItsQueryChangesNothing(t *testing.T) {
	t.Parallel()
	s := canonicalScenario(t)
	p, err := compiler.Prepare(s.inputs(), &s.opts)
	if err != nil {
		t.Fatal(err)
	}
	ev, ok := s.opts.Evidence.(compiler.StaticEvidence)
	if !ok {
		t.Fatalf("the scenario's evidence is %T", s.opts.Evidence)
	}
	want, err := p.Compile(ctx, s.req, s.rc)
	if err != nil {
		t.Fatal(err)
	}
	before := fmt.Sprint(s.req.Input.Context)
	got, err := p.WithSources(editingEvidence{ev}, s.opts.Memory).Compile(ctx, s.req, s.rc)
	if err != nil {
		t.Fatal(err)
	}
	if after := fmt.Sprint(s.req.Input.Context); after != before {
		t.Errorf("the evidence source edited the compiled request's context: %s, was %s", after, before)
	}
	if got.Hash() != want.Hash() {
		t.Errorf("the evidence source's edit changed the compile: %s, want %s", got.Hash(), want.Hash())
	}
}
