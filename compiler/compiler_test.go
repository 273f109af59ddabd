package compiler_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

var update = flag.Bool("update", false, "rewrite golden files")

var ctx = context.Background()

type scenario struct {
	pack *pack.Pack
	req  *runcontext.InvokeRequest
	rc   *runcontext.RunContext
	opts compiler.Options
}

func read(t testing.TB, name string) []byte {
	t.Helper()
	return fixture.Read(t, name)
}

// canonicalScenario is seed 003's: support_agent, refund_amount 4200,
// identity_verified true, safety_mode destructive, evidence budget 400,
// five admitted evidence refs (of six) and one promoted memory (of two).
func canonicalScenario(t testing.TB) *scenario {
	t.Helper()
	p, err := pack.Decode(read(t, "ctxpack.support-1.0.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := runcontext.DecodeInvokeRequest(read(t, "invoke.support-refund.json"))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(read(t, "run-context.support.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev compiler.StaticEvidence
	var mem compiler.StaticMemory
	if err := json.Unmarshal(read(t, "evidence.support.json"), &ev); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(read(t, "memory.support.json"), &mem); err != nil {
		t.Fatal(err)
	}
	return &scenario{pack: p, req: req, rc: rc, opts: compiler.Options{Ontologies: []string{"ont.support@1.0.0"}, Evidence: ev, Memory: mem}}
}

func (s *scenario) inputs() []compiler.Input {
	return []compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: s.pack}}
}

func (s *scenario) compile(t testing.TB) *compiler.CompiledContext {
	t.Helper()
	cc, err := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &s.opts)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return cc
}

// The published compiled output of seed 003 for the canonical scenario.
func TestCanonicalMatchesPublishedOutput(t *testing.T) {
	cc := canonicalScenario(t).compile(t)
	type blk struct {
		ID       string
		Bucket   runcontext.Bucket
		Priority int
	}
	var got []blk
	for _, b := range cc.CompiledPrompt.ContextBlocks {
		got = append(got, blk{b.BlockID, b.Bucket, b.Priority})
	}
	want := []blk{{"biz_summary", "business", 90}, {"pol_0", "policy", 80}, {"pol_1", "policy", 80},
		{"tool_0", "tool", 70}, {"tool_1", "tool", 70}, {"tool_2", "tool", 70},
		{"ev_0", "evidence", 60}, {"ev_1", "evidence", 60}, {"ev_2", "evidence", 60}, {"ev_3", "evidence", 60}, {"ev_4", "evidence", 60},
		{"mem_0", "memory", 50}, {"session", "session", 40}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("context blocks (-published +got):\n%s", diff)
	}
	if diff := cmp.Diff([]compiler.PolicyManifestEntry{{BundleID: "POLICY_RETURNS_V4", RuleIDs: []string{"R_REFUND_REQUIRES_IDV", "R_HIGH_VALUE_REQUIRES_APPROVAL"}}}, cc.Manifests.PolicyManifest); diff != "" {
		t.Errorf("policy_manifest (-published +got):\n%s", diff)
	}
	var tools [][2]any
	for _, e := range cc.Manifests.ToolManifest {
		tools = append(tools, [2]any{e.AdapterID, strings.Join(e.Capabilities, ",")})
	}
	if diff := cmp.Diff([][2]any{{"adp_orders", "lookup"}, {"adp_policy", "eval"}, {"adp_payments", "issue_refund"}}, tools); diff != "" {
		t.Errorf("tool_manifest (-published +got):\n%s", diff)
	}
	wantControls := compiler.RuntimeControls{MustRefuse: []string{"refund_without_identity"}, MustEscalate: []string{"fraud_signal_high"},
		ApprovalGatesActive: []string{"GATE_FINANCE_APPROVAL"}, RedactionRulesActive: []string{"pan", "credit_card"}}
	if diff := cmp.Diff(wantControls, cc.RuntimeControls); diff != "" {
		t.Errorf("runtime_controls (-published +got):\n%s", diff)
	}
	wantAlloc := map[runcontext.Bucket]int{"business": 1500, "policy": 1800, "tool": 1500, "evidence": 400, "memory": 1500, "session": 2200}
	if diff := cmp.Diff(wantAlloc, cc.BudgetReport.TokensAllocated); diff != "" {
		t.Errorf("tokens_allocated (-published +got):\n%s", diff)
	}
	if len(cc.BudgetReport.BucketTruncations) != 0 {
		t.Errorf("published output has no truncation; got %v", cc.BudgetReport.BucketTruncations)
	}
	if len(cc.Manifests.EvidenceManifest) != 5 || cc.Manifests.EvidenceManifest[0].EvidenceRef != "kg:order:ord_881#snapshot_kg_2026_05_03_T0930" {
		t.Errorf("evidence manifest = %+v", cc.Manifests.EvidenceManifest)
	}
	md := cc.Manifests.ToolManifest[2].CapabilityMetadata["issue_refund"]
	if md.Kind != "write" || md.RiskLevel != "write_irreversible" || md.ApprovalMode != runcontext.Destructive || md.Source != "adapter_registry" || md.ApprovalGate != "GATE_FINANCE_APPROVAL" || !md.GateActive || md.Constraints["amount_inr"]["max"] != 50000.0 {
		t.Errorf("issue_refund metadata = %+v", md)
	}
	if !strings.HasPrefix(cc.Hash(), "sha256:") || len(cc.Hash()) != 71 {
		t.Errorf("hash = %q", cc.Hash())
	}
}

