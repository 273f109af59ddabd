// Package decision owns the DecisionRecord, the typed, replayable audit
// receipt of a governed run: its statuses, building a record from a run's
// facts, validation against the pack's DecisionSpec, record_hash, and the
// append-only, hash-chained Store with in-memory and file implementations.
//
// # Hashing and chaining
//
// record_hash is "sha256:" over the RFC 8785 form of the record without
// record_hash. A Store sets prev_record_hash to the previous record's
// record_hash (the first record's is GenesisHash) when it appends, so any
// changed byte in any stored record breaks Verify at that record.
//
// # The file store
//
// FileStore keeps the chain in a JSON Lines file with a sealed head beside
// it ("<log>.head": record count, size and last record_hash), so a log cut
// short or deleted is refused (ErrTruncated) as an edited one is
// (ErrChain); it admits one writer at a time ("<log>.lock", ErrLocked),
// verifies the log on every read, and leaves the one repair a crash can
// need — an incomplete last line — to an explicit, logged RepairFileStore.
package decision

import (
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/runcontext"
)

// Status is a DecisionRecord status.
type Status string

// Record statuses (seed 000).
const (
	Decided   Status = "DECIDED"
	Deferred  Status = "DEFERRED"
	Rejected  Status = "REJECTED"
	Escalated Status = "ESCALATED"
	InFlight  Status = "IN_FLIGHT"
	Closed    Status = "CLOSED"
)

// Statuses returns the six statuses.
func Statuses() []Status { return []Status{Decided, Deferred, Rejected, Escalated, InFlight, Closed} }

// UnmarshalText accepts exactly the six statuses.
func (s *Status) UnmarshalText(b []byte) error {
	for _, x := range Statuses() {
		if string(x) == string(b) {
			*s = x
			return nil
		}
	}
	return errStatus(string(b))
}

// Record is a DecisionRecord (decision-record.v1).
type Record struct {
	RecordID        string              `json:"record_id" jsonschema:"required"`
	DecisionKey     string              `json:"decision_key" jsonschema:"required"`
	DecisionVersion string              `json:"decision_version" jsonschema:"required"`
	Timestamp       string              `json:"timestamp" jsonschema:"required"`
	Status          Status              `json:"status" jsonschema:"required"`
	Actor           Actor               `json:"actor" jsonschema:"required"`
	AgentIdentity   AgentIdentity       `json:"agent_identity" jsonschema:"required"`
	IntentRef       string              `json:"intent_ref" jsonschema:"required"`
	SubjectIDs      []string            `json:"subject_ids"`
	InputsRefs      InputsRefs          `json:"inputs_refs" jsonschema:"required"`
	Outcome         string              `json:"outcome,omitempty"`
	Outputs         map[string]any      `json:"outputs"`
	EvidenceRefs    []string            `json:"evidence_refs" jsonschema:"required"`
	PolicyDecisions []PolicyDecisionRef `json:"policy_decisions" jsonschema:"required"`
	Approvals       []Approval          `json:"approvals" jsonschema:"required"`
	ControlsActive  Controls            `json:"controls_active" jsonschema:"required"`
	Confidence      float64             `json:"confidence"`
	Rationale       Rationale           `json:"rationale"`
	BudgetUsage     BudgetUsage         `json:"budget_usage" jsonschema:"required"`
	Lineage         Lineage             `json:"lineage" jsonschema:"required"`
	TraceID         string              `json:"trace_id" jsonschema:"required"`
	RunID           string              `json:"run_id" jsonschema:"required"`
	TenantID        string              `json:"tenant_id" jsonschema:"required"`
	// Awaiting says what a DEFERRED record waits for.
	Awaiting *Awaiting `json:"awaiting,omitempty"`
	// Closes names the DEFERRED or IN_FLIGHT record a CLOSED record closes.
	Closes string `json:"closes,omitempty"`
	// Problems are the validation problems of a record that does not
	// validate against its decision spec and the run's facts: a record
	// asked to be DECIDED with problems is stored ESCALATED and names them
	// here.
	Problems       []Problem `json:"problems,omitempty"`
	PrevRecordHash string    `json:"prev_record_hash,omitempty"`
	RecordHash     string    `json:"record_hash,omitempty"`
}

// Actor is who decided.
type Actor struct {
	Type string `json:"type" jsonschema:"required"` // AGENT, HUMAN, SYSTEM
	ID   string `json:"id" jsonschema:"required"`
}

