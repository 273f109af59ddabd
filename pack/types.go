package pack

import (
	"encoding/json"

	"github.com/contextos/contextos/runcontext"
)

// ApprovalMode is runcontext's ordered risk taxonomy.
type ApprovalMode = runcontext.ApprovalMode

// DataClassification constrains export, trace and tool behaviour.
type DataClassification string

// Data classifications, least to most restricted.
const (
	Public       DataClassification = "PUBLIC"
	Internal     DataClassification = "INTERNAL"
	Confidential DataClassification = "CONFIDENTIAL"
	Restricted   DataClassification = "RESTRICTED"
)

// DataClassifications returns the four classifications in order.
func DataClassifications() []DataClassification {
	return []DataClassification{Public, Internal, Confidential, Restricted}
}

// UnmarshalText accepts exactly the four classifications.
func (d *DataClassification) UnmarshalText(b []byte) error {
	return setEnum(d, "data_classification", DataClassifications(), b)
}

// WriteClass is a kind of memory write-back proposal.
type WriteClass string

// Memory write classes.
const (
	WriteEvidenceLink    WriteClass = "evidence_link"
	WritePreference      WriteClass = "preference"
	WriteDecisionOutcome WriteClass = "decision_outcome"
	WriteCorrection      WriteClass = "correction"
)

// WriteClasses returns the four write classes.
func WriteClasses() []WriteClass {
	return []WriteClass{WriteEvidenceLink, WritePreference, WriteDecisionOutcome, WriteCorrection}
}

// UnmarshalText accepts exactly the four write classes.
func (w *WriteClass) UnmarshalText(b []byte) error {
	return setEnum(w, "write class", WriteClasses(), b)
}

// Pack is a Context Pack document (context-pack.v2): ten required layers.
// Decoding with Decode is strict; every object is closed except the ones
// documented as open.
type Pack struct {
	ContractMeta     ContractMeta     `json:"contract_meta" jsonschema:"required"`
	PackMeta         PackMeta         `json:"pack_meta" jsonschema:"required"`
	IntelligenceRefs IntelligenceRefs `json:"intelligence_refs" jsonschema:"required"`
	BusinessContext  BusinessContext  `json:"business_context" jsonschema:"required"`
	PolicyLayer      PolicyLayer      `json:"policy_layer" jsonschema:"required"`
	ToolingLayer     ToolingLayer     `json:"tooling_layer" jsonschema:"required"`
	DecisionLayer    DecisionLayer    `json:"decision_layer" jsonschema:"required"`
	MemoryLayer      MemoryLayer      `json:"memory_layer" jsonschema:"required"`
	EvaluationLayer  EvaluationLayer  `json:"evaluation_layer" jsonschema:"required"`
	ToneAndComms     ToneAndComms     `json:"tone_and_comms" jsonschema:"required"`
}

// ContractMeta is the artifact's identity, issuer and compatibility.
type ContractMeta struct {
	ContractName    string        `json:"contract_name" jsonschema:"required"`
	ContractVersion string        `json:"contract_version" jsonschema:"required"`
	Issuer          string        `json:"issuer" jsonschema:"required"`
	CreatedAt       string        `json:"created_at" jsonschema:"required"`
	Compatibility   Compatibility `json:"compatibility" jsonschema:"required"`
	Description     string        `json:"description,omitempty"`
}

// Compatibility lists what the pack requires of the host: a semantic
// version constraint per component ("runtime", "ontology", …).
type Compatibility struct {
	Requires map[string]string `json:"requires" jsonschema:"required"`
}

// PackMeta is the deployable pack identity and its environment defaults.
// Metadata is an open map for owner notes and documentation.
type PackMeta struct {
	PackID              string              `json:"pack_id" jsonschema:"required"`
	PackVersion         string              `json:"pack_version" jsonschema:"required"`
	Tenant              Tenant              `json:"tenant" jsonschema:"required"`
	EnvironmentDefaults EnvironmentDefaults `json:"environment_defaults" jsonschema:"required"`
	TTLSeconds          int                 `json:"ttl_seconds" jsonschema:"required"`
	DataClassification  DataClassification  `json:"data_classification" jsonschema:"required"`
	Description         string              `json:"description,omitempty"`
	Metadata            map[string]any      `json:"metadata,omitempty"`
}

