package contextos_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// Two runs of the same pack, request input and run-context settings, with
// different request ids (one a UUID), trace ids and so run ids, compile to
// the same compiled_context_hash; their ledgers (and ledger_hashes) differ.
func TestRunsShareTheCompiledContextHash(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), lookupPlan(), refundPlan(1200)), nil)
	var results []*contextos.Result
	for i, id := range []string{"req_9f3a12", "123e4567-e89b-12d3-a456-426614174000"} {
		req, rc := refundRequest(t, 1200, true)
		req.RequestID, rc.RunID = id, "" // the run id derives from the request id
		if i == 1 {
			req.Trace.TraceID = "5bf92f3577b34da6a3ce929d0e0e4736"
			rc.TraceID = req.Trace.TraceID
		}
		res := h.Invoke(req, rc)
		contextostest.AssertStatus(t, res, decision.Decided)
		if err := res.Compiled.Verify(); err != nil {
			t.Fatal(err)
		}
		results = append(results, res)
	}
	a, b := results[0], results[1]
	if a.RunID == b.RunID {
		t.Fatalf("both runs are %s", a.RunID)
	}
	if a.Compiled.Hash() != b.Compiled.Hash() {
		t.Errorf("compiled_context_hash %s and %s: the runs differ only in run-specific members", a.Compiled.Hash(), b.Compiled.Hash())
	}
	if a.Record.Lineage.CompiledContextHash != a.Compiled.Hash() || b.Record.Lineage.CompiledContextHash != a.Compiled.Hash() {
		t.Errorf("record lineage hashes %s, %s; want %s", a.Record.Lineage.CompiledContextHash, b.Record.Lineage.CompiledContextHash, a.Compiled.Hash())
	}
	if a.Compiled.ContextLedger.LedgerHash == b.Compiled.ContextLedger.LedgerHash || a.Compiled.ContextLedger.RunID == b.Compiled.ContextLedger.RunID {
		t.Error("the two runs' ledgers are alike")
	}
}

// The pack's data_classification is stamped on the run's spans and
// records.
func TestDataClassificationStamped(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{TracerProvider: tp}})
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	stamped := map[string]string{}
	for _, s := range exp.GetSpans() {
		for _, a := range s.Attributes {
			if a.Key == "contextos.data_classification" {
				stamped[s.Name] = a.Value.AsString()
			}
		}
	}
	if stamped["invoke_agent"] != "INTERNAL" || stamped["compile"] != "INTERNAL" {
		t.Errorf("data_classification on spans = %v, want INTERNAL on invoke_agent and compile", stamped)
	}
	recs, err := h.Decisions.List(context.Background(), decision.Filter{RunID: res.RunID})
	if err != nil || len(recs) == 0 {
		t.Fatal(recs, err)
	}
	for _, r := range recs {
		if r.Lineage.DataClassification != "INTERNAL" {
			t.Errorf("record %s lineage.data_classification = %q, want INTERNAL", r.RecordID, r.Lineage.DataClassification)
		}
	}
}

