package contextos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// Planner proposes the next plan of a run: tool calls and at most one
// decision. It sees the compiled context, the step results so far and why
// it is asked again. It must honour ctx (its deadline is plan_timeout_ms)
// and report its usage, which is charged to the run budget.
type Planner interface {
	Plan(ctx context.Context, req *PlanRequest) (*Plan, error)
}

// PlannerFunc adapts a function to Planner.
type PlannerFunc func(ctx context.Context, req *PlanRequest) (*Plan, error)

// Plan implements Planner.
func (f PlannerFunc) Plan(ctx context.Context, req *PlanRequest) (*Plan, error) { return f(ctx, req) }

// PlanRequest is what a planner sees.
type PlanRequest struct {
	Compiled *compiler.CompiledContext
	Request  *runcontext.InvokeRequest
	Run      *runcontext.RunContext
	// Results are the results of every step executed so far, in order.
	Results []StepResult
	// Turn counts planner calls from 0.
	Turn int
	// ReplanReason says why the planner is asked again ("" on the first turn).
	ReplanReason string

	call int // the run's planner-call ordinal, for replay
}

// Plan is one planner turn.
type Plan struct {
	Steps    []Step            `json:"steps,omitempty"`
	Decision *DecisionProposal `json:"decision,omitempty"`
	// Memory proposes write-backs; consolidation filters them.
	Memory []MemoryProposal `json:"memory,omitempty"`
	Usage  Usage            `json:"usage,omitzero"`
}

// Step is one tool call of a plan.
type Step struct {
	CapabilityID   string                  `json:"capability_id"`
	Args           map[string]any          `json:"args"`
	EvidenceRefs   []string                `json:"evidence_refs,omitempty"`
	IdempotencyKey string                  `json:"idempotency_key,omitempty"`
	ApprovalMode   runcontext.ApprovalMode `json:"approval_mode,omitempty"`
	Attachments    []string                `json:"attachments,omitempty"`
}

// DecisionProposal is the decision a plan commits to.
type DecisionProposal struct {
	DecisionKey  string         `json:"decision_key"`
	Outcome      string         `json:"outcome"`
	Outputs      map[string]any `json:"outputs,omitempty"`
	Rationale    string         `json:"rationale,omitempty"`
	Confidence   float64        `json:"confidence,omitempty"`
	SubjectIDs   []string       `json:"subject_ids,omitempty"`
	EvidenceRefs []string       `json:"evidence_refs,omitempty"`
}

// Usage is a planner turn's model usage.
type Usage struct {
	Tokens    int     `json:"tokens,omitempty"`
	CostCents float64 `json:"cost_cents,omitempty"`
}

// StepResult is one executed step. Turn is the turn of the plan the step
// belongs to: the PlanRequest.Turn that plan was made at.
type StepResult struct {
	Turn   int                         `json:"turn"`
	Index  int                         `json:"index"`
	Step   Step                        `json:"step"`
	Result *gateway.ToolResultEnvelope `json:"result"`
}

// Verdict is a critic's judgement.
type Verdict string

// Verify verdicts, then score verdicts.
const (
	VerdictOK       Verdict = "ok"
	VerdictReplan   Verdict = "replan"
	VerdictReject   Verdict = "reject"
	VerdictAccept   Verdict = "accept"
	VerdictRetry    Verdict = "retry"
	VerdictEscalate Verdict = "escalate"
)

// severity orders verdicts so a host critic can only make one stricter.
func (v Verdict) severity() int {
	return map[Verdict]int{VerdictOK: 0, VerdictAccept: 0, VerdictRetry: 1, VerdictReplan: 2, VerdictEscalate: 3, VerdictReject: 4}[v]
}

// Judgement is a verdict and why.
type Judgement struct {
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason,omitempty"`
}

