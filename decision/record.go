// Package decision owns the DecisionRecord, the typed, replayable audit
// receipt of a governed run: its statuses, building a record from a run's
// facts, validation against the pack's DecisionSpec, record_hash, and the
// append-only, hash-chained Store with in-memory and file implementations.
//
// A record's Status is where the decision stands (DECIDED, DEFERRED,
// REJECTED, ESCALATED, IN_FLIGHT, CLOSED); its Outcome is what was decided,
// one of the decision spec's allowed_outcomes.
//
// # Validation
//
// [Validate] checks a record against its decision spec and the run's
// [Facts] in stages (the record's fields, the spec's version and outcome,
// the evidence and approvals a DECIDED outcome needs, what the record
// cites, the runtime controls, status consistency) and returns a
// *[ValidationError] listing every [Problem] (code, path, message). It is
// the same type runcontext, pack and schemas return: errors.As with any of
// them finds it, errors.Is(err, [ErrInvalid]) holds, and Has(code) looks a
// problem up by one of the Code constants.
//
// # Hashing and chaining
//
// record_hash is "sha256:" over the RFC 8785 form of the record without
// record_hash and without replay.record_hash (its copy: see below). A Store
// sets prev_record_hash to the previous record's record_hash (the first
// record's is GenesisHash) when it appends, so any changed byte in any
// stored record breaks Verify at that record.
//
// # The replay handle
//
// A record's replay member (seed 001, DecisionRecord.replay) carries the
// handle and hashes a replay starts from: the compiled context hash and
// the tool transcript chain hash the run ended with, the id of the replay
// packet captured with the record (also lineage.replay_packet_id), and
// record_hash. Everything in it is fixed before the record is appended, and
// so inside record_hash, except replay.record_hash, which the store sets
// to the record_hash it computes (the one member that cannot hash itself).
//
// The packet id is in the hash because it is known before the record is
// stored: a packet's id is derived from the run id, the record id and the
// packet's source kind, and whether a run is captured
// is decided from the record's status and the run id before the record is
// appended. A packet captured after the record is stored (an operator
// correction, a promotion to a golden case) never changes the stored
// record — records are append-only and hash-chained — so the record names
// only the packet captured with it; the later packet names the record
// (source_ref, expected.decision_record_hash = record_hash).
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

// statuses returns the six statuses.
func statuses() []Status { return []Status{Decided, Deferred, Rejected, Escalated, InFlight, Closed} }

// UnmarshalText accepts exactly the six statuses.
func (s *Status) UnmarshalText(b []byte) error {
	for _, x := range statuses() {
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
	// Replay is the record's replay handle and hashes (seed 001). Records
	// stored before it existed have none.
	Replay  *Replay `json:"replay,omitempty"`
	TraceID string  `json:"trace_id" jsonschema:"required"`
	// RunID and TenantID are always written by the runtime; the published
	// schema does not require them, as seed 000's record has neither.
	RunID    string `json:"run_id"`
	TenantID string `json:"tenant_id"`
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

// claimVerifications returns the claim verification states.
func claimVerifications() []ClaimVerification {
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
	// Decision is what the approver decided: absent for an approval the
	// action went ahead with, ApprovalDenied for a refusal (which the
	// record keeps so that every decision is in it, with its approver).
	// A denied entry never counts as the gate's approval.
	Decision ApprovalDecision `json:"decision,omitempty"`
	// Reason is the approver's reason for a denial, redacted.
	Reason string `json:"reason,omitempty"`
}

// ApprovalDecision is what an approver decided on a gate.
type ApprovalDecision string

// ApprovalDenied is an approval entry of a refusal.
const ApprovalDenied ApprovalDecision = "denied"

// Denied reports whether a is a refusal, not an approval.
func (a Approval) Denied() bool { return a.Decision == ApprovalDenied }

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

// Lineage pins what the decision was made from. The runtime always writes
// compiled_context_hash; the published schema does not require it, as
// seed 000's record has none.
type Lineage struct {
	PackVersion             string `json:"pack_version" jsonschema:"required"`
	PackContentHash         string `json:"pack_content_hash,omitempty"`
	SnapshotVersion         string `json:"snapshot_version,omitempty"`
	CompiledContextHash     string `json:"compiled_context_hash,omitempty"`
	ToolTranscriptChainHash string `json:"tool_transcript_chain_hash,omitempty"`
	// ReplayPacketID names the replay packet captured with the record
	// (as replay.replay_packet_id does); empty when none was.
	ReplayPacketID string `json:"replay_packet_id,omitempty"`
	// DataClassification is the highest data_classification of the run's
	// packs (its compiled context's ledger), which constrains export,
	// trace and tool behaviour.
	DataClassification string `json:"data_classification,omitempty"`
}

// Replay is a record's replay handle and hashes (seed 001,
// DecisionRecord.replay): what a replay of the decision starts from and
// must end at. It is not a substitute for the trace or the tool transcript.
// See the package doc for which members record_hash covers.
type Replay struct {
	// ReplayPacketID is the id of the replay packet captured with the
	// record (rp_…), when one was; lineage.replay_packet_id is the same.
	ReplayPacketID string `json:"replay_packet_id,omitempty"`
	// CompiledContextHash is the run's compiled_context_hash.
	CompiledContextHash string `json:"compiled_context_hash" jsonschema:"required"`
	// ToolTranscriptChainHash is the hash the run's tool transcript chain
	// ended at when the record was built.
	ToolTranscriptChainHash string `json:"tool_transcript_chain_hash,omitempty"`
	// RecordHash is the record's record_hash, set by the store that
	// appends it; record_hash does not cover it.
	RecordHash string `json:"record_hash,omitempty"`
	// LedgerHash is the ledger_hash of the run's compiled context ledger
	// (overlays, environment, classification, withheld tools), inside
	// record_hash: a packet captured with the record must carry the ledger
	// it names, so the environment a decision was made in cannot be
	// dropped from its replay.
	LedgerHash string `json:"ledger_hash,omitempty"`
}

// SetReplayPacketID names the replay packet captured with r, in
// replay.replay_packet_id and lineage.replay_packet_id. Call it before r is
// appended: the id is inside record_hash. An empty id names none. The
// record's replay member is replaced, not changed in place, so a shallow
// copy of r keeps its own.
func (r *Record) SetReplayPacketID(id string) {
	r.Lineage.ReplayPacketID = id
	rp := Replay{CompiledContextHash: r.Lineage.CompiledContextHash, ToolTranscriptChainHash: r.Lineage.ToolTranscriptChainHash}
	if r.Replay != nil {
		rp = *r.Replay
	}
	rp.ReplayPacketID = id
	r.Replay = &rp
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
// record_hash and replay.record_hash.
func Hash(r *Record) (string, error) {
	c := *r
	c.RecordHash = ""
	if c.Replay != nil {
		rp := *c.Replay
		rp.RecordHash = ""
		c.Replay = &rp
	}
	return canon.Digest(&c)
}

// hashOwned is Hash of a record the caller owns and no one else reads
// meanwhile: it blanks and restores the hashes in place rather than
// hashing a copy.
func hashOwned(r *Record) (string, error) {
	rh := r.RecordHash
	r.RecordHash = ""
	var rp string
	if r.Replay != nil {
		rp, r.Replay.RecordHash = r.Replay.RecordHash, ""
	}
	h, err := canon.Digest(r)
	r.RecordHash = rh
	if r.Replay != nil {
		r.Replay.RecordHash = rp
	}
	return h, err
}