// The whole compiled output is pinned by a golden file.
func TestCanonicalGolden(t *testing.T) {
	cc := canonicalScenario(t).compile(t)
	got, err := json.MarshalIndent(cc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "canonical.compiled.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("compiled output drifted (-golden +got); run go test ./compiler -update after reviewing:\n%s", diff)
	}
}

func TestIdentityNotVerified(t *testing.T) {
	s := canonicalScenario(t)
	s.req.Input.Context["identity_verified"] = false
	cc := s.compile(t)
	var idv policy.Decision
	for _, d := range cc.ContextLedger.PolicyResults {
		if d.RuleID == "R_REFUND_REQUIRES_IDV" {
			idv = d
		}
	}
	if idv.Outcome != policy.Deny || idv.Reason != "Identity not verified; refund path blocked." || idv.PolicyDecisionID == "" {
		t.Errorf("R_REFUND_REQUIRES_IDV = %+v", idv)
	}
	if slices.Contains(cc.ContextLedger.Tools, "adp_payments.issue_refund") {
		t.Error("a deny must block write-class tools from the surface")
	}
	if !slices.Contains(cc.ContextLedger.Tools, "adp_orders.lookup") {
		t.Error("read-only tools must stay available to explain")
	}
	if cc.ContextLedger.PolicyVerdict != policy.VerdictDeny {
		t.Errorf("verdict = %s", cc.ContextLedger.PolicyVerdict)
	}
}

func TestApprovalGateByAmount(t *testing.T) {
	for _, tc := range []struct {
		amount float64
		active bool
	}{{4200, true}, {3001, true}, {3000, false}, {1200, false}} {
		s := canonicalScenario(t)
		s.req.Input.Context["refund_amount"] = tc.amount
		cc := s.compile(t)
		active := slices.Contains(cc.RuntimeControls.ApprovalGatesActive, "GATE_FINANCE_APPROVAL")
		md := cc.Manifests.ToolManifest[2].CapabilityMetadata["issue_refund"]
		if active != tc.active || md.GateActive != tc.active || md.ApprovalMode != runcontext.Destructive {
			t.Errorf("amount %v: gate active %v (metadata %v), mode %s; want active %v, destructive", tc.amount, active, md.GateActive, md.ApprovalMode, tc.active)
		}
	}
}

func TestSafetyModeFiltersTools(t *testing.T) {
	s := canonicalScenario(t)
	s.rc.SafetyMode = runcontext.ReadOnly
	cc := s.compile(t)
	if want := []string{"adp_orders.lookup", "adp_policy.eval"}; !slices.Equal(cc.ContextLedger.Tools, want) {
		t.Errorf("tools = %v, want %v", cc.ContextLedger.Tools, want)
	}
	if len(cc.Manifests.ToolManifest) != 2 {
		t.Errorf("tool manifest = %+v", cc.Manifests.ToolManifest)
	}
	w := cc.ContextLedger.ToolsWithheld
	if len(w) != 1 || w[0].Capability != "adp_payments.issue_refund" || !strings.Contains(w[0].Reason, "above the run's safety mode read_only") {
		t.Errorf("withheld = %+v", w)
	}
}

