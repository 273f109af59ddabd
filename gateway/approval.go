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
	// AllowSelfApproval is the gate's rule: the run's requesting user may
	// approve (when they hold ApproverRole). False: someone else must.
	AllowSelfApproval bool `json:"allow_self_approval,omitempty"`
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
	// Reason is the approver's reason, if any. A denial's reason is kept
	// in the run's decision record, redacted.
	Reason string `json:"reason,omitempty"`
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

// ActionApprovalLog is an ApprovalLog that binds each use of an approval
// to the action it was used for. ConsumeAction records approvalID as
// used for action; it succeeds when the approval is unused, or was used
// for this same action before (the same use, presented again: a takeover
// going on with a call the runtime that died had approved), and returns
// ErrApprovalUsed when it was used for another action or by Consume. The
// gateway passes a write's idempotency key as the action, so the approved
// effect still runs at most once; a read-only call's approval is consumed
// with Consume. The in-memory log and the durable stores' logs are
// ActionApprovalLogs.
type ActionApprovalLog interface {
	ApprovalLog
	ConsumeAction(ctx context.Context, approvalID, action string) error
}

// consumeApproval uses approvalID for action: bound to it when log binds
// uses to actions and there is one (a write's idempotency key), else once.
func consumeApproval(ctx context.Context, log ApprovalLog, approvalID, action string) error {
	if al, ok := log.(ActionApprovalLog); ok && action != "" {
		return al.ConsumeAction(ctx, approvalID, action)
	}
	return log.Consume(ctx, approvalID)
}

// MemoryApprovalLog is the in-memory ApprovalLog.
type MemoryApprovalLog struct {
	mu   sync.Mutex
	used map[string]string // approval id → the action it was used for ("" for Consume)
}

var _ ActionApprovalLog = (*MemoryApprovalLog)(nil)

// NewMemoryApprovalLog returns an empty log.
func NewMemoryApprovalLog() *MemoryApprovalLog { return &MemoryApprovalLog{used: map[string]string{}} }

// Consume implements ApprovalLog.
func (m *MemoryApprovalLog) Consume(ctx context.Context, approvalID string) error {
	return m.ConsumeAction(ctx, approvalID, "")
}

// ConsumeAction implements ActionApprovalLog.
func (m *MemoryApprovalLog) ConsumeAction(ctx context.Context, approvalID, action string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if was, ok := m.used[approvalID]; ok {
		if action != "" && was == action {
			return nil
		}
		return ErrApprovalUsed
	}
	m.used[approvalID] = action
	return nil
}