// AgentIdentity is the deciding agent's identity: its subject, the hash of
// its identity claim (never the claim's secrets), its principal chain, and
// how the runtime treated the claim.
type AgentIdentity struct {
	Subject        string                 `json:"subject" jsonschema:"required"`
	ClaimHash      string                 `json:"claim_hash,omitempty"`
	PrincipalChain []runcontext.Principal `json:"principal_chain" jsonschema:"required"`
	// ClaimVerification states what the runtime did with the identity
	// claim: verified (a claim was present and verified at the run's start
	// and at every resume), or waived (the run's packs allow delegated or
	// destructive work, it carried no claim, and the host opted out of
	// requiring one). Absent when the run carried no claim and needed none.
	ClaimVerification ClaimVerification `json:"claim_verification,omitempty"`
}

// ClaimVerification is what a runtime did with a run's identity claim.
type ClaimVerification string

// Claim verification states (agent_identity.claim_verification).
const (
	// ClaimVerified: the claim was present and verified.
	ClaimVerified ClaimVerification = "verified"
	// ClaimWaived: a claim was required, none was present, and the host
	// opted out of requiring it.
	ClaimWaived ClaimVerification = "waived"
)

// ClaimVerifications returns the claim verification states.
func ClaimVerifications() []ClaimVerification {
	return []ClaimVerification{ClaimVerified, ClaimWaived}
}

// InputsRefs name the request and session.
type InputsRefs struct {
	Request string `json:"request" jsonschema:"required"`
	Session string `json:"session,omitempty"`
}

// PolicyDecisionRef is one policy decision and the rules it covers.
type PolicyDecisionRef struct {
	PolicyDecisionID string   `json:"policy_decision_id" jsonschema:"required"`
	RuleIDs          []string `json:"rule_ids" jsonschema:"required"`
}

// Approval is one approval the decision relied on.
type Approval struct {
	GateID                string                  `json:"gate_id" jsonschema:"required"`
	Approver              string                  `json:"approver" jsonschema:"required"`
	ApproverRole          string                  `json:"approver_role,omitempty"`
	ApprovalModeEffective runcontext.ApprovalMode `json:"approval_mode_effective" jsonschema:"required"`
	EvidenceSnapshotHash  string                  `json:"evidence_snapshot_hash" jsonschema:"required"`
	DecidedAt             string                  `json:"decided_at" jsonschema:"required"`
	ToolCallID            string                  `json:"tool_call_id,omitempty"`
	// ApprovalID is the approval used (each is used once).
	ApprovalID string `json:"approval_id,omitempty"`
}

// Controls are the runtime controls active for the decision.
type Controls struct {
	MustRefuse           []string `json:"must_refuse" jsonschema:"required"`
	MustEscalate         []string `json:"must_escalate" jsonschema:"required"`
	ApprovalGatesActive  []string `json:"approval_gates_active" jsonschema:"required"`
	RedactionRulesActive []string `json:"redaction_rules_active" jsonschema:"required"`
}

// Rationale explains the decision.
type Rationale struct {
	Strategy               string   `json:"strategy"`
	Summary                string   `json:"summary,omitempty"`
	AlternativesConsidered []string `json:"alternatives_considered"`
}

// BudgetUsage is what the run used.
type BudgetUsage struct {
	Tokens       int     `json:"tokens"`
	ToolCalls    int     `json:"tool_calls"`
	CostUSDCents float64 `json:"cost_usd_cents"`
	WallClockMS  int64   `json:"wall_clock_ms"`
}

// Lineage pins what the decision was made from.
type Lineage struct {
	PackVersion             string `json:"pack_version" jsonschema:"required"`
	PackContentHash         string `json:"pack_content_hash,omitempty"`
	SnapshotVersion         string `json:"snapshot_version,omitempty"`
	CompiledContextHash     string `json:"compiled_context_hash" jsonschema:"required"`
	ToolTranscriptChainHash string `json:"tool_transcript_chain_hash,omitempty"`
	ReplayPacketID          string `json:"replay_packet_id,omitempty"`
}

// Awaiting is what a DEFERRED record waits for.
type Awaiting struct {
	Kind                 string `json:"kind"` // approval or external
	GateID               string `json:"gate_id,omitempty"`
	ApproverRole         string `json:"required_approver_role,omitempty"`
	ToolCallID           string `json:"tool_call_id,omitempty"`
	ActionDigest         string `json:"action_digest,omitempty"`
	EvidenceSnapshotHash string `json:"evidence_snapshot_hash,omitempty"`
	TTLSeconds           int    `json:"ttl_seconds,omitempty"`
	Description          string `json:"description,omitempty"`
}

// GenesisHash is the prev_record_hash of a store's first record.
const GenesisHash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// Hash returns the record's hash: the digest of the record without
// record_hash.
func Hash(r *Record) (string, error) {
	c := *r
	c.RecordHash = ""
	return canon.Digest(&c)
}

// NewRecordID derives a record id from the run, decision and status, so a
// replay of the same run produces the same id.
func NewRecordID(runID, decisionKey string, status Status, seq int) (string, error) {
	return canon.ID(canon.PrefixDecision, runID, decisionKey, string(status), seq)
}