// Options.Overlays reach a run: the overlay is applied to the pack it
// names, its defaults compile, the ledger records it, and the run replays
// equal. An overlay that expands power refuses the run; a nil one the
// runtime.
func TestOverlaysReachARun(t *testing.T) {
	ov := &pack.Overlay{OverlayID: "ov_eu_prod", Base: "ctxpack.support@1.0.0", Environment: "prod-eu",
		EnvironmentDefaults: &pack.EnvironmentDefaults{Currency: "EUR", Timezone: "Europe/Paris"},
		Guardrails:          pack.Guardrails{MustEscalate: []string{"chargeback_open"}}}
	other := &pack.Overlay{OverlayID: "ov_other", Base: "ctxpack.other@1.0.0", Environment: "prod-eu"}
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Overlays: []*pack.Overlay{other, ov}}})
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	l := res.Compiled.ContextLedger
	if got := l.Packs[0].Overlay; got == nil || got.OverlayID != "ov_eu_prod" || got.Environment != "prod-eu" || !strings.HasPrefix(got.Hash, "sha256:") {
		t.Errorf("ledger overlay = %+v", got)
	}
	if l.Environment == nil || l.Environment.Currency != "EUR" || l.Environment.Timezone != "Europe/Paris" {
		t.Errorf("ledger environment = %+v, want the overlay's EUR and Europe/Paris", l.Environment)
	}
	if !strings.Contains(strings.Join(res.Compiled.RuntimeControls.MustEscalate, ","), "chargeback_open") {
		t.Errorf("must_escalate = %v, want the overlay's guardrail", res.Compiled.RuntimeControls.MustEscalate)
	}
	// Without the overlay the compiled context is another.
	plain := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
	if pres := plain.Invoke(refundRequest(t, 1200, true)); pres.Compiled.Hash() == res.Compiled.Hash() {
		t.Error("the overlay does not change the compiled context")
	}

	bad := &pack.Overlay{OverlayID: "ov_loose", Base: "ctxpack.support@1.0.0", Environment: "prod",
		AdapterApprovalModes: map[string]pack.ApprovalMode{"adp_payments": runcontext.ReadOnly}}
	hb := bareHarness(t, contextostest.NewPlanner(), &contextostest.Options{Runtime: contextos.Options{Overlays: []*pack.Overlay{bad}}})
	_, err := hb.Runtime.Invoke(context.Background(), req, rc)
	var oe *pack.OverlayError
	if !errors.As(err, &oe) || oe.Rule != pack.OverlayLowerMode || !errors.Is(err, compiler.ErrInput) {
		t.Errorf("an overlay lowering an approval mode: %v", err)
	}
	_, err = contextos.New(contextostest.NewPlanner(), pack.NewMemoryRegistry(nil), runcontext.NewStaticKeys(nil), &contextos.Options{Overlays: []*pack.Overlay{nil}})
	if !errors.Is(err, contextos.ErrConfig) {
		t.Errorf("a nil overlay: %v", err)
	}
}

// Declared ontology versions compare as semantic versions: the host's
// ontology for compatibility.requires is the highest, 1.10.0 over 1.9.0;
// a malformed declaration is a configuration error.
func TestOntologyVersionsSemantic(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(readTestdata(t, "ctxpack.support-1.0.0.json"), &doc); err != nil {
		t.Fatal(err)
	}
	doc["contract_meta"].(map[string]any)["compatibility"].(map[string]any)["requires"].(map[string]any)["ontology"] = ">=1.10.0"
	packJSON, _ := json.Marshal(doc)
	for _, declared := range [][]string{
		{"ont.shared@1.10.0", "ont.shared@1.9.0"},
		{"ont.shared@1.9.0", "ont.shared@1.10.0"},
	} {
		h := contextostest.New(t, contextostest.NewPlanner(deniedPlan()), [][]byte{packJSON}, &contextostest.Options{
			Runtime: contextos.Options{Ontologies: declared, Evidence: evidence(t)}})
		req, rc := refundRequest(t, 1200, false)
		if _, err := h.Runtime.Invoke(context.Background(), req, rc); err != nil {
			t.Errorf("declared %v: %v (1.10.0 satisfies >=1.10.0)", declared, err)
		}
	}
	_, err := contextos.New(contextostest.NewPlanner(), pack.NewMemoryRegistry(nil), runcontext.NewStaticKeys(nil), &contextos.Options{Ontologies: []string{"ont.support"}})
	if !errors.Is(err, contextos.ErrConfig) || !errors.Is(err, compiler.ErrOntology) {
		t.Errorf("a malformed ontology declaration: %v", err)
	}
	// An undeclared ontology says how to declare it.
	h := contextostest.New(t, contextostest.NewPlanner(), [][]byte{readTestdata(t, "ctxpack.support-1.0.0.json")}, nil)
	rt, err := contextos.New(contextostest.NewPlanner(), h.Registry, h.Keys, &contextos.Options{Ontologies: []string{"ont.support@1.1.0"}})
	if err != nil {
		t.Fatal(err)
	}
	req, rc := refundRequest(t, 1200, true)
	_, err = rt.Invoke(context.Background(), req, rc)
	if !errors.Is(err, compiler.ErrOntology) || !strings.Contains(err.Error(), "ont.support") || !strings.Contains(err.Error(), "Options.Ontologies") || !strings.Contains(err.Error(), "--ontology ont.support@1.0.0") {
		t.Errorf("an undeclared ontology: %v", err)
	}
}
