package compiler

import (
	"encoding/json"

	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// CompiledContext is the compiler's output (compiled-context.v1).
type CompiledContext struct {
	CompiledPrompt  CompiledPrompt  `json:"compiled_prompt" jsonschema:"required"`
	Manifests       Manifests       `json:"manifests" jsonschema:"required"`
	RuntimeControls RuntimeControls `json:"runtime_controls" jsonschema:"required"`
	BudgetReport    BudgetReport    `json:"budget_report" jsonschema:"required"`
	ContextLedger   ContextLedger   `json:"context_ledger" jsonschema:"required"`
}

// Hash returns the compiled_context_hash.
func (c *CompiledContext) Hash() string { return c.ContextLedger.CompiledContextHash }

// CompiledPrompt is what the planner model sees.
type CompiledPrompt struct {
	System        string         `json:"system" jsonschema:"required"`
	Developer     string         `json:"developer" jsonschema:"required"`
	Task          string         `json:"task" jsonschema:"required"`
	ContextBlocks []ContextBlock `json:"context_blocks" jsonschema:"required"`
}

// ContextBlock is one block of context, in one bucket.
type ContextBlock struct {
	BlockID        string            `json:"block_id" jsonschema:"required"`
	Bucket         runcontext.Bucket `json:"bucket" jsonschema:"required"`
	Content        string            `json:"content" jsonschema:"required"`
	Priority       int               `json:"priority" jsonschema:"required"`
	ProvenanceRefs []string          `json:"provenance_refs,omitempty"`
	Truncated      bool              `json:"truncated,omitempty"`
}

// Manifests bound what the planner and executor may use.
type Manifests struct {
	PolicyManifest   []PolicyManifestEntry   `json:"policy_manifest" jsonschema:"required"`
	ToolManifest     []ToolManifestEntry     `json:"tool_manifest" jsonschema:"required"`
	EvidenceManifest []EvidenceManifestEntry `json:"evidence_manifest" jsonschema:"required"`
}

// PolicyManifestEntry lists the rules of a bundle that applied.
type PolicyManifestEntry struct {
	BundleID string   `json:"bundle_id" jsonschema:"required"`
	RuleIDs  []string `json:"rule_ids" jsonschema:"required"`
}

// ToolManifestEntry lists one adapter's surfaced capabilities.
type ToolManifestEntry struct {
	AdapterID          string                        `json:"adapter_id" jsonschema:"required"`
	Capabilities       []string                      `json:"capabilities" jsonschema:"required"`
	Constraints        map[string]any                `json:"constraints,omitempty"`
	CapabilityMetadata map[string]CapabilityMetadata `json:"capability_metadata,omitempty"`
}

// CapabilityMetadata describes a surfaced capability's risk. It is an open
// object on the wire.
type CapabilityMetadata struct {
	Kind         string                    `json:"kind"`       // read or write
	RiskLevel    string                    `json:"risk_level"` // read_only, write_reversible, network, write_delegated, write_irreversible
	ApprovalMode runcontext.ApprovalMode   `json:"approval_mode"`
	Source       string                    `json:"source"` // adapter_registry
	PermissionID string                    `json:"permission_id"`
	Constraints  map[string]map[string]any `json:"constraints,omitempty"`
	ApprovalGate string                    `json:"approval_gate,omitempty"`
	// GateActive reports whether ApprovalGate is active for this run.
	GateActive bool `json:"approval_gate_active,omitempty"`
	// GatePerCall, for an ApprovalGate inactive at compile time that reads
	// the tool call (policy.Gate.PerCall), says when it applies to a call:
	// its when (compact JSON) and the rules over tool.* that name it. A
	// call it applies to pauses for its approval.
	GatePerCall string `json:"approval_gate_per_call,omitempty"`
	// Extra holds additional members.
	Extra map[string]json.RawMessage `json:"-" wire:"extra"`
}

type capabilityMetadataWire CapabilityMetadata

// MarshalJSON writes the metadata and its additional members.
func (m CapabilityMetadata) MarshalJSON() ([]byte, error) {
	return wire.MarshalOpen(capabilityMetadataWire(m), m.Extra)
}

// UnmarshalJSON reads the metadata and keeps additional members.
func (m *CapabilityMetadata) UnmarshalJSON(b []byte) error {
	var w capabilityMetadataWire
	extra, err := wire.UnmarshalOpen(b, &w)
	if err != nil {
		return err
	}
	w.Extra = extra
	*m = CapabilityMetadata(w)
	return nil
}

// EvidenceManifestEntry is one admitted evidence item.
type EvidenceManifestEntry struct {
	EvidenceRef string `json:"evidence_ref" jsonschema:"required"`
	SourceID    string `json:"source_id,omitempty"`
	Hash        string `json:"hash,omitempty"`
}

// RuntimeControls are the controls the runtime enforces for the run: the
// pack's armed guardrails, the active approval gates and the redactions.
type RuntimeControls struct {
	MustRefuse           []string `json:"must_refuse" jsonschema:"required"`
	MustEscalate         []string `json:"must_escalate" jsonschema:"required"`
	ApprovalGatesActive  []string `json:"approval_gates_active" jsonschema:"required"`
	RedactionRulesActive []string `json:"redaction_rules_active" jsonschema:"required"`
}

// BudgetReport exposes allocation, use and truncation per bucket.
type BudgetReport struct {
	TokensAllocated     map[runcontext.Bucket]int      `json:"tokens_allocated" jsonschema:"required"`
	TokensUsedAtCompile int                            `json:"tokens_used_at_compile" jsonschema:"required"`
	TokensUsedByBucket  map[runcontext.Bucket]int      `json:"tokens_used_by_bucket" jsonschema:"required"`
	BucketTruncations   map[runcontext.Bucket]bool     `json:"bucket_truncations" jsonschema:"required"`
	DroppedBlockIDs     map[runcontext.Bucket][]string `json:"dropped_block_ids,omitempty"`
	Warnings            []string                       `json:"warnings,omitempty"`
}

// ContextLedger is the compile's audit record: lineage of every input and
// every omission, and the compiled_context_hash.
type ContextLedger struct {
	PackRef          string            `json:"pack_ref" jsonschema:"required"`
	Packs            []LedgerPack      `json:"packs" jsonschema:"required"`
	RequestID        string            `json:"request_id" jsonschema:"required"`
	RunID            string            `json:"run_id" jsonschema:"required"`
	TraceID          string            `json:"trace_id" jsonschema:"required"`
	TenantID         string            `json:"tenant_id" jsonschema:"required"`
	Intent           string            `json:"intent" jsonschema:"required"`
	SafetyMode       string            `json:"safety_mode" jsonschema:"required"`
	Ontology         string            `json:"ontology" jsonschema:"required"`
	PolicyBundles    []string          `json:"policy_bundles" jsonschema:"required"`
	PolicyResults    []policy.Decision `json:"policy_results" jsonschema:"required"`
	PolicyVerdict    policy.Verdict    `json:"policy_verdict" jsonschema:"required"`
	GuardrailsRaised policy.Raised     `json:"guardrails_raised" jsonschema:"required"`
	ApprovalGates    []policy.Gate     `json:"approval_gates" jsonschema:"required"`
	Tools            []string          `json:"tools" jsonschema:"required"`
	ToolsWithheld    []WithheldTool    `json:"tools_withheld,omitempty"`
	EvidenceRefs     []string          `json:"evidence_refs" jsonschema:"required"`
	MemoryRefs       []string          `json:"memory_refs" jsonschema:"required"`
	Omissions        []Omission        `json:"omissions,omitempty"`
	Budget           LedgerBudget      `json:"budget" jsonschema:"required"`
	Inputs           LedgerInputs      `json:"inputs" jsonschema:"required"`
	// Environment is the locale, currency and timezone the compile used,
	// and which of them came from the pack's environment_defaults.
	Environment *LedgerEnvironment `json:"environment,omitempty"`
	// DataClassification is the highest data_classification of the input
	// packs (PUBLIC < INTERNAL < CONFIDENTIAL < RESTRICTED): it constrains
	// export, trace and tool behaviour, and the runtime stamps it on the
	// run's span and records.
	DataClassification pack.DataClassification `json:"data_classification,omitempty"`
	// CompiledContextHash is sha256 over the RFC 8785 form of the compiled
	// prompt, manifests, runtime controls and budget report (seed 001):
	// what the compile produced, free of run-specific members, so two runs
	// of the same packs, request input and run-context settings share it.
	CompiledContextHash string `json:"compiled_context_hash,omitempty" jsonschema:"required"`
	// LedgerHash is sha256 over the RFC 8785 form of this ledger with this
	// field left out: the run-specific lineage (request, run and trace
	// ids, input digests, policy decision ids) and compiled_context_hash.
	LedgerHash string `json:"ledger_hash,omitempty"`
}

// LedgerEnvironment is the environment a compile used (see Compile).
type LedgerEnvironment struct {
	Locale   string `json:"locale,omitempty"`
	Currency string `json:"currency,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// Defaulted names the settings ("locale", "currency", "timezone")
	// taken from the pack's environment_defaults because the request left
	// them empty.
	Defaulted []string `json:"defaulted,omitempty"`
}

// LedgerPack is one input pack: its ref, content hash and the overlay
// applied to it, if any.
type LedgerPack struct {
	Ref         string               `json:"ref"`
	ContentHash string               `json:"content_hash"`
	Overlay     *pack.AppliedOverlay `json:"overlay,omitempty"`
}

// WithheldTool is a capability the pack declares but the run does not get,
// and why.
type WithheldTool struct {
	Capability string `json:"capability"`
	Reason     string `json:"reason"`
}

// Omission is something left out of the compiled context, and why.
type Omission struct {
	Kind            string   `json:"kind"` // evidence, memory or block
	Ref             string   `json:"ref"`
	Reason          string   `json:"reason"`
	EstimatedTokens int      `json:"estimated_tokens,omitempty"`
	Priority        int      `json:"priority,omitempty"`
	SourceRefs      []string `json:"source_refs,omitempty"`
}

// LedgerInputs are the digests of the per-request inputs, so that any
// change of input moves the compiled_context_hash and replay can check it
// compiles the same envelope. Evidence and memory digests cover everything
// the sources returned, admitted or not ("" when there is no source).
type LedgerInputs struct {
	RequestHash    string `json:"request_hash"`
	RunContextHash string `json:"run_context_hash"`
	EvidenceHash   string `json:"evidence_hash,omitempty"`
	MemoryHash     string `json:"memory_hash,omitempty"`
}

// LedgerBudget summarizes the budget in the ledger.
type LedgerBudget struct {
	TokensUsedAtCompile int      `json:"tokens_used_at_compile"`
	TruncatedBuckets    []string `json:"truncated_buckets"`
}

// EvidenceItem is one piece of evidence a host EvidenceSource returns.
type EvidenceItem struct {
	EvidenceRef string `json:"evidence_ref" jsonschema:"required"`
	Kind        string `json:"kind,omitempty"`
	Content     string `json:"content" jsonschema:"required"`
	SourceID    string `json:"source_id,omitempty"`
	Hash        string `json:"hash,omitempty"`
	Trust       string `json:"trust" jsonschema:"required"` // trusted or untrusted
	Snapshot    string `json:"snapshot,omitempty"`
	ExpiresAt   string `json:"expires_at,omitempty"` // RFC 3339
}

// Trust values.
const (
	Trusted   = "trusted"
	Untrusted = "untrusted"
)

// MemoryItem is one memory a host MemoryRecall returns.
type MemoryItem struct {
	MemoryRef  string  `json:"memory_ref" jsonschema:"required"`
	Content    string  `json:"content" jsonschema:"required"`
	Tier       string  `json:"tier,omitempty"`
	State      string  `json:"state" jsonschema:"required"` // promoted, candidate or capture
	Confidence float64 `json:"confidence,omitempty"`
}

// Memory states.
const (
	MemoryPromoted  = "promoted"
	MemoryCandidate = "candidate"
	MemoryCapture   = "capture"
)
