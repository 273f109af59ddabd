package gateway

import (
	"fmt"
	"strings"

	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/runcontext"
)

// Envelope versions.
const (
	CallEnvelopeVersion   = "contextos.tool_call.v1"
	ResultEnvelopeVersion = "contextos.tool_result.v1"
)

// ToolCallEnvelope is one governed capability invocation (tool-envelope.v1).
// It holds its wire members only: what the gateway keeps about a call
// besides (its cached encodings, the call's policy decisions) lives in the
// gateway. An envelope in a transcript entry is the one the gateway
// recorded, and it shares the run's principal chain and auth ref with the
// run's other recorded envelopes: treat it as read only. An adapter gets
// its own deep copy (Call.Envelope).
type ToolCallEnvelope struct {
	EnvelopeVersion       string                  `json:"envelope_version" jsonschema:"required"`
	ToolCallID            string                  `json:"tool_call_id" jsonschema:"required"`
	RunID                 string                  `json:"run_id" jsonschema:"required"`
	TraceID               string                  `json:"trace_id" jsonschema:"required"`
	SessionID             string                  `json:"session_id,omitempty"`
	CapabilityID          string                  `json:"capability_id" jsonschema:"required"`
	Args                  map[string]any          `json:"args" jsonschema:"required"`
	PrincipalChain        []runcontext.Principal  `json:"principal_chain" jsonschema:"required"`
	ApprovalModeRequested runcontext.ApprovalMode `json:"approval_mode_requested" jsonschema:"required"`
	ApprovalModeEffective runcontext.ApprovalMode `json:"approval_mode_effective" jsonschema:"required"`
	ApprovalModeHighest   runcontext.ApprovalMode `json:"approval_mode_highest" jsonschema:"required"`
	PolicyDecisionID      *string                 `json:"policy_decision_id"`
	EvidenceRefs          []string                `json:"evidence_refs" jsonschema:"required"`
	IdempotencyKey        *string                 `json:"idempotency_key"`
	AuthRef               *string                 `json:"auth_ref"`
	// Metadata is an open object. On the envelopes the gateway builds it
	// holds arg_schema_ref (Capability.ArgSchemaRef, the schema's $id when
	// it is a short URI with nothing sensitive in it, else its digest; at
	// most 256 bytes), protocol and version (Registration,
	// ProtocolReporter; at most 64 bytes each) for a
	// registered adapter, and requires_approval_gate when the permission
	// names a gate (see the Meta… constants).
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Status is a tool result status.
type Status string

// The seven result statuses (seed 000).
const (
	StatusOK        Status = "ok"        // read-only or synchronous, no side effects
	StatusCompleted Status = "completed" // governed write finished; side effects in mutations
	StatusPaused    Status = "paused"    // approval, external dependency or continuation pending
	StatusBlocked   Status = "blocked"   // policy or consent blocked it before the adapter ran
	StatusRejected  Status = "rejected"  // malformed, unauthorized or unsurfaced
	StatusFailed    Status = "failed"    // adapter, transport or runtime execution failed
	StatusError     Status = "error"     // normalized error the caller may inspect
)

// Statuses returns the seven statuses.
func Statuses() []Status {
	return []Status{StatusOK, StatusCompleted, StatusPaused, StatusBlocked, StatusRejected, StatusFailed, StatusError}
}

// UnmarshalText accepts exactly the seven statuses.
func (s *Status) UnmarshalText(b []byte) error {
	for _, x := range Statuses() {
		if string(x) == string(b) {
			*s = x
			return nil
		}
	}
	return fmt.Errorf("status %q is not one of ok, completed, paused, blocked, rejected, failed, error", clip(string(b), maxQuoted))
}

// Succeeded reports ok or completed.
func (s Status) Succeeded() bool { return s == StatusOK || s == StatusCompleted }

// Citation cites the evidence a result provides.
type Citation struct {
	EvidenceRef string `json:"evidence_ref"`
}

// ToolResultEnvelope is the gateway's result of one call (tool-envelope.v1).
type ToolResultEnvelope struct {
	EnvelopeVersion  string         `json:"envelope_version" jsonschema:"required"`
	ToolCallID       string         `json:"tool_call_id" jsonschema:"required"`
	RunID            string         `json:"run_id" jsonschema:"required"`
	TraceID          string         `json:"trace_id" jsonschema:"required"`
	SessionID        string         `json:"session_id,omitempty"`
	CapabilityID     string         `json:"capability_id" jsonschema:"required"`
	Status           Status         `json:"status" jsonschema:"required"`
	Output           map[string]any `json:"output"`
	Error            *ToolError     `json:"error"`
	Artifacts        []string       `json:"artifacts"`
	Citations        []Citation     `json:"citations"`
	Mutations        []string       `json:"mutations"`
	RiskTags         []string       `json:"risk_tags"`
	PolicyDecisionID *string        `json:"policy_decision_id"`
	LatencyMS        int64          `json:"latency_ms"`
	Metadata         ResultMetadata `json:"metadata"`
	// Approval is set on a paused result: what the pause awaits.
	Approval *ApprovalRequest `json:"approval_request,omitempty"`
}

// ResultMetadata is the result envelope's metadata.
type ResultMetadata struct {
	Approver                     string  `json:"approver,omitempty"`
	ApprovalID                   string  `json:"approval_id,omitempty"` // the approval the call used (each is used once)
	ApprovalGateID               string  `json:"approval_gate_id,omitempty"`
	ApprovedAt                   string  `json:"approved_at,omitempty"`
	ApprovalEvidenceSnapshotHash string  `json:"approval_evidence_snapshot_hash,omitempty"`
	ToolTranscriptID             string  `json:"tool_transcript_id,omitempty"`
	RedactionApplied             bool    `json:"redaction_applied"`
	Retries                      int     `json:"retries"`
	Attempts                     int     `json:"attempts"`
	CostCents                    float64 `json:"cost_cents"`
	// Tokens counts the model tokens the call's attempts reported spending
	// (Outcome.Tokens), charged to the run's token budget.
	Tokens         int      `json:"tokens,omitempty"`
	IdempotencyKey string   `json:"idempotency_key,omitempty"`
	Duplicate      bool     `json:"duplicate,omitempty"`
	Signals        []string `json:"signals,omitempty"`
	EvidenceHashes []string `json:"evidence_hashes,omitempty"`
	ToolStatus     string   `json:"tool_status,omitempty"`
	ToolCode       string   `json:"tool_code,omitempty"`
	ToolReason     string   `json:"tool_reason,omitempty"`
	Retryable      *bool    `json:"retryable,omitempty"`
}

// DecodeCallEnvelope strictly decodes and checks a call envelope received
// from outside (a remote executor, a transcript). Problems name their JSON
// path.
func DecodeCallEnvelope(data []byte) (*ToolCallEnvelope, error) {
	var e ToolCallEnvelope
	probs, _ := wire.Decode(data, &e)
	if len(probs) == 0 {
		if err := e.check(); err != nil {
			return nil, err
		}
		return &e, nil
	}
	return nil, invalidEnvelope(probs[0].Path, probs[0].Message)
}

// DecodeResultEnvelope strictly decodes a result envelope.
func DecodeResultEnvelope(data []byte) (*ToolResultEnvelope, error) {
	var r ToolResultEnvelope
	if probs, _ := wire.Decode(data, &r); len(probs) > 0 {
		return nil, invalidEnvelope(probs[0].Path, probs[0].Message)
	}
	if r.EnvelopeVersion != ResultEnvelopeVersion {
		return nil, invalidEnvelope("envelope_version", fmt.Sprintf("unsupported envelope version %q", clip(r.EnvelopeVersion, maxQuoted)))
	}
	if r.Status == "" {
		return nil, invalidEnvelope("status", "is required")
	}
	return &r, nil
}

func invalidEnvelope(path, msg string) error {
	if path == "" {
		path = "(envelope)"
	}
	return &ToolError{Code: CodeInvalidInput, Reason: ReasonFor(CodeInvalidInput), Message: path + ": " + msg, Details: map[string]any{"path": path}}
}

// check reports the first structural problem of a call envelope.
func (e *ToolCallEnvelope) check() error {
	switch {
	case e.EnvelopeVersion != CallEnvelopeVersion:
		return invalidEnvelope("envelope_version", fmt.Sprintf("unsupported envelope version %q (want %s)", clip(e.EnvelopeVersion, maxQuoted), CallEnvelopeVersion))
	case e.ToolCallID == "":
		return invalidEnvelope("tool_call_id", "is required")
	case e.RunID == "":
		return invalidEnvelope("run_id", "is required")
	case e.CapabilityID == "":
		return invalidEnvelope("capability_id", "is required")
	case e.Args == nil:
		return invalidEnvelope("args", "must be an object")
	}
	if _, _, ok := splitCapability(e.CapabilityID); !ok {
		return invalidEnvelope("capability_id", "must be adapter_id.capability")
	}
	for _, m := range []struct {
		path string
		mode runcontext.ApprovalMode
	}{{"approval_mode_requested", e.ApprovalModeRequested}, {"approval_mode_effective", e.ApprovalModeEffective}, {"approval_mode_highest", e.ApprovalModeHighest}} {
		if !m.mode.Valid() {
			return invalidEnvelope(m.path, "must be an approval mode")
		}
	}
	return nil
}

func splitCapability(id string) (adapter, capability string, ok bool) {
	for i := len(id) - 1; i > 0; i-- {
		if id[i] == '.' {
			return id[:i], id[i+1:], i+1 < len(id)
		}
	}
	return "", "", false
}

// clip bounds s, for a message: invalid UTF-8 dropped, a longer s cut to
// n bytes on a rune boundary and marked with "…" (problem.ClipN).
func clip(s string, n int) string { return problem.ClipN(strings.ToValidUTF8(s, ""), n) }

// maxQuoted bounds what a message quotes of a caller's value, in bytes.
const maxQuoted = 64

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
