package engine

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"sync"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// Planner proposes the next plan of a run: tool calls and at most one
// decision. It sees the compiled context, the step results so far and why
// it is asked again. It must honour ctx (its deadline is plan_timeout_ms)
// and report its usage, which is charged to the run budget: a plan's in
// Plan.Usage, a turn that fails after the model answered in a
// *PlanUsageError, and a turn whose usage the provider did not report as
// an error matching ErrUsageUnknown (the run stops rather than charge
// nothing). An answer after ctx ends is not used; its usage is charged
// when it comes within LateTurnGrace.
type Planner interface {
	Plan(ctx context.Context, req *PlanRequest) (*Plan, error)
}

// PlannerFunc adapts a function to Planner.
type PlannerFunc func(ctx context.Context, req *PlanRequest) (*Plan, error)

// Plan implements Planner.
func (f PlannerFunc) Plan(ctx context.Context, req *PlanRequest) (*Plan, error) { return f(ctx, req) }

// PlanRequest is what a planner sees. Its compiled context, request, run
// context and results are copies, made once per run and shared by the
// run's planner turns and host critic: what a planner does to them
// changes nothing the run enforces or records.
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
	// schemas are the registered capabilities' argument schemas by
	// capability id (Tools), shared with the runtime: read only.
	schemas map[string]json.RawMessage
	// decisions are the pack's decision specs as a planner sees them
	// (Decisions), shared with the runtime: read only.
	decisions []DecisionOption
	// deltas carries Emit's deltas to the run, nil when the run is not
	// streamed (deltaSink).
	deltas *deltaSink
}

// Plan is one planner turn.
type Plan struct {
	Steps    []Step            `json:"steps,omitempty"`
	Decision *DecisionProposal `json:"decision,omitempty"`
	// Memory proposes write-backs; consolidation filters them.
	Memory []MemoryProposal `json:"memory,omitempty"`
	Usage  PlanUsage        `json:"usage,omitzero"`
	// Replan is a planner's own reason to be asked again, for a turn that
	// has nothing to run: a model answered in text, was cut off at its
	// length limit, or sent arguments that are not JSON. A plan with a
	// Replan carries no steps and no decision (else it is invalid); the
	// critic sends it back with "planner_replan: " and the reason, which
	// counts against max_replan_attempts and is the next turn's
	// PlanRequest.ReplanReason. The runtime keeps at most MaxReplanBytes
	// of it, as valid UTF-8.
	Replan string `json:"replan,omitempty"`
}

// MaxReplanBytes bounds the Plan.Replan reason the runtime keeps.
const MaxReplanBytes = 1024

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

// PlanUsage is a planner turn's model usage, which the runtime charges to
// the run budget. It is not runcontext.Usage, the run-budget meter's
// reading of the whole run.
//
// Tokens is what the turn charges to the run's token budget. A planner
// that reports only the breakdown (InputTokens, OutputTokens) is charged
// their sum: the runtime charges the larger of Tokens and
// InputTokens+OutputTokens. CachedInputTokens is the part of InputTokens
// a provider served from its prompt cache (it is not charged twice, and
// cannot exceed InputTokens). CostCents is charged to the cost budget.
// Every count is from 0 to 2^53−1 and the cost a number of cents from 0
// to 2^53−1 (a larger number has no exact form in a record), or the turn
// is a planner failure (invalid_usage).
type PlanUsage struct {
	Tokens            int     `json:"tokens,omitempty"`
	CostCents         float64 `json:"cost_cents,omitempty"`
	InputTokens       int     `json:"input_tokens,omitempty"`
	OutputTokens      int     `json:"output_tokens,omitempty"`
	CachedInputTokens int     `json:"cached_input_tokens,omitempty"`
}

// charged is the number of tokens a turn charges (see PlanUsage).
func (u PlanUsage) charged() int {
	// Saturating (the counts are ≥ 0 here): a hostile count cannot wrap
	// to a small charge, and the charge stays a count a record (and a
	// replay packet's planner error) holds exactly.
	sum := u.InputTokens + min(u.OutputTokens, math.MaxInt-u.InputTokens)
	return min(max(u.Tokens, sum), canon.MaxSafeInteger)
}

// StepResult is one executed step. Turn is the turn of the plan the step
// belongs to: the PlanRequest.Turn that plan was made at. PolicyDecisions
// are the decisions of the call's own policy evaluation (the rules that
// applied to this call, gateway.Run.CallDecisions); they
// are empty when the call was bound to the run's evaluation. The rules
// among them join the run's applied rules (decision.Facts.AppliedRules),
// and the record's policy_decisions name them.
type StepResult struct {
	Turn            int                         `json:"turn"`
	Index           int                         `json:"index"`
	Step            Step                        `json:"step"`
	Result          *gateway.ToolResultEnvelope `json:"result"`
	PolicyDecisions []policy.Decision           `json:"policy_decisions,omitempty"`
}

// CriticVerdict is what a critic decides about a plan: at verify (before
// the plan runs) ok, replan, reject or escalate; at score (after its steps
// ran) accept, retry, replan or escalate. It is not policy.Verdict, the
// outcome of a pack's policy rules.
type CriticVerdict string

// Verify verdicts, then score verdicts.
const (
	VerdictOK       CriticVerdict = "ok"
	VerdictReplan   CriticVerdict = "replan"
	VerdictReject   CriticVerdict = "reject"
	VerdictAccept   CriticVerdict = "accept"
	VerdictRetry    CriticVerdict = "retry"
	VerdictEscalate CriticVerdict = "escalate"
)

// severity orders verdicts so a host critic can only make one stricter;
// known reports whether v is a verdict at all.
func (v CriticVerdict) severity() (s int, known bool) {
	s, known = map[CriticVerdict]int{VerdictOK: 0, VerdictAccept: 0, VerdictRetry: 1, VerdictReplan: 2, VerdictEscalate: 3, VerdictReject: 4}[v]
	return s, known
}

// Judgement is a critic's verdict and why.
type Judgement struct {
	Verdict CriticVerdict `json:"verdict"`
	Reason  string        `json:"reason,omitempty"`
}

// CriticInput is what a critic judges. A host critic is given copies: of
// the compiled context, request, run context and results (those its
// planner is given), of the pack (made once per run) and of the plan
// (made for each verdict); what it does to them changes nothing the run
// enforces or records.
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
// stricter (a looser verdict is ignored; one it does not know is a
// replan).
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

// InMemoryMemory is the in-memory MemoryStore: it recalls the promoted
// items it holds and keeps a copy of every proposal.
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

// Recall implements compiler.MemoryRecall: it returns the promoted items
// (compiler.MemoryPromoted), whatever the query.
func (m *InMemoryMemory) Recall(ctx context.Context, _ compiler.MemoryQuery) ([]compiler.MemoryItem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []compiler.MemoryItem
	for _, it := range m.items {
		if it.State == compiler.MemoryPromoted {
			out = append(out, it)
		}
	}
	return out, nil
}

// Propose implements MemoryStore.
func (m *InMemoryMemory) Propose(ctx context.Context, ps []MemoryProposal) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	kept := make([]MemoryProposal, len(ps))
	for i, p := range ps {
		p.SubjectIDs, p.EvidenceRefs = slices.Clone(p.SubjectIDs), slices.Clone(p.EvidenceRefs)
		kept[i] = p
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.proposals = append(m.proposals, kept...)
	return nil
}

// Proposals returns a copy of every proposal received.
func (m *InMemoryMemory) Proposals() []MemoryProposal {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.proposals)
}