// A starved evidence budget truncates visibly, in all four places.
func TestStarvedEvidenceBudgetTruncatesVisibly(t *testing.T) {
	s := canonicalScenario(t)
	s.rc.RunBudget.BucketTokens[runcontext.BucketEvidence] = 100
	cc := s.compile(t)
	br := cc.BudgetReport
	if !br.BucketTruncations[runcontext.BucketEvidence] {
		t.Error("bucket_truncations.evidence not set")
	}
	dropped := br.DroppedBlockIDs[runcontext.BucketEvidence]
	if len(dropped) == 0 || br.TokensUsedByBucket[runcontext.BucketEvidence] > 100 {
		t.Fatalf("dropped %v, used %d", dropped, br.TokensUsedByBucket[runcontext.BucketEvidence])
	}
	if len(br.Warnings) != 1 || !strings.Contains(br.Warnings[0], "evidence bucket exceeded budget") {
		t.Errorf("warnings = %v", br.Warnings)
	}
	var omitted []string
	for _, o := range cc.ContextLedger.Omissions {
		if o.Kind == "block" {
			omitted = append(omitted, o.Ref)
			if o.EstimatedTokens == 0 || o.Priority != 60 /* evidence blocks' priority */ || len(o.SourceRefs) == 0 {
				t.Errorf("omission lacks detail: %+v", o)
			}
		}
	}
	slices.Sort(omitted)
	if !slices.Equal(omitted, dropped) {
		t.Errorf("ledger omissions %v, dropped %v", omitted, dropped)
	}
	if !slices.Equal(cc.ContextLedger.Budget.TruncatedBuckets, []string{"evidence"}) {
		t.Errorf("ledger budget = %+v", cc.ContextLedger.Budget)
	}
	// Dropped evidence is not in the manifest and cannot satisfy a requirement.
	if got := len(cc.Manifests.EvidenceManifest); got != 5-len(dropped) {
		t.Errorf("evidence manifest has %d entries, want %d", got, 5-len(dropped))
	}
	// The last blocks go first.
	if dropped[len(dropped)-1] != "ev_4" {
		t.Errorf("dropped %v, want the last blocks first", dropped)
	}
}

