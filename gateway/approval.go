package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/contextos/contextos/internal/canon"
)

// ApprovalRequest is what a paused call awaits: an approval of this exact
// action by someone holding ApproverRole, within TTLSeconds.
type ApprovalRequest struct {
	GateID       string `json:"gate_id"`
	ApproverRole string `json:"required_approver_role"`
	TTLSeconds   int    `json:"ttl_seconds"`
	// ActionDigest is the digest of capability, canonical args, compiled
	// context hash and gate: the approval binds to it.
	ActionDigest string `json:"action_digest"`
	// EvidenceSnapshotHash freezes the evidence the approver saw.
	EvidenceSnapshotHash string    `json:"evidence_snapshot_hash"`
	ToolCallID           string    `json:"tool_call_id"`
	IdempotencyKey       string    `json:"idempotency_key,omitempty"`
	RequestedAt          time.Time `json:"requested_at"`
}

// Approval answers an ApprovalRequest.
type Approval struct {
	// ApprovalID identifies the approval; it can be used once.
	ApprovalID   string    `json:"approval_id"`
	GateID       string    `json:"gate_id"`
	ActionDigest string    `json:"action_digest"`
	Approver     string    `json:"approver"`
	ApproverRole string    `json:"approver_role"`
	DecidedAt    time.Time `json:"decided_at"`
	// Denied records a refusal by the approver.
	Denied bool `json:"denied,omitempty"`
}

// action is what an approval binds to: a capability with its arguments,
// under one compiled context, behind one gate.
type action struct {
	capabilityID        string
	args                map[string]any
	compiledContextHash string
	gateID              string
}

// actionDigest returns the digest an approval binds to
// (ApprovalRequest.ActionDigest, Approval.ActionDigest).
func actionDigest(a action) (string, error) {
	return canon.Digest(map[string]any{"capability_id": a.capabilityID, "args": a.args, "compiled_context_hash": a.compiledContextHash, "gate_id": a.gateID})
}

// ApprovalLog records which approvals were used, so each is used once.
// Consume returns ErrApprovalUsed for an approval already consumed. It must
// be safe for concurrent use (exactly one of concurrent Consumes of one id
// succeeds) and honour ctx.
type ApprovalLog interface {
	Consume(ctx context.Context, approvalID string) error
}

// MemoryApprovalLog is the in-memory ApprovalLog.
type MemoryApprovalLog struct {
	mu   sync.Mutex
	used map[string]bool
}

var _ ApprovalLog = (*MemoryApprovalLog)(nil)

// NewMemoryApprovalLog returns an empty log.
func NewMemoryApprovalLog() *MemoryApprovalLog { return &MemoryApprovalLog{used: map[string]bool{}} }

// Consume implements ApprovalLog.
func (m *MemoryApprovalLog) Consume(ctx context.Context, approvalID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.used[approvalID] {
		return ErrApprovalUsed
	}
	m.used[approvalID] = true
	return nil
}
