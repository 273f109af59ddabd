package temporalrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/contextos/contextos/gateway"
)

// Approval answers the approval a paused run awaits (UpdateApprove). The
// workflow stamps it with the workflow time it was accepted at
// (gateway.Approval.DecidedAt), so the gate's TTL is counted on one
// clock.
type Approval struct {
	// ApprovalID identifies the approval; it can be used once.
	ApprovalID string `json:"approval_id"`
	// GateID and ActionDigest name the gate and the action approved: the
	// pending request's.
	GateID       string `json:"gate_id"`
	ActionDigest string `json:"action_digest"`
	// Approver and ApproverRole are who decided, in which role: the
	// gate's required role.
	Approver     string `json:"approver"`
	ApproverRole string `json:"approver_role"`
	// TenantID is the tenant the approver acts for: the run's.
	TenantID string `json:"tenant_id"`
	// Denied records a refusal by the approver.
	Denied bool `json:"denied,omitempty"`
}

// ErrApprovalRefused reports an approval the update's validator refused:
// it never entered the workflow's history. *ApprovalError says why.
var ErrApprovalRefused = errors.New("temporalrun: approval refused")

// ApprovalError is an approval the validator refused, naming the field
// that does not answer the pending request.
type ApprovalError struct {
	Field  string
	Reason string
}

func (e *ApprovalError) Error() string {
	return fmt.Sprintf("temporalrun: approval refused: %s: %s", e.Field, e.Reason)
}

// Is matches ErrApprovalRefused.
func (e *ApprovalError) Is(target error) bool { return target == ErrApprovalRefused }

// validate is UpdateApprove's validator: it refuses an approval unless
// the run awaits one and the approval names its gate, its action digest,
// the gate's required role and the run's tenant, an approval id and an
// approver, within the gate's TTL on workflow time. It reads state only.
func (st *state) validate(ctx workflow.Context, a Approval) error {
	p := st.pending
	refuse := func(field, reason string) error { return &ApprovalError{Field: field, Reason: reason} }
	switch {
	case p == nil:
		return refuse("gate_id", "the run awaits no approval")
	case st.answer != nil:
		return refuse("approval_id", "the pending approval is already answered")
	case strings.TrimSpace(a.ApprovalID) == "":
		return refuse("approval_id", "empty")
	case strings.TrimSpace(a.Approver) == "":
		return refuse("approver", "empty")
	case a.GateID != p.GateID:
		return refuse("gate_id", fmt.Sprintf("the run awaits gate %s", p.GateID))
	case a.ActionDigest != p.ActionDigest:
		return refuse("action_digest", "the approval names another action")
	case a.ApproverRole != p.ApproverRole:
		return refuse("approver_role", fmt.Sprintf("gate %s needs a %s", p.GateID, p.ApproverRole))
	case a.TenantID != st.tenant:
		return refuse("tenant_id", "the approver acts for another tenant")
	case !workflow.Now(ctx).Before(p.RequestedAt.Add(time.Duration(p.TTLSeconds) * time.Second)):
		return refuse("decided_at", fmt.Sprintf("the gate's %ds TTL has passed", p.TTLSeconds))
	}
	return nil
}

// accept is UpdateApprove's handler: the validated approval becomes the
// pending request's answer, decided now.
func (st *state) accept(ctx workflow.Context, a Approval) error {
	if err := st.validate(ctx, a); err != nil {
		return err
	}
	st.answer = &gateway.Approval{ApprovalID: a.ApprovalID, GateID: a.GateID, ActionDigest: a.ActionDigest,
		Approver: a.Approver, ApproverRole: a.ApproverRole, DecidedAt: workflow.Now(ctx), Denied: a.Denied}
	return nil
}

// Pending returns the approval request the run of workflowID awaits, nil
// when it awaits none.
func Pending(ctx context.Context, c client.Client, workflowID string) (*gateway.ApprovalRequest, error) {
	v, err := c.QueryWorkflow(ctx, workflowID, "", QueryPending)
	if err != nil {
		return nil, err
	}
	var p *gateway.ApprovalRequest
	if err := v.Get(&p); err != nil {
		return nil, err
	}
	return p, nil
}

// Approve sends a to the run of workflowID and waits until the workflow
// accepted or refused it. A refusal by the validator is an error whose
// text is the *ApprovalError's (it crosses the server as text).
func Approve(ctx context.Context, c client.Client, workflowID string, a Approval) error {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: workflowID, UpdateName: UpdateApprove,
		Args: []any{a}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return err
	}
	return h.Get(ctx, nil)
}

// Start starts the run of req and rc as workflow opts.ID on opts.TaskQueue.
func Start(ctx context.Context, c client.Client, opts client.StartWorkflowOptions, in Input) (client.WorkflowRun, error) {
	return c.ExecuteWorkflow(ctx, opts, WorkflowName, in)
}