func TestEvidenceAndMemoryAdmission(t *testing.T) {
	s := canonicalScenario(t)
	now := time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)
	ev := s.opts.Evidence.(compiler.StaticEvidence)
	ev = append(ev,
		compiler.EvidenceItem{EvidenceRef: "doc:promo#v1", Content: "Promo ended.", Trust: compiler.Trusted, ExpiresAt: "2026-05-01T00:00:00Z"},
		compiler.EvidenceItem{EvidenceRef: "doc:sla#v3", Content: "SLA is 48h.", Trust: compiler.Trusted, ExpiresAt: "2026-06-01T00:00:00Z"},
		compiler.EvidenceItem{EvidenceRef: "kg:order:ord_881#snapshot_old", Content: "Old snapshot.", Trust: compiler.Trusted, Snapshot: "kg_2026_04_01"},
		compiler.EvidenceItem{EvidenceRef: "doc:sla#v3", Content: "duplicate", Trust: compiler.Trusted},
		compiler.EvidenceItem{EvidenceRef: "doc:legacy", Content: "a plain legacy string"},
	)
	s.opts.Evidence = ev
	s.opts.At = now
	s.opts.KnowledgeSnapshot = "kg_2026_05_03_T0930"
	cc := s.compile(t)
	reasons := map[string]string{}
	for _, o := range cc.ContextLedger.Omissions {
		reasons[o.Ref] = o.Reason
	}
	for ref, want := range map[string]string{
		"chat:msg_991": "untrusted", "doc:promo#v1": "expired", "kg:order:ord_881#snapshot_old": "stale",
		"doc:legacy": "untrusted", "mem:cus_77:guess_vip": "not promoted",
	} {
		if !strings.HasPrefix(reasons[ref], want) {
			t.Errorf("omission of %s = %q, want %s", ref, reasons[ref], want)
		}
	}
	if !slices.Contains(cc.ContextLedger.EvidenceRefs, "doc:sla#v3") || strings.Contains(reasons["doc:sla#v3"], "duplicate") == false {
		t.Errorf("unexpired item admitted once: refs %v, reasons %v", cc.ContextLedger.EvidenceRefs, reasons)
	}
	if !slices.Equal(cc.ContextLedger.MemoryRefs, []string{"mem:cus_77:pref_channel"}) {
		t.Errorf("memory refs = %v", cc.ContextLedger.MemoryRefs)
	}
	// Without a clock, an item with an expiry cannot be admitted.
	s.opts.At = time.Time{}
	cc = s.compile(t)
	if slices.Contains(cc.ContextLedger.EvidenceRefs, "doc:sla#v3") {
		t.Error("evidence with an expiry admitted without a clock")
	}
	// No prompt block carries the untrusted item's injected instruction.
	for _, b := range cc.CompiledPrompt.ContextBlocks {
		if strings.Contains(b.Content, "Ignore all previous instructions") {
			t.Errorf("untrusted content reached block %s", b.BlockID)
		}
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		edit  func(s *scenario)
		err   error
		stage int
	}{
		{"other tenant", func(s *scenario) {
			s.req.TenantID, s.rc.TenantID = "tenant_globex", "tenant_globex"
			s.rc.Agent.PrincipalChain = nil
		}, compiler.ErrTenant, 2},
		{"undeclared ontology", func(s *scenario) { s.opts.Ontologies = []string{"ont.support@2.0.0"} }, compiler.ErrOntology, 4},
		{"no ontologies", func(s *scenario) { s.opts.Ontologies = nil }, compiler.ErrOntology, 4},
		{"intent not served", func(s *scenario) { s.req.Input.Intent, s.rc.Intent = "support.cancel", "support.cancel" }, compiler.ErrIntent, 4},
		{"malformed declared ontology", func(s *scenario) { s.opts.Ontologies = []string{"ont.support@1.0.0", "ont.support"} }, compiler.ErrOntology, 4},
		{"declared ontology not semver", func(s *scenario) { s.opts.Ontologies = []string{"ont.support@1.0"} }, compiler.ErrOntology, 4},
		{"conflicting tenant", func(s *scenario) { s.rc.TenantID = "tenant_globex" }, runcontext.ErrConflict, 0},
		{"policy fails closed", func(s *scenario) { delete(s.req.Input.Context, "identity_verified") }, compiler.ErrPolicy, 5},
		{"evidence source fails", func(s *scenario) { s.opts.Evidence = failingSource{} }, compiler.ErrEvidence, 7},
		{"overlay refused", func(s *scenario) {
			s.opts.Overlays = []*pack.Overlay{{OverlayID: "ov", Base: "ctxpack.support@1.0.0", Environment: "prod", AdapterApprovalModes: map[string]pack.ApprovalMode{"adp_payments": runcontext.ReadOnly}}}
		}, compiler.ErrInput, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := canonicalScenario(t)
			tc.edit(s)
			_, err := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &s.opts)
			var ce *compiler.Error
			if !errors.As(err, &ce) || !errors.Is(err, tc.err) || ce.Stage != tc.stage {
				t.Errorf("Compile = %v, want %v at stage %d", err, tc.err, tc.stage)
			}
		})
	}
	// A shared pack compiles for another tenant.
	s := canonicalScenario(t)
	s.pack.PackMeta.Tenant.Shared = true
	s.req.TenantID, s.rc.TenantID = "tenant_globex", "tenant_globex"
	s.rc.Agent.PrincipalChain = nil
	if _, err := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &s.opts); err != nil {
		t.Errorf("shared pack: %v", err)
	}
	if _, err := compiler.Compile(ctx, nil, s.req, s.rc, &s.opts); !errors.Is(err, compiler.ErrInput) {
		t.Errorf("no packs: %v", err)
	}
	in := s.inputs()
	in[0].Ref = pack.MustParseRef("ctxpack.support@9.9.9")
	if _, err := compiler.Compile(ctx, in, s.req, s.rc, &s.opts); !errors.Is(err, compiler.ErrInput) {
		t.Errorf("ref mismatch: %v", err)
	}
}

