package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/sortedkeys"
)

// CheckpointLister lists the runs to look at for pending approvals
// (Runtime.PendingApprovals): a checkpoint store that lists the run ids it
// holds a checkpoint for, sorted (honouring ctx like Save and Load), or a
// RunList of given ids.
type CheckpointLister interface {
	RunIDs(ctx context.Context) ([]string, error)
}

// ListingCheckpointStore is a CheckpointStore that also lists its runs:
// the in-memory store and the durable stores' checkpoints are one, so a
// host passes the store it configured to Runtime.PendingApprovals.
type ListingCheckpointStore interface {
	CheckpointStore
	CheckpointLister
}

var _ ListingCheckpointStore = (*InMemoryCheckpoints)(nil)

// PendingIndex is a checkpoint store that keeps an index of the runs
// awaiting an approval (and of those a runtime has just claimed to carry
// out one's decision): with each Save, atomically, it keeps the save's
// Checkpoint.Awaiting (or drops the run's entry when it is nil).
// Runtime.PendingApprovals reads the runs it lists, so listing costs in
// proportion to the pending approvals, not to the stored runs; a store
// that is not one is read run by run (CheckpointLister).
//
// PendingRunIDs returns, sorted, the id of every run whose last save
// carried an Awaiting of tenantID (of any tenant when tenantID is ""),
// and of every run whose checkpoint the store cannot tell about (one
// saved before the store kept the index): the runtime reads those to
// see. It honours ctx like Save and Load. RunCheckpointStoreTests in
// package contextostest checks an index.
type PendingIndex interface {
	PendingRunIDs(ctx context.Context, tenantID string) ([]string, error)
}

var _ PendingIndex = (*InMemoryCheckpoints)(nil)

