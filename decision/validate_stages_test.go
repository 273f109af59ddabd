package decision

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/internal/enums"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// stageSpec is the decision spec of the stage tests: policy_eval is
// required; denied is a refusal and escalated an escalation by default.
var stageSpec = pack.DecisionSpec{
	DecisionKey:      "refund",
	Version:          "1.0.0",
	AllowedOutcomes:  []string{"approved", "denied", "escalated"},
	RequiredEvidence: []string{"policy_eval"},
}

// stageRecord and stageFacts pass every stage.
func stageRecord() *Record {
	return &Record{
		RecordID: "dr_1", DecisionKey: "refund", DecisionVersion: "1.0.0", Timestamp: "2026-05-01T10:00:00Z",
		Status: Decided, Outcome: "approved", RunID: "run_1", TraceID: "t", TenantID: "acme",
		Lineage:         Lineage{CompiledContextHash: "sha256:c"},
		SubjectIDs:      []string{"customer:c_1"},
		EvidenceRefs:    []string{"tool:adp_orders.lookup:tool_1"},
		PolicyDecisions: []PolicyDecisionRef{{PolicyDecisionID: "pol_1"}},
		Approvals:       []Approval{{GateID: "GATE_A", Approver: "u_1", ApprovalModeEffective: runcontext.Destructive, EvidenceSnapshotHash: "sha256:e"}},
		ControlsActive:  Controls{MustRefuse: []string{"fraud"}},
	}
}

func stageFacts() *Facts {
	p := &pack.Pack{}
	p.DecisionLayer.DecisionSpecs = []pack.DecisionSpec{stageSpec}
	p.IntelligenceRefs.IdentityLayer.CEIDNamespaces = []string{"customer"}
	return &Facts{
		Pack:            p,
		PolicyEvaluated: true,
		ToolResults:     []ToolFact{{CapabilityID: "adp_orders.lookup", ToolCallID: "tool_1"}},
		ActiveGates:     map[string]string{"GATE_A": "finance"},
		BoundPolicyIDs:  []string{"pol_1"},
		Controls:        Controls{MustRefuse: []string{"fraud"}},
	}
}

// stageCase edits the passing record and facts; want are the problems
// (code and path) the stage reports.
type stageCase struct {
	name string
	edit func(r *Record, f *Facts)
	want []string
}