// CriticInput is what a critic judges.
type CriticInput struct {
	Compiled *compiler.CompiledContext
	Pack     *pack.Pack
	Run      *runcontext.RunContext
	Request  *runcontext.InvokeRequest
	Plan     *Plan
	// Results are all step results so far (Verify sees them before the
	// plan runs, Score after).
	Results []StepResult
	// Turn is the turn of the plan judged (the PlanRequest.Turn it was
	// made at; its steps' results carry the same Turn). Replans counts the
	// replans so far.
	Turn, Replans int
}

// Critic verifies a plan before it runs and scores its results after. A
// host critic runs after the built-in one and can only make a verdict
// stricter (a looser verdict is ignored).
type Critic interface {
	Verify(ctx context.Context, in *CriticInput) (Judgement, error)
	Score(ctx context.Context, in *CriticInput) (Judgement, error)
}

// MemoryProposal is a proposed memory write-back.
type MemoryProposal struct {
	// WriteClass must be one of the pack's write_classes_allowed.
	WriteClass   string   `json:"write_class"`
	SubjectIDs   []string `json:"subject_ids,omitempty"`
	Content      string   `json:"content"`
	EvidenceRefs []string `json:"evidence_refs,omitempty"`
	Confidence   float64  `json:"confidence"`
	PII          bool     `json:"pii,omitempty"`
	RunID        string   `json:"run_id,omitempty"`
}

// MemoryStore recalls promoted memories for compilation and receives
// write-back proposals (never direct durable writes). Both must honour ctx
// and be safe for concurrent use.
type MemoryStore interface {
	compiler.MemoryRecall
	Propose(ctx context.Context, proposals []MemoryProposal) error
}

// InMemoryMemory is the in-memory MemoryStore: it recalls the items it
// holds and keeps every proposal.
type InMemoryMemory struct {
	mu        sync.Mutex
	items     []compiler.MemoryItem
	proposals []MemoryProposal
}

var _ MemoryStore = (*InMemoryMemory)(nil)

// NewInMemoryMemory returns a store holding items.
func NewInMemoryMemory(items ...compiler.MemoryItem) *InMemoryMemory {
	return &InMemoryMemory{items: slices.Clone(items)}
}

// Recall implements compiler.MemoryRecall.
func (m *InMemoryMemory) Recall(ctx context.Context, _ compiler.MemoryQuery) ([]compiler.MemoryItem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.items), nil
}

// Propose implements MemoryStore.
func (m *InMemoryMemory) Propose(ctx context.Context, ps []MemoryProposal) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.proposals = append(m.proposals, ps...)
	return nil
}

// Proposals returns a copy of every proposal received.
func (m *InMemoryMemory) Proposals() []MemoryProposal {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.proposals)
}

// Checkpoint is a paused or long-running run's resumable state.
type Checkpoint struct {
	RunID string `json:"run_id"`
	// Rev is the checkpoint's revision: a store saves a checkpoint only
	// over the revision it was loaded at (optimistic concurrency), so two
	// runtimes cannot both continue one run.
	Rev int `json:"rev"`
	// Active marks a run a runtime is continuing (resumed and not yet
	// paused, stopped or ended): another Resume is refused.
	Active  bool                      `json:"active,omitempty"`
	Request *runcontext.InvokeRequest `json:"request"`
	Run     *runcontext.RunContext    `json:"run_context"`
	// Turn counts the planner turns made so far; the plan in progress was
	// made at turn Turn-1.
	Turn      int          `json:"turn"`
	Replans   int          `json:"replans"`
	Plan      *Plan        `json:"plan"`
	StepIndex int          `json:"step_index"`
	Results   []StepResult `json:"results"`
	Usage     Usage        `json:"usage"`
	// MeterUsage is the run-budget meter's reading (tokens, tool calls,
	// spend) so a resumed run keeps counting from where it paused.
	MeterUsage runcontext.Usage         `json:"meter_usage"`
	StartedAt  string                   `json:"started_at"`
	Pending    *gateway.ApprovalRequest `json:"pending,omitempty"`
	Deferred   string                   `json:"deferred_record_id,omitempty"`
	Plans      []*Plan                  `json:"plans"`
	Seq        int                      `json:"seq"`
	Terminal   bool                     `json:"terminal,omitempty"`
	// Chain is where the run's transcript chain stands.
	Chain gateway.ChainState `json:"chain"`
	// Replay inputs recorded so far: adapter outcomes, clock readings and
	// the approvals of each resume.
	Outcomes []replay.Outcome `json:"outcomes,omitempty"`
	Clock    []time.Time      `json:"clock,omitempty"`
	Resumes  []replay.Resume  `json:"resumes,omitempty"`
	// Stopped is why a hard stop ended the run; such a run resumes like a
	// paused one (with a new budget, say).
	Stopped string `json:"stopped,omitempty"`
	// Origin is the run context the run was invoked with, kept when a
	// resume replaced its budget (a replay starts from it).
	Origin *runcontext.RunContext `json:"origin_run_context,omitempty"`
	// PlannerCalls and Checks count planner calls and interruption checks;
	// PlannerErrors and Interrupts are the failed calls and the
	// cancellations seen, so a replay fails and stops where the run did.
	PlannerCalls  int                   `json:"planner_calls"`
	PlannerErrors []replay.PlannerError `json:"planner_errors,omitempty"`
	Checks        int                   `json:"checks"`
	Interrupts    []replay.Interrupt    `json:"interrupts,omitempty"`
}

