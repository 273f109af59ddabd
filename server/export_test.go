package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/contextos/contextos"
)

// SweepNow runs one sweep.
func (h *Handler) SweepNow(ctx context.Context) { h.sweep(ctx) }

// OrphanDecision records an approval of p by approver, decided at at, as
// a replica that stopped before it continued the run would have left it.
func (h *Handler) OrphanDecision(ctx context.Context, p contextos.PendingApproval, approver string, at time.Time) error {
	key := pendingKey(p)
	sum := sha256.Sum256([]byte(key))
	d := &decisionEntry{RunID: p.RunID, TenantID: p.TenantID, GateID: p.GateID, ToolCallID: p.ToolCallID, ActionDigest: p.ActionDigest, RecordID: p.RecordID,
		Decision: DecisionApprove, Approver: approver, ApproverRole: p.ApproverRole, DecidedAt: at.UTC(), ApprovalID: "apr_" + hex.EncodeToString(sum[:16])}
	_, _, err := h.ledger.put(ctx, key, d)
	return err
}