func runStage(t *testing.T, stage func(c *checker), tests []stageCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, f := stageRecord(), stageFacts()
			if tt.edit != nil {
				tt.edit(r, f)
			}
			c := &checker{r: r, f: f}
			stage(c)
			var got []string
			for _, p := range c.probs {
				got = append(got, string(p.Code)+" "+p.Path)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStageFields(t *testing.T) {
	t.Parallel()
	runStage(t, (*checker).fields, []stageCase{
		{"valid", nil, nil},
		{"unknown status", func(r *Record, _ *Facts) { r.Status = "DONE" }, []string{"field status"}},
		{"missing ids", func(r *Record, _ *Facts) { r.RecordID, r.TenantID = "", "" }, []string{"field record_id", "field tenant_id"}},
		{"replay disagrees with lineage", func(r *Record, _ *Facts) {
			r.Replay = &Replay{ReplayPacketID: "rp_1", CompiledContextHash: "sha256:c"}
		}, []string{"field replay.replay_packet_id"}},
		{"timestamp", func(r *Record, _ *Facts) { r.Timestamp = "yesterday" }, []string{"field timestamp"}},
		{"verified claim without hash", func(r *Record, _ *Facts) { r.AgentIdentity.ClaimVerification = ClaimVerified }, []string{"field agent_identity.claim_verification"}},
		{"waived claim with hash", func(r *Record, _ *Facts) {
			r.AgentIdentity.ClaimVerification, r.AgentIdentity.ClaimHash = ClaimWaived, "sha256:h"
		}, []string{"field agent_identity.claim_verification"}},
		{"unknown claim verification", func(r *Record, _ *Facts) { r.AgentIdentity.ClaimVerification = "trusted" }, []string{"field agent_identity.claim_verification"}},
	})
}

func TestStageSpec(t *testing.T) {
	t.Parallel()
	runStage(t, func(c *checker) { c.spec() }, []stageCase{
		{"found", nil, nil},
		{"unknown decision key", func(r *Record, _ *Facts) { r.DecisionKey = "other" }, []string{"field decision_key"}},
		{"no pack", func(_ *Record, f *Facts) { f.Pack = nil }, []string{"field decision_key"}},
	})
}

func TestStageOutcome(t *testing.T) {
	t.Parallel()
	runStage(t, func(c *checker) { c.outcome(stageSpec) }, []stageCase{
		{"valid", nil, nil},
		{"version", func(r *Record, _ *Facts) { r.DecisionVersion = "0.9.0" }, []string{"field decision_version"}},
		{"outcome outside the set", func(r *Record, _ *Facts) { r.Outcome = "partially_approved" }, []string{"outcome_not_allowed outcome"}},
		{"DECIDED without outcome", func(r *Record, _ *Facts) { r.Outcome = "" }, []string{"status_inconsistent outcome"}},
		{"DEFERRED without outcome", func(r *Record, _ *Facts) { r.Status, r.Outcome = Deferred, "" }, nil},
	})
}

func TestStageEvidence(t *testing.T) {
	t.Parallel()
	runStage(t, func(c *checker) { c.evidence(stageSpec) }, []stageCase{
		{"satisfied", nil, nil},
		{"policy not evaluated", func(_ *Record, f *Facts) { f.PolicyEvaluated = false }, []string{"required_evidence_missing required_evidence[0]"}},
		{"rule requirement", func(_ *Record, f *Facts) {
			f.AppliedRules = []AppliedRule{{BundleID: "B", RuleID: "R", Requires: []string{"identity_verified"}}}
		}, []string{"required_evidence_missing policy_rules[B#R].requires[0]"}},
		{"refusal needs none", func(r *Record, f *Facts) { r.Outcome, f.PolicyEvaluated = "denied", false }, nil},
		{"not DECIDED needs none", func(r *Record, f *Facts) { r.Status, f.PolicyEvaluated = Escalated, false }, nil},
	})
}

func TestStageApprovals(t *testing.T) {
	t.Parallel()
	runStage(t, func(c *checker) { c.approvals(stageSpec) }, []stageCase{
		{"approved", nil, nil},
		{"missing, in gate order", func(r *Record, f *Facts) {
			r.Approvals = nil
			f.ActiveGates = map[string]string{"GATE_C": "cfo", "GATE_A": "finance", "GATE_B": "ops"}
		}, []string{"approval_missing approvals", "approval_missing approvals", "approval_missing approvals"}},
		{"wrong role", func(r *Record, _ *Facts) { r.Approvals[0].ApproverRole = "intern" }, []string{"approval_incomplete approvals[0]"}},
		{"no snapshot", func(r *Record, _ *Facts) { r.Approvals[0].EvidenceSnapshotHash = "" }, []string{"approval_incomplete approvals[0]"}},
		{"escalation needs none", func(r *Record, _ *Facts) { r.Outcome, r.Approvals = "escalated", nil }, nil},
	})
}

func TestStageRefusalGrounds(t *testing.T) {
	t.Parallel()
	runStage(t, func(c *checker) { c.refusalGrounds(stageSpec) }, []stageCase{
		{"approval needs none", func(r *Record, _ *Facts) { r.PolicyDecisions, r.EvidenceRefs = nil, nil }, nil},
		{"refusal with a policy decision", func(r *Record, _ *Facts) { r.Outcome, r.EvidenceRefs = "denied", nil }, nil},
		{"refusal without grounds", func(r *Record, _ *Facts) {
			r.Outcome, r.PolicyDecisions, r.EvidenceRefs = "denied", nil, nil
		}, []string{"required_evidence_missing policy_decisions"}},
	})
}

func TestStageCitations(t *testing.T) {
	t.Parallel()
	runStage(t, (*checker).citations, []stageCase{
		{"resolved", nil, nil},
		{"unknown evidence", func(r *Record, _ *Facts) { r.EvidenceRefs = append(r.EvidenceRefs, "kg:order:1#x") }, []string{"evidence_ref_unresolved evidence_refs[1]"}},
		{"admitted, policy and artifact refs", func(r *Record, f *Facts) {
			f.Admitted = map[string]string{"kg:order:1#x": "order"}
			f.PolicyRefs, f.Artifacts = []string{"policy:B#R"}, []string{"artifact:a#sha"}
			r.EvidenceRefs = append(r.EvidenceRefs, "kg:order:1#x", "policy:B#R", "artifact:a#sha")
		}, nil},
		{"many refs against many sources (indexed)", func(r *Record, f *Facts) {
			f.Admitted = map[string]string{"kg:order:1#x": "order"}
			f.PolicyRefs, f.Artifacts = []string{"policy:B#R"}, []string{"artifact:a#sha"}
			for i := range 100 {
				f.ToolResults = append(f.ToolResults, ToolFact{CapabilityID: "adp.cap", ToolCallID: fmt.Sprintf("tc_%d", i)})
				r.EvidenceRefs = append(r.EvidenceRefs, fmt.Sprintf("tool:adp.cap:tc_%d", i))
			}
			r.EvidenceRefs = append(r.EvidenceRefs, "kg:order:1#x", "policy:B#R", "artifact:a#sha", "tool:adp.cap:tc_100", "tool:adp.cap")
		}, []string{"evidence_ref_unresolved evidence_refs[104]", "evidence_ref_unresolved evidence_refs[105]"}},
		{"a near miss of a tool ref", func(r *Record, _ *Facts) {
			r.EvidenceRefs = append(r.EvidenceRefs, r.EvidenceRefs[0]+"x", "tool:"+r.EvidenceRefs[0])
		}, []string{"evidence_ref_unresolved evidence_refs[1]", "evidence_ref_unresolved evidence_refs[2]"}},
		{"subject namespace", func(r *Record, _ *Facts) { r.SubjectIDs = []string{"employee:e_1", "nocolon"} }, []string{"subject_outside_namespaces subject_ids[0]", "subject_outside_namespaces subject_ids[1]"}},
		{"unrecorded policy decision", func(_ *Record, f *Facts) { f.BoundPolicyIDs = append(f.BoundPolicyIDs, "pol_2") }, []string{"policy_decision_unrecorded policy_decisions"}},
	})
}

func TestStageControls(t *testing.T) {
	t.Parallel()
	runStage(t, (*checker).controls, []stageCase{
		{"equal", nil, nil},
		{"different", func(r *Record, _ *Facts) { r.ControlsActive.MustEscalate = []string{"x"} }, []string{"controls_mismatch controls_active"}},
	})
}

func TestStageStatusConsistency(t *testing.T) {
	t.Parallel()
	runStage(t, (*checker).statusConsistency, []stageCase{
		{"DECIDED", nil, nil},
		{"DEFERRED awaiting nothing", func(r *Record, _ *Facts) { r.Status = Deferred }, []string{"status_inconsistent awaiting"}},
		{"DEFERRED awaiting", func(r *Record, _ *Facts) { r.Status, r.Awaiting = Deferred, &Awaiting{Kind: "approval"} }, nil},
		{"CLOSED closing nothing", func(r *Record, _ *Facts) { r.Status = Closed }, []string{"status_inconsistent closes"}},
	})
}

// Validate runs the stages in order and stops after a missing spec.
func TestValidateStages(t *testing.T) {
	t.Parallel()
	if err := Validate(stageRecord(), stageFacts()); err != nil {
		t.Fatalf("Validate(valid) = %v", err)
	}
	r := stageRecord()
	r.DecisionKey, r.ControlsActive = "other", Controls{}
	err := Validate(r, stageFacts())
	ve, ok := err.(*ValidationError)
	if !ok || len(ve.Problems) != 1 || !ve.HasAt(CodeField, "decision_key") {
		t.Errorf("Validate(unknown key) = %v, want only the decision_key problem", err)
	}
}

// The schema generator reads internal/enums: its lists are this package's
// constants, in order.
func TestEnumListsMatchConstants(t *testing.T) {
	t.Parallel()
	var got []string
	for _, s := range statuses() {
		got = append(got, string(s))
	}
	if diff := cmp.Diff(enums.DecisionStatuses(), got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	got = got[:0]
	for _, s := range claimVerifications() {
		got = append(got, string(s))
	}
	if diff := cmp.Diff(enums.ClaimVerifications(), got); diff != "" {
		t.Errorf("claim verifications (-want +got):\n%s", diff)
	}
	if !slices.Contains(statuses(), InFlight) {
		t.Error("IN_FLIGHT is not a status")
	}
}

// Missing approvals are reported in gate id order, whatever the map order.
func TestStageApprovalsOrder(t *testing.T) {
	t.Parallel()
	r, f := stageRecord(), stageFacts()
	r.Approvals = nil
	f.ActiveGates = map[string]string{"GATE_C": "cfo", "GATE_A": "finance", "GATE_B": "ops", "GATE_D": "x", "GATE_E": "y"}
	c := &checker{r: r, f: f}
	c.approvals(stageSpec)
	var got []string
	for _, p := range c.probs {
		got = append(got, p.Message)
	}
	want := []string{
		"gate GATE_A is active and has no approval", "gate GATE_B is active and has no approval", "gate GATE_C is active and has no approval",
		"gate GATE_D is active and has no approval", "gate GATE_E is active and has no approval",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}