// PendingRunIDs implements PendingIndex.
func (m *InMemoryCheckpoints) PendingRunIDs(ctx context.Context, tenantID string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("contextos: list pending runs: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if tenantID != "" {
		return slices.Sorted(maps.Keys(m.awaiting[tenantID])), nil
	}
	var ids []string
	for _, runs := range m.awaiting {
		for id := range runs {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// RunList is a CheckpointLister of the given run ids: PendingApprovals
// looks at those runs only (an unknown one is skipped), so one run that
// cannot be described does not stop another's resume, and the store need
// not list its runs.
type RunList []string

// RunIDs implements CheckpointLister: the ids, as given.
func (l RunList) RunIDs(context.Context) ([]string, error) { return slices.Clone(l), nil }

// RunIDs implements CheckpointLister: every run with a checkpoint, sorted.
func (m *InMemoryCheckpoints) RunIDs(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("contextos: list checkpoints: %w", err)
	}
	m.mu.Lock()
	ids := slices.Sorted(maps.Keys(m.cps))
	m.mu.Unlock()
	return ids, nil
}

// PendingApproval is a paused run's pending approval, as an operator sees
// it: what is awaited, by whom, for which call, with the call's arguments
// redacted.
type PendingApproval struct {
	// RunID and TenantID name the run.
	RunID    string `json:"run_id"`
	TenantID string `json:"tenant_id"`
	// GateID is the approval gate the run paused at; ApproverRole the
	// role an approver must hold.
	GateID       string `json:"gate_id"`
	ApproverRole string `json:"approver_role"`
	// CapabilityID is the paused call's capability ("adp_payments.issue_refund").
	CapabilityID string `json:"capability_id"`
	// ToolCallID is the paused call's id.
	ToolCallID string `json:"tool_call_id"`
	// Args are the paused call's arguments as the planner gave them,
	// redacted (see Runtime.PendingApprovals).
	Args map[string]any `json:"args"`
	// ActionDigest is what an approval must bind to
	// (gateway.Approval.ActionDigest).
	ActionDigest string `json:"action_digest"`
	// TTLSeconds is how long an approval stays valid once decided.
	TTLSeconds int `json:"ttl_seconds"`
	// RequestedAt is when the run paused.
	RequestedAt time.Time `json:"requested_at"`
	// RecordID is the run's DEFERRED record, which says what is awaited.
	RecordID string `json:"deferred_record_id,omitempty"`
	// AllowSelfApproval is the gate's self-approval rule: true when the
	// run's requesting user may approve; false when someone else must.
	AllowSelfApproval bool `json:"allow_self_approval,omitempty"`
}

// PendingApprovals lists every run whose checkpoint awaits an approval
// (paused at a gate, not being continued and not ended), oldest request
// first, then by run id. A resumed or finished run is not listed.
//
// The arguments are redacted by every built-in redaction rule and by the
// run's active rules (its DEFERRED record's controls_active, which may
// name the host's Options.Gateway.Redactors); when that record is not
// stored, by every rule the runtime knows. An approvals listing thus never
// shows a card number or a secret, even of a pack that does not redact
// them. A run whose record names a rule this runtime does not know is an
// error wrapping ErrConfig, as its resume would be.
//
// It looks at the runs runs lists: the runtime's checkpoint store when
// that is passed (a ListingCheckpointStore) — the runs its index lists
// when it is a PendingIndex, so the cost is in proportion to the pending
// approvals, and every run it holds otherwise — or given ids (RunList).
// The checkpoints are loaded from the runtime's store.
func (rt *Runtime) PendingApprovals(ctx context.Context, runs CheckpointLister) ([]PendingApproval, error) {
	return rt.pendingApprovals(ctx, runs, "")
}

// PendingApprovalsOf is PendingApprovals of one tenant's runs: a
// PendingIndex lists that tenant's only, and a run of another tenant is
// never listed. An empty tenantID is an error wrapping ErrConfig.
func (rt *Runtime) PendingApprovalsOf(ctx context.Context, runs CheckpointLister, tenantID string) ([]PendingApproval, error) {
	if tenantID == "" {
		return nil, fmt.Errorf("%w: PendingApprovalsOf needs a tenant id", ErrConfig)
	}
	return rt.pendingApprovals(ctx, runs, tenantID)
}

// pendingApprovals lists the pending approvals of the runs runs lists, of
// tenantID ("": of every tenant).
func (rt *Runtime) pendingApprovals(ctx context.Context, runs CheckpointLister, tenantID string) ([]PendingApproval, error) {
	if runs == nil {
		return nil, fmt.Errorf("%w: PendingApprovals needs the runs to look at (the checkpoint store, or a RunList)", ErrConfig)
	}
	var ids []string
	var err error
	if idx, ok := runs.(PendingIndex); ok {
		ids, err = idx.PendingRunIDs(ctx, tenantID)
	} else {
		ids, err = runs.RunIDs(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("contextos: list runs: %w", err)
	}
	known := gateway.BuiltinRedactors()
	maps.Copy(known, rt.opts.Gateway.Redactors)
	out := []PendingApproval{}
	for _, id := range ids {
		cp, err := rt.loadCheckpoint(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue // removed since it was listed
		}
		if err != nil {
			return nil, err
		}
		if a := cp.awaiting(); a == nil || (tenantID != "" && a.TenantID != tenantID) {
			continue
		}
		p, err := rt.pendingApproval(ctx, cp, known)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b PendingApproval) int {
		if c := a.RequestedAt.Compare(b.RequestedAt); c != 0 {
			return c
		}
		return strings.Compare(a.RunID, b.RunID)
	})
	return out, nil
}

// pendingApproval describes a paused run's pending approval, its call's
// arguments redacted by the rules redactionFor picks from known.
func (rt *Runtime) pendingApproval(ctx context.Context, cp *checkpointState, known map[string]gateway.Redactor) (PendingApproval, error) {
	a := cp.Pending
	p := PendingApproval{RunID: cp.RunID, GateID: a.GateID, ApproverRole: a.ApproverRole, ToolCallID: a.ToolCallID,
		ActionDigest: a.ActionDigest, TTLSeconds: a.TTLSeconds, RequestedAt: a.RequestedAt, RecordID: cp.Deferred, Args: map[string]any{},
		AllowSelfApproval: a.AllowSelfApproval}
	if cp.Run != nil {
		p.TenantID = cp.Run.TenantID
	}
	if cp.Plan != nil && cp.StepIndex >= 0 && cp.StepIndex < len(cp.Plan.Steps) {
		step := cp.Plan.Steps[cp.StepIndex]
		p.CapabilityID = step.CapabilityID
		rules, err := rt.redactionFor(ctx, cp, known)
		if err != nil {
			return PendingApproval{}, err
		}
		if args, _ := gateway.RedactValue(step.Args, rules); args != nil {
			p.Args, _ = args.(map[string]any)
		}
	}
	return p, nil
}

// redactionFor returns the rules a paused run's arguments are redacted
// by: every built-in rule and the run's active ones, or every known rule
// when its DEFERRED record is not stored. Rules are in name order.
func (rt *Runtime) redactionFor(ctx context.Context, cp *checkpointState, known map[string]gateway.Redactor) ([]gateway.Redactor, error) {
	names := map[string]bool{}
	for name := range gateway.BuiltinRedactors() {
		names[name] = true
	}
	var rec *decision.Record
	var err error
	if cp.Deferred != "" {
		rec, err = rt.opts.Decisions.Get(ctx, cp.Deferred)
		if err != nil && !errors.Is(err, decision.ErrNotFound) {
			return nil, fmt.Errorf("contextos: run %s: read its deferred record: %w", cp.RunID, err)
		}
	}
	if rec == nil {
		// No record says which rules the run had (a crash between the
		// checkpoint and the record): every rule the runtime knows.
		for name := range known {
			names[name] = true
		}
	} else {
		for _, name := range rec.ControlsActive.RedactionRulesActive {
			if _, ok := known[name]; !ok {
				return nil, fmt.Errorf("%w: run %s: redaction rule %q is active but not known (known: %s)", ErrConfig, cp.RunID, name, strings.Join(sortedkeys.Of(known), ", "))
			}
			names[name] = true
		}
	}
	rules := make([]gateway.Redactor, 0, len(names))
	for _, name := range sortedkeys.Of(names) {
		rules = append(rules, known[name])
	}
	return rules, nil
}
