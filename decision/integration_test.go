package decision_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// refundRun runs the canonical refund through the gateway with the fakes:
// lookup, policy eval, the paused refund and (optionally) its approval.
type refundRun struct {
	pack    *pack.Pack
	rc      *runcontext.RunContext
	req     *runcontext.InvokeRequest
	cc      *compiler.CompiledContext
	results []*gateway.ToolResultEnvelope
	paused  *gateway.ToolResultEnvelope
	now     time.Time
}

func runRefund(t *testing.T, approve bool) *refundRun {
	t.Helper()
	read := func(n string) []byte { return fixture.Read(t, n) }
	p, _ := pack.Decode(read("ctxpack.support-1.0.0.json"))
	req, _ := runcontext.DecodeInvokeRequest(read("invoke.support-refund.json"))
	rc, _ := runcontext.DecodeRunContext(read("run-context.support.json"))
	var ev compiler.StaticEvidence
	json.Unmarshal(read("evidence.support.json"), &ev)
	prepared, err := compiler.Prepare([]compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: p}}, &compiler.Options{Ontologies: []string{"ont.support@1.0.0"}, Evidence: ev})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := prepared.Compile(ctx, req, rc)
	if err != nil {
		t.Fatal(err)
	}
	orders, pol, pay := gatewaytest.NewScriptedAdapter(), gatewaytest.NewScriptedAdapter(), gatewaytest.NewScriptedAdapter()
	orders.On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881"})
	pol.On("eval").ReturnOutput(map[string]any{"eligible": true})
	pay.On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
	now := time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)
	gw, err := gateway.New([]gateway.Registration{
		{AdapterID: "adp_orders", Adapter: orders, Capabilities: map[string]gateway.Capability{"lookup": {}}},
		{AdapterID: "adp_policy", Adapter: pol, Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: pay, Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
	}, &gateway.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	run, err := gw.NewRun(gateway.RunConfig{Prepared: prepared, Compiled: cc, Request: req, RunContext: rc, Meter: runcontext.NewMeter(rc.RunBudget, now)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rr := &refundRun{pack: p, rc: rc, req: req, cc: cc, now: now}
	for i, c := range []gateway.CallRequest{
		{CapabilityID: "adp_orders.lookup", Step: gateway.StepID{Index: 0}, Args: map[string]any{"order_id": "ord_881"}},
		{CapabilityID: "adp_policy.eval", Step: gateway.StepID{Index: 1}, Args: map[string]any{"order_id": "ord_881"}},
	} {
		res, err := run.Call(ctx, c)
		if err != nil || res.Status != gateway.StatusOK {
			t.Fatalf("call %d: %+v %v", i, res, err)
		}
		rr.results = append(rr.results, res)
	}
	refund := gateway.CallRequest{CapabilityID: "adp_payments.issue_refund", Step: gateway.StepID{Index: 2}, Args: map[string]any{"order_id": "ord_881", "amount_inr": 4200, "currency": "INR"}}
	res, _ := run.Call(ctx, refund)
	rr.paused = res
	if approve {
		refund.Approval = &gateway.Approval{ApprovalID: "apr_1", GateID: res.Approval.GateID, ActionDigest: res.Approval.ActionDigest,
			Approver: "user_finance_lead_77", ApproverRole: "finance_lead", DecidedAt: now}
		done, err := run.Call(ctx, refund)
		if err != nil || done.Status != gateway.StatusCompleted {
			t.Fatalf("approved refund: %+v %v", done, err)
		}
		rr.results = append(rr.results, done)
	}
	return rr
}

// facts assembles the decision facts from the compiled context and the
// gateway's results.
func (rr *refundRun) facts() *decision.Facts {
	f := &decision.Facts{Pack: rr.pack, Admitted: map[string]string{}, RequestContext: rr.req.Input.Context, ActiveGates: map[string]string{}, PolicyEvaluated: true}
	for _, e := range rr.cc.Manifests.EvidenceManifest {
		f.Admitted[e.EvidenceRef] = "evidence"
	}
	for _, r := range rr.results {
		if r.Status.Succeeded() {
			f.ToolResults = append(f.ToolResults, decision.ToolFact{CapabilityID: r.CapabilityID, ToolCallID: r.ToolCallID})
		}
	}
	for _, d := range rr.cc.ContextLedger.PolicyResults {
		f.PolicyRefs = append(f.PolicyRefs, "policy:"+d.BundleID+"#"+d.RuleID)
	}
	for _, g := range rr.cc.ContextLedger.ApprovalGates {
		if g.Active {
			f.ActiveGates[g.GateID] = g.ApproverRole
		}
	}
	rcs := rr.cc.RuntimeControls
	f.Controls = decision.Controls{MustRefuse: rcs.MustRefuse, MustEscalate: rcs.MustEscalate, ApprovalGatesActive: rcs.ApprovalGatesActive, RedactionRulesActive: rcs.RedactionRulesActive}
	return f
}

func (rr *refundRun) input(f *decision.Facts, approvals []decision.Approval) decision.BuildInput {
	var pds []decision.PolicyDecisionRef
	for _, d := range rr.cc.ContextLedger.PolicyResults {
		pds = append(pds, decision.PolicyDecisionRef{PolicyDecisionID: d.PolicyDecisionID, RuleIDs: []string{d.RuleID}})
	}
	return decision.BuildInput{
		Run: rr.rc, RequestID: rr.req.RequestID, Time: rr.now, DecisionKey: "support.refund.execute", Outcome: "approved",
		Outputs: map[string]any{"refund_amount_inr": 4200, "currency": "INR", "transaction_id": "txn_q9"}, Confidence: 0.95,
		Rationale:       decision.Rationale{Strategy: "policy_match_with_evidence"},
		SubjectIDs:      []string{"customer:cus_77", "order:ord_881"},
		EvidenceRefs:    []string{"kg:order:ord_881#snapshot_kg_2026_05_03_T0930", "policy:POLICY_RETURNS_V4#R_HIGH_VALUE_REQUIRES_APPROVAL"},
		PolicyDecisions: pds, Approvals: approvals, Status: decision.Decided, Facts: f,
		Lineage: decision.Lineage{PackVersion: "ctxpack.support@1.0.0", CompiledContextHash: rr.cc.Hash()},
	}
}

func TestRecordFromApprovedRefundValidates(t *testing.T) {
	rr := runRefund(t, true)
	done := rr.results[len(rr.results)-1]
	approvals := []decision.Approval{{GateID: "GATE_FINANCE_APPROVAL", Approver: done.Metadata.Approver, ApproverRole: "finance_lead",
		ApprovalModeEffective: runcontext.Destructive, EvidenceSnapshotHash: done.Metadata.ApprovalEvidenceSnapshotHash, DecidedAt: rr.now.Format(time.RFC3339), ToolCallID: done.ToolCallID}}
	rec, err := decision.Build(rr.input(rr.facts(), approvals))
	if err != nil {
		t.Fatalf("record does not validate: %v", err)
	}
	if rec.Status != decision.Decided || len(rec.EvidenceRefs) != 5 || rec.AgentIdentity.Subject != "agent:contextos/support-refund@1.2.0" {
		t.Errorf("record = %+v", rec)
	}
	store := decision.NewMemoryStore()
	stored, err := store.Append(ctx, rec)
	if err != nil || stored.RecordHash == "" || store.Verify(ctx) != nil {
		t.Errorf("store: %v", err)
	}
	// Same run, same record id and hash.
	again, _ := decision.Build(rr.input(rr.facts(), approvals))
	if again.RecordID != rec.RecordID {
		t.Error("record id not deterministic")
	}
}

func TestRecordWithoutApprovalIsNotDecided(t *testing.T) {
	rr := runRefund(t, false)
	rec, err := decision.Build(rr.input(rr.facts(), nil))
	if rec.Status == decision.Decided {
		t.Fatal("a record missing its approval is DECIDED")
	}
	// Never DEFERRED: only a run paused with a resumable checkpoint is.
	if rec.Status != decision.Escalated || rec.Awaiting != nil || !slices.ContainsFunc(rec.Problems, func(p decision.Problem) bool { return p.Code == decision.CodeApprovalMissing }) {
		t.Errorf("record = %s awaiting %+v, problems %+v (%v)", rec.Status, rec.Awaiting, rec.Problems, err)
	}
	// Forced to DECIDED, validation names the missing approval.
	rec.Status = decision.Decided
	verr := decision.Validate(rec, rr.facts())
	ve, ok := verr.(*decision.ValidationError)
	if !ok || !ve.Has(decision.CodeApprovalMissing) {
		t.Errorf("Validate = %v", verr)
	}
}

func TestValidateRules(t *testing.T) {
	t.Parallel()
	rr := runRefund(t, true)
	done := rr.results[len(rr.results)-1]
	good := []decision.Approval{{GateID: "GATE_FINANCE_APPROVAL", Approver: "user_finance_lead_77", ApproverRole: "finance_lead",
		ApprovalModeEffective: runcontext.Destructive, EvidenceSnapshotHash: done.Metadata.ApprovalEvidenceSnapshotHash, DecidedAt: rr.now.Format(time.RFC3339)}}
	tests := []struct {
		name string
		edit func(in *decision.BuildInput)
		code decision.Code
	}{
		{"outcome outside the closed set", func(in *decision.BuildInput) { in.Outcome = "partially_approved" }, decision.CodeOutcome},
		{"unknown evidence ref", func(in *decision.BuildInput) { in.EvidenceRefs = append(in.EvidenceRefs, "kg:order:ord_999#x") }, decision.CodeEvidenceUnknown},
		{"subject outside namespaces", func(in *decision.BuildInput) { in.SubjectIDs = []string{"account:acc_1"} }, decision.CodeSubjectNamespace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := rr.input(rr.facts(), slices.Clone(good))
			tc.edit(&in)
			_, err := decision.Build(in)
			ve, ok := err.(*decision.ValidationError)
			if !ok || !ve.Has(tc.code) {
				t.Errorf("Build = %v, want %s", err, tc.code)
			}
		})
	}
	// Controls on a record must equal the compiled ones.
	rec, err := decision.Build(rr.input(rr.facts(), slices.Clone(good)))
	if err != nil {
		t.Fatal(err)
	}
	rec.ControlsActive.MustRefuse = nil
	if ve, ok := decision.Validate(rec, rr.facts()).(*decision.ValidationError); !ok || !ve.Has(decision.CodeControls) {
		t.Error("changed controls not caught")
	}
	// An approval without its evidence snapshot does not make a decision.
	in := rr.input(rr.facts(), slices.Clone(good))
	in.Approvals[0].EvidenceSnapshotHash = ""
	rec, _ = decision.Build(in)
	if rec.Status == decision.Decided {
		t.Error("an incomplete approval made a DECIDED record")
	}
	rec.Status = decision.Decided
	if ve, ok := decision.Validate(rec, rr.facts()).(*decision.ValidationError); !ok || !ve.Has(decision.CodeApprovalIncomplete) {
		t.Error("incomplete approval not named")
	}
	// A denial is not the gate's approval: a complete entry that says
	// "denied" leaves the gate without one.
	in = rr.input(rr.facts(), slices.Clone(good))
	in.Approvals[0].Decision, in.Approvals[0].Reason = decision.ApprovalDenied, "not this customer"
	rec, _ = decision.Build(in)
	if rec.Status == decision.Decided {
		t.Error("a denial made a DECIDED record")
	}
	rec.Status = decision.Decided
	if ve, ok := decision.Validate(rec, rr.facts()).(*decision.ValidationError); !ok || !ve.Has(decision.CodeApprovalMissing) {
		t.Error("a gate with only a denial not named as missing its approval")
	}
	// Required evidence missing: no order lookup result → ESCALATED, never DECIDED.
	f := rr.facts()
	f.ToolResults = slices.DeleteFunc(f.ToolResults, func(x decision.ToolFact) bool { return x.CapabilityID == "adp_orders.lookup" })
	in = rr.input(f, good)
	in.EvidenceRefs = in.EvidenceRefs[:1]
	rec, _ = decision.Build(in)
	if rec.Status != decision.Escalated {
		t.Errorf("missing evidence: status %s", rec.Status)
	}
	// A refusal outcome may be DECIDED on the policy decision alone.
	in = rr.input(rr.facts(), nil)
	in.Outcome = "denied"
	rec, err = decision.Build(in)
	if err != nil || rec.Status != decision.Decided {
		t.Errorf("denied: %s %v", rec.Status, err)
	}
}

// Build writes the replay handle (seed 001) from the lineage; Validate
// refuses a handle that disagrees with it.
func TestBuildWritesReplayHandle(t *testing.T) {
	rr := runRefund(t, false)
	in := rr.input(rr.facts(), nil)
	in.Outcome = "denied"
	in.Lineage.ToolTranscriptChainHash = "sha256:" + strings.Repeat("a", 64)
	in.Lineage.ReplayPacketID = "rp_1"
	rec, err := decision.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	want := decision.Replay{ReplayPacketID: "rp_1", CompiledContextHash: rr.cc.Hash(), ToolTranscriptChainHash: in.Lineage.ToolTranscriptChainHash}
	if rec.Replay == nil || *rec.Replay != want {
		t.Fatalf("replay = %+v, want %+v", rec.Replay, want)
	}
	for path, edit := range map[string]func(r *decision.Replay){
		"replay.replay_packet_id":           func(r *decision.Replay) { r.ReplayPacketID = "rp_2" },
		"replay.compiled_context_hash":      func(r *decision.Replay) { r.CompiledContextHash = "sha256:00" },
		"replay.tool_transcript_chain_hash": func(r *decision.Replay) { r.ToolTranscriptChainHash = "" },
	} {
		c := *rec
		rp := *rec.Replay
		edit(&rp)
		c.Replay = &rp
		ve, ok := decision.Validate(&c, rr.facts()).(*decision.ValidationError)
		if !ok || len(ve.Problems) != 1 || ve.Problems[0].Path != path || ve.Problems[0].Code != decision.CodeField {
			t.Errorf("%s changed: Validate = %v", path, ve)
		}
	}
}

// A record takes no secret from what it is built of, whatever redaction
// rules the pack names: the outputs (a secret-named member, a key inside
// a string), the rationale and the alternatives pass the built-in secret
// detectors, the record still validates, and the input is not changed.
func TestBuildRedactsSecrets(t *testing.T) {
	const key, jwt = "sk_live_51HyQ2mBuildSecret000001", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c3JfNzcxIn0.c2lnbmF0dXJlMDAwMQ"
	rr := runRefund(t, false)
	in := rr.input(rr.facts(), nil)
	in.Outcome = "denied"
	in.Outputs = map[string]any{"api_key": "plain-value-0001", "note": "key " + key, "nested": map[string]any{"password": "hunter2hunter2"}}
	in.Rationale = decision.Rationale{Strategy: "critic", Summary: "Authorization: Bearer " + jwt, AlternativesConsidered: []string{"retry with " + key}}
	rec, err := decision.Build(in)
	if err != nil || rec.Status != decision.Decided {
		t.Fatalf("Build = %s, %v", rec.Status, err)
	}
	b, _ := json.Marshal(rec)
	for _, s := range []string{key, jwt, "plain-value-0001", "hunter2hunter2"} {
		if strings.Contains(string(b), s) {
			t.Errorf("the record holds %q: %s", s, b)
		}
	}
	if rec.Outputs["api_key"] != gateway.Redacted || !strings.Contains(rec.Rationale.Summary, "Bearer "+gateway.Redacted) {
		t.Errorf("outputs %v, summary %q: want the marker where the secrets were", rec.Outputs, rec.Rationale.Summary)
	}
	if in.Outputs["api_key"] != "plain-value-0001" || in.Rationale.AlternativesConsidered[0] != "retry with "+key {
		t.Error("Build changed its input")
	}
}