// Tenant owns the pack. A pack runs only for its own tenant unless Shared.
type Tenant struct {
	TenantID string `json:"tenant_id" jsonschema:"required"`
	Name     string `json:"name,omitempty"`
	Shared   bool   `json:"shared,omitempty"`
}

// EnvironmentDefaults are locale, currency, timezone and region defaults.
type EnvironmentDefaults struct {
	Language string `json:"language,omitempty"`
	Locale   string `json:"locale,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	Currency string `json:"currency,omitempty"`
	Region   string `json:"region,omitempty"`
}

// IntelligenceRefs pins the meaning layer: ontology, graph snapshot rule,
// identity namespaces and embedding keys.
type IntelligenceRefs struct {
	Ontology       Ontology       `json:"ontology" jsonschema:"required"`
	KnowledgeGraph KnowledgeGraph `json:"knowledge_graph,omitzero"`
	IdentityLayer  IdentityLayer  `json:"identity_layer,omitzero"`
	EmbeddingKeys  []string       `json:"embedding_keys,omitempty"`
}

// Ontology names the ontology namespace and version the pack means.
type Ontology struct {
	Namespace         string   `json:"namespace" jsonschema:"required"`
	Version           string   `json:"version" jsonschema:"required"`
	EntityTypes       []string `json:"entity_types,omitempty"`
	RelationshipTypes []string `json:"relationship_types,omitempty"`
}

// KnowledgeGraph says how graph snapshots are pinned ("alias:prod",
// "snapshot:<id>").
type KnowledgeGraph struct {
	SnapshotPinRule string `json:"snapshot_pin_rule,omitempty"`
}

// IdentityLayer lists the CEID namespaces subjects may come from.
type IdentityLayer struct {
	CEIDNamespaces []string `json:"ceid_namespaces,omitempty"`
}

// BusinessContext holds durable business constraints.
type BusinessContext struct {
	Summary        BusinessSummary `json:"summary" jsonschema:"required"`
	NonNegotiables []string        `json:"non_negotiables,omitempty"`
}

// BusinessSummary describes the business in a few words.
type BusinessSummary struct {
	WhatWeDo        string   `json:"what_we_do,omitempty"`
	WhoWeServe      []string `json:"who_we_serve,omitempty"`
	Differentiators []string `json:"differentiators,omitempty"`
}

// PolicyLayer holds policy bundles, guardrails and approval gates.
type PolicyLayer struct {
	PolicyBundles []PolicyBundle `json:"policy_bundles" jsonschema:"required"`
	Guardrails    Guardrails     `json:"guardrails,omitzero"`
	ApprovalGates []ApprovalGate `json:"approval_gates,omitempty"`
}

// PolicyBundle is a prioritized set of JsonLogic rules. Lower priority
// numbers are evaluated first.
type PolicyBundle struct {
	BundleID  string    `json:"bundle_id" jsonschema:"required"`
	Priority  int       `json:"priority" jsonschema:"required"`
	PolicyDSL PolicyDSL `json:"policy_dsl" jsonschema:"required"`
}

// PolicyDSL is a rule list in a policy language ("jsonlogic").
type PolicyDSL struct {
	Language string `json:"language" jsonschema:"required"`
	Rules    []Rule `json:"rules" jsonschema:"required"`
}

// Rule is one policy rule. If is a JsonLogic expression over the policy
// data document; Then applies when it is truthy, Else otherwise.
// AppliesTo restricts the rule to runs whose data document matches every
// entry (a value or a list of values).
type Rule struct {
	RuleID          string          `json:"rule_id" jsonschema:"required"`
	AppliesTo       map[string]any  `json:"applies_to,omitempty"`
	If              json.RawMessage `json:"if" jsonschema:"required"`
	Then            *Effect         `json:"then,omitempty"`
	Else            *Effect         `json:"else,omitempty"`
	DecisionBinding string          `json:"decision_binding,omitempty"`
	Rationale       string          `json:"rationale,omitempty"`
}

// Effect is what a rule branch decides.
type Effect struct {
	Allow                *bool        `json:"allow,omitempty"`
	Reason               string       `json:"reason,omitempty"`
	Requires             []string     `json:"requires,omitempty"`
	ApprovalMode         ApprovalMode `json:"approval_mode,omitempty"`
	RequiresApprovalGate string       `json:"requires_approval_gate,omitempty"`
	// Raise names guardrail labels this outcome raises.
	Raise []string `json:"raise,omitempty"`
}

// Guardrails are labels that, when raised, force a refusal or an
// escalation, and the redaction rules applied to tool output.
type Guardrails struct {
	MustRefuse     []string `json:"must_refuse,omitempty"`
	MustEscalate   []string `json:"must_escalate,omitempty"`
	RedactionRules []string `json:"redaction_rules,omitempty"`
}

// ApprovalGate freezes evidence and routes an approval when When holds.
type ApprovalGate struct {
	GateID               string          `json:"gate_id" jsonschema:"required"`
	When                 json.RawMessage `json:"when" jsonschema:"required"`
	RequiredApproverRole string          `json:"required_approver_role" jsonschema:"required"`
	TTLSeconds           int             `json:"ttl_seconds" jsonschema:"required"`
	// AllowSelfApproval lets the run's requesting user approve the action
	// (when they hold the approver role). Default: the approver must be
	// someone else.
	AllowSelfApproval bool `json:"allow_self_approval,omitempty"`
}

// ToolingLayer declares adapters and the permissions that expose them.
type ToolingLayer struct {
	AdapterRegistry []Adapter    `json:"adapter_registry" jsonschema:"required"`
	Permissions     []Permission `json:"permissions" jsonschema:"required"`
}

// Adapter is a tool adapter: its capabilities and the highest approval
// mode it can produce. EndpointRef is a registry reference, never a URL
// with credentials.
type Adapter struct {
	AdapterID    string       `json:"adapter_id" jsonschema:"required"`
	Type         string       `json:"type" jsonschema:"required"`
	EndpointRef  string       `json:"endpoint_ref" jsonschema:"required"`
	Capabilities []string     `json:"capabilities" jsonschema:"required"`
	ApprovalMode ApprovalMode `json:"approval_mode" jsonschema:"required"`
	Description  string       `json:"description,omitempty"`
}

// Permission exposes one capability of one adapter to this workflow.
// ArgConstraints maps an argument name to an open constraint object
// ({"min":1,"max":50000}, {"required":true}, …).
type Permission struct {
	PermissionID string `json:"permission_id" jsonschema:"required"`
	AdapterID    string `json:"adapter_id" jsonschema:"required"`
	Capability   string `json:"capability" jsonschema:"required"`
	Allow        bool   `json:"allow" jsonschema:"required"`
	// ApprovalMode, when set, is the capability's own approval mode: at
	// most its adapter's (see Mode).
	ApprovalMode         ApprovalMode              `json:"approval_mode,omitempty"`
	RequiresApprovalGate string                    `json:"requires_approval_gate,omitempty"`
	ArgConstraints       map[string]map[string]any `json:"arg_constraints,omitempty"`
}

// CapabilityID returns "adapter_id.capability".
func (p Permission) CapabilityID() string { return p.AdapterID + "." + p.Capability }

// Mode returns the approval mode of the capability p exposes on adapter
// a: the permission's approval_mode when it declares one, else the
// adapter's, the highest mode the adapter can produce. A permission may
// declare a lower mode for its own capability (a read-only lookup on an
// adapter that can also write), never a higher one (Validate refuses it).
// The compiler surfaces the capability, and the gateway governs its calls,
// at this mode.
func (p Permission) Mode(a Adapter) ApprovalMode {
	if p.ApprovalMode != "" {
		return p.ApprovalMode
	}
	return a.ApprovalMode
}

// DecisionLayer lists the typed decisions the pack can emit.
type DecisionLayer struct {
	DecisionSpecs []DecisionSpec `json:"decision_specs" jsonschema:"required"`
}

// DecisionSpec is one typed decision. AllowedOutcomes is closed.
// RefusalOutcomes and EscalationOutcomes name the outcomes that refuse or
// escalate; when absent, "denied", "rejected" and "refused" refuse and
// "escalated" escalates.
type DecisionSpec struct {
	DecisionKey        string       `json:"decision_key" jsonschema:"required"`
	Version            string       `json:"version" jsonschema:"required"`
	OwnerRole          string       `json:"owner_role,omitempty"`
	RequiredEvidence   []string     `json:"required_evidence,omitempty"`
	AllowedOutcomes    []string     `json:"allowed_outcomes" jsonschema:"required"`
	RefusalOutcomes    []string     `json:"refusal_outcomes,omitempty"`
	EscalationOutcomes []string     `json:"escalation_outcomes,omitempty"`
	ApprovalMode       ApprovalMode `json:"approval_mode" jsonschema:"required"`
	DecisionRight      string       `json:"decision_right,omitempty"`
	InputsSchemaRef    string       `json:"inputs_schema_ref,omitempty"`
	OutputsSchemaRef   string       `json:"outputs_schema_ref,omitempty"`
}

// MemoryLayer declares recall and write-back rules.
type MemoryLayer struct {
	MemoryPolicy        MemoryPolicy        `json:"memory_policy" jsonschema:"required"`
	PromotionThresholds PromotionThresholds `json:"promotion_thresholds,omitzero"`
}

// MemoryPolicy sets tier TTLs, the write classes allowed and consent gates.
type MemoryPolicy struct {
	TierTTLs            map[string]string `json:"tier_ttls,omitempty"`
	WriteClassesAllowed []WriteClass      `json:"write_classes_allowed,omitempty"`
	ConsentGating       ConsentGating     `json:"consent_gating,omitzero"`
}

// ConsentGating holds explicit consent gates.
type ConsentGating struct {
	PIIWriteBackAllowed bool `json:"pii_write_back_allowed"`
}

// PromotionThresholds controls memory promotion.
type PromotionThresholds struct {
	AutoPromoteConfidence float64 `json:"auto_promote_confidence,omitempty"`
}

// EvaluationLayer holds score targets and release gates.
type EvaluationLayer struct {
	EvalTargets  []EvalTarget  `json:"eval_targets" jsonschema:"required"`
	ReleaseGates []ReleaseGate `json:"release_gates" jsonschema:"required"`
}

// EvalTarget is the score target of one intent. Policy, utility and safety
// are scores in [0,1] (higher is stricter); latency and economics are
// ceilings (lower is stricter).
type EvalTarget struct {
	Intent                    string   `json:"intent" jsonschema:"required"`
	Policy                    *float64 `json:"policy,omitempty"`
	Utility                   *float64 `json:"utility,omitempty"`
	LatencyP99MS              *float64 `json:"latency_p99_ms,omitempty"`
	Safety                    *float64 `json:"safety,omitempty"`
	EconomicsCentsPerDecision *float64 `json:"economics_cents_per_decision,omitempty"`
}

// ReleaseGate bounds how far a metric may regress between versions.
type ReleaseGate struct {
	Metric   string  `json:"metric" jsonschema:"required"`
	MaxDelta float64 `json:"max_delta"`
}

// ToneAndComms holds communication constraints.
type ToneAndComms struct {
	VoiceAttributes []string `json:"voice_attributes,omitempty"`
	Do              []string `json:"do,omitempty"`
	Dont            []string `json:"dont,omitempty"`
}