// planTurn is the turn the plan in progress was made at.
func (cp *Checkpoint) planTurn() int { return max(cp.Turn-1, 0) }

func marshalCheckpoint(cp *Checkpoint) ([]byte, error) { return json.Marshal(cp) }

func unmarshalCheckpoint(b []byte) (*Checkpoint, error) {
	var cp Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("contextos: checkpoint is corrupt: %w", err)
	}
	return &cp, nil
}

// CheckpointStore persists checkpoints so a run can resume on any runtime
// sharing the store. Save replaces the run's checkpoint atomically when the
// stored revision equals cp.Rev (no checkpoint counts as revision 0) and
// then increments cp.Rev; otherwise it fails with ErrCheckpointConflict.
// Load returns ErrNoCheckpoint for an unknown run. Safe for concurrent use.
type CheckpointStore interface {
	Save(ctx context.Context, cp *Checkpoint) error
	Load(ctx context.Context, runID string) (*Checkpoint, error)
}

// ErrNoCheckpoint reports a run without a checkpoint.
var ErrNoCheckpoint = errors.New("contextos: no checkpoint for run")

// ErrCheckpointConflict reports a save over a revision another runtime
// has already moved past: the run is being continued elsewhere.
var ErrCheckpointConflict = errors.New("contextos: checkpoint was changed by another runtime")

// InMemoryCheckpoints is the in-memory CheckpointStore. It stores deep
// copies.
type InMemoryCheckpoints struct {
	mu   sync.Mutex
	cps  map[string][]byte
	revs map[string]int
}

var _ CheckpointStore = (*InMemoryCheckpoints)(nil)

// NewInMemoryCheckpoints returns an empty store.
func NewInMemoryCheckpoints() *InMemoryCheckpoints {
	return &InMemoryCheckpoints{cps: map[string][]byte{}, revs: map[string]int{}}
}

// Save implements CheckpointStore.
func (m *InMemoryCheckpoints) Save(ctx context.Context, cp *Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.revs[cp.RunID] != cp.Rev {
		return fmt.Errorf("%w: run %s is at revision %d, the save is over %d", ErrCheckpointConflict, cp.RunID, m.revs[cp.RunID], cp.Rev)
	}
	next := *cp
	next.Rev++
	b, err := marshalCheckpoint(&next)
	if err != nil {
		return err
	}
	m.cps[cp.RunID], m.revs[cp.RunID] = b, next.Rev
	cp.Rev = next.Rev
	return nil
}

// Load implements CheckpointStore.
func (m *InMemoryCheckpoints) Load(ctx context.Context, runID string) (*Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	b, ok := m.cps[runID]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrNoCheckpoint, runID)
	}
	return unmarshalCheckpoint(b)
}