type failingSource struct{}

func (failingSource) Evidence(context.Context, compiler.EvidenceQuery) ([]compiler.EvidenceItem, error) {
	return nil, errors.New("graph unavailable")
}

func TestOverlayRecorded(t *testing.T) {
	s := canonicalScenario(t)
	s.opts.Overlays = []*pack.Overlay{{OverlayID: "ov_staging", Base: "ctxpack.support@1.0.0", Environment: "staging", EndpointRefs: map[string]string{"adp_orders": "internal://orders-staging"}}}
	cc := s.compile(t)
	ov := cc.ContextLedger.Packs[0].Overlay
	if ov == nil || ov.OverlayID != "ov_staging" || !strings.HasPrefix(ov.Hash, "sha256:") {
		t.Errorf("ledger overlay = %+v", ov)
	}
	// The endpoint swap is not compiled content: the ledger records it.
	base := canonicalScenario(t).compile(t)
	if cc.ContextLedger.LedgerHash == base.ContextLedger.LedgerHash {
		t.Error("an overlay does not move the ledger_hash")
	}
	// Two overlays of one pack are refused: a run is in one environment.
	s.opts.Overlays = append(s.opts.Overlays, &pack.Overlay{OverlayID: "ov_prod", Base: "ctxpack.support@1.0.0", Environment: "prod"})
	if _, err := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &s.opts); !errors.Is(err, compiler.ErrInput) || !strings.Contains(err.Error(), "ov_prod") {
		t.Errorf("two overlays of one pack: %v", err)
	}
}

// A pack plus a decision catalog merge; a conflicting duplicate id does not.
func TestMergePacks(t *testing.T) {
	s := canonicalScenario(t)
	catalog := canonicalScenario(t).pack
	catalog.PackMeta.PackID = "decision-catalog.support"
	catalog.PackMeta.PackVersion = "2.1.0"
	catalog.ContractMeta.ContractName = "decision-catalog.support"
	catalog.DecisionLayer.DecisionSpecs = append(catalog.DecisionLayer.DecisionSpecs, pack.DecisionSpec{
		DecisionKey: "support.refund.review", Version: "1.0.0", AllowedOutcomes: []string{"reviewed"}, ApprovalMode: runcontext.ReadOnly})
	in := append(s.inputs(), compiler.Input{Ref: pack.MustParseRef("decision-catalog.support@2.1.0"), Pack: catalog})
	p, err := compiler.Prepare(in, &s.opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.Pack().DecisionLayer.DecisionSpecs); n != 2 {
		t.Errorf("merged decision specs = %d, want 2", n)
	}
	cc, err := p.Compile(ctx, s.req, s.rc)
	if err != nil {
		t.Fatal(err)
	}
	if len(cc.ContextLedger.Packs) != 2 || cc.ContextLedger.PackRef != "ctxpack.support@1.0.0" {
		t.Errorf("ledger packs = %+v", cc.ContextLedger.Packs)
	}
	catalog.DecisionLayer.DecisionSpecs[0].AllowedOutcomes = []string{"approved"}
	if _, err := compiler.Prepare(in, &s.opts); !errors.Is(err, compiler.ErrMerge) || !strings.Contains(err.Error(), `decision_key "support.refund.execute"`) {
		t.Errorf("conflicting duplicate: %v", err)
	}
}

// An intent the pack does not serve is named in the refusal clipped, a
// credential in it redacted: the intent is the caller's free text.
func TestIntentRefusalHidesAKey(t *testing.T) {
	t.Parallel()
	s := canonicalScenario(t)
	key := "ghp_" + strings.Repeat("Ab1", 12)
	s.req.Input.Intent, s.rc.Intent = key, key
	_, err := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &s.opts)
	if !errors.Is(err, compiler.ErrIntent) {
		t.Fatalf("Compile = %v, want ErrIntent", err)
	}
	if strings.Contains(err.Error(), "Ab1Ab1") {
		t.Errorf("the refusal echoes the key: %v", err)
	}
}
