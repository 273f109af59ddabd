package contextos

import (
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/engine"
	"github.com/contextos/contextos/pack"
)

// The plug-in interfaces, the values they see and return, and the stores'
// in-memory implementations. Each is the run engine's own type under its
// public name, so a value passes between a host and the engine as it is.

// RuntimeContractVersion is the runtime contract this SDK implements;
// packs check it through contract_meta.compatibility.requires.runtime.
const RuntimeContractVersion = pack.RuntimeContractVersion

type (
	// Planner proposes the next plan of a run: tool calls and at most one
	// decision. It sees the compiled context, the step results so far and
	// why it is asked again. It must honour ctx (its deadline is
	// plan_timeout_ms) and report its usage, which is charged to the run
	// budget: a plan's in Plan.Usage, a turn that fails after the model
	// answered in a *PlanUsageError, and a turn whose usage the provider
	// did not report as an error matching ErrUsageUnknown (the run stops
	// rather than charge nothing). An answer after ctx ends is not used;
	// its usage is charged when it comes within LateTurnGrace.
	Planner = engine.Planner
	// PlannerFunc adapts a function to Planner.
	PlannerFunc = engine.PlannerFunc
	// PlannerModel is implemented by a planner that plans with a model
	// (the openai and anthropic planners do): its turns get OpenTelemetry
	// GenAI client spans ("chat {model}") and the
	// gen_ai.client.token.usage and gen_ai.client.operation.duration
	// metrics. Provider is the gen_ai.provider.name ("openai",
	// "anthropic"), model the gen_ai.request.model. A planner that names
	// no model (either empty) has none of them; its turns keep their plan
	// spans.
	PlannerModel = engine.PlannerModel
	// PlanRequest is what a planner sees: the compiled context, the
	// request, the run, the step results so far, the turn and why it is
	// asked again; its Tools and Decisions describe what a plan may name,
	// and Emit streams a turn's deltas to a Stream consumer.
	PlanRequest = engine.PlanRequest
	// Plan is one planner turn: steps, at most one decision, memory
	// proposals, the turn's usage, or a planner's own reason to be asked
	// again (Replan, kept to MaxReplanBytes).
	Plan = engine.Plan
	// Step is one tool call of a plan.
	Step = engine.Step
	// DecisionProposal is the decision a plan commits to.
	DecisionProposal = engine.DecisionProposal
	// PlanUsage is a planner turn's model usage, which the runtime charges
	// to the run budget (the larger of Tokens and InputTokens+OutputTokens,
	// and CostCents). It is not runcontext.Usage, the run-budget meter's
	// reading of the whole run.
	PlanUsage = engine.PlanUsage
	// PlanUsageError is a planner turn that failed after the model
	// answered, with the usage the turn charges; it unwraps to the cause.
	PlanUsageError = engine.PlanUsageError
	// PlanDelta is a piece of a planner turn streamed while the model
	// produces it (PlanRequest.Emit, EventPlanDelta).
	PlanDelta = engine.PlanDelta
	// ToolSpec describes a capability a planner may call
	// (PlanRequest.Tools).
	ToolSpec = engine.ToolSpec
	// DecisionOption describes a decision a plan may commit to
	// (PlanRequest.Decisions).
	DecisionOption = engine.DecisionOption
	// StepResult is one executed step, with the plan turn it belongs to
	// and the decisions of the call's own policy evaluation.
	StepResult = engine.StepResult

	// Critic verifies a plan before it runs and scores its results after.
	// A host critic runs after the built-in one and can only make a
	// verdict stricter (a looser verdict is ignored; one it does not
	// know is a replan).
	Critic = engine.Critic
	// CriticInput is what a critic judges.
	CriticInput = engine.CriticInput
	// CriticVerdict is what a critic decides about a plan: at verify ok,
	// replan, reject or escalate; at score accept, retry, replan or
	// escalate. It is not policy.Verdict, the outcome of a pack's rules.
	CriticVerdict = engine.CriticVerdict
	// Judgement is a critic's verdict and why.
	Judgement = engine.Judgement

	// MemoryStore recalls promoted memories for compilation and receives
	// write-back proposals (never direct durable writes). Both must honour
	// ctx and be safe for concurrent use.
	MemoryStore = engine.MemoryStore
	// MemoryProposal is a proposed memory write-back.
	MemoryProposal = engine.MemoryProposal

	// Checkpoint is what a CheckpointStore keeps of a paused or running
	// run: its id, a revision for optimistic concurrency, a lease, and
	// Data in an encoding the runtime owns and names with Version.
	Checkpoint = engine.Checkpoint
	// CheckpointStore persists checkpoints so a run can resume on any
	// runtime sharing the store; package contextostest holds its
	// conformance suite. A store never interprets Version or Data.
	CheckpointStore = engine.CheckpointStore
	// CheckpointLister lists the runs to look at for pending approvals
	// (Runtime.PendingApprovals): a checkpoint store that lists its runs,
	// or a RunList of given ids.
	CheckpointLister = engine.CheckpointLister
	// ListingCheckpointStore is a CheckpointStore that lists its runs.
	ListingCheckpointStore = engine.ListingCheckpointStore
	// RunList is a CheckpointLister of the given run ids.
	RunList = engine.RunList
	// InMemoryCheckpoints is the in-memory CheckpointStore (a
	// ListingCheckpointStore and a PendingIndex). It counts leases on its
	// Now.
	InMemoryCheckpoints = engine.InMemoryCheckpoints
	// PendingIndex is a checkpoint store that keeps, with each save and
	// atomically, an index of the runs awaiting an approval
	// (Checkpoint.Awaiting), so PendingApprovals costs in proportion to
	// the pending approvals; contextostest.RunCheckpointStoreTests checks
	// it.
	PendingIndex = engine.PendingIndex
	// AwaitedApproval is what a PendingIndex keeps of a run paused at an
	// approval gate: its tenant and gate.
	AwaitedApproval = engine.AwaitedApproval
	// PacketStore keeps replay packets. Safe for concurrent use.
	PacketStore = engine.PacketStore
	// InMemoryPackets is the in-memory PacketStore.
	InMemoryPackets = engine.InMemoryPackets
	// TranscriptStore is where the gateway appends each run's transcript
	// and where the runtime reads it back: a transcript sink that is also
	// a reader.
	TranscriptStore = engine.TranscriptStore

	// IdentityOptions verify agents' identity claims (ctxid/1) and say
	// when a run must carry one (Options.Identity).
	IdentityOptions = engine.IdentityOptions
	// PendingApproval is a paused run's pending approval, its arguments
	// redacted (PendingApprovals, Options.OnPause).
	PendingApproval = engine.PendingApproval

	// Result is the outcome of Invoke or Resume: the run's status, its
	// latest decision record, its tool results, what a pause awaits, its
	// replay packet and its notices.
	Result = engine.Result
	// ResumeInput answers what a paused run awaits, or lets a
	// hard-stopped run go on, or takes over a run whose runtime died.
	ResumeInput = engine.ResumeInput
	// Notice tells the host something about its run that is governed as
	// the pack and run context say but may not be what the host meant,
	// such as the tools its safety mode withholds.
	Notice = engine.Notice
	// NoticeCode names a Notice.
	NoticeCode = engine.NoticeCode

	// Event is one typed stream event; the field matching Kind is set.
	Event = engine.Event
	// EventKind names a stream event.
	EventKind = engine.EventKind
	// CompiledSummary is what the compiled event reports.
	CompiledSummary = engine.CompiledSummary
)

// Critic verdicts: verify verdicts, then score verdicts.
const (
	VerdictOK       CriticVerdict = engine.VerdictOK
	VerdictReplan   CriticVerdict = engine.VerdictReplan
	VerdictReject   CriticVerdict = engine.VerdictReject
	VerdictAccept   CriticVerdict = engine.VerdictAccept
	VerdictRetry    CriticVerdict = engine.VerdictRetry
	VerdictEscalate CriticVerdict = engine.VerdictEscalate
)

// Stream event kinds. EventPlanDelta carries a piece of a planner turn
// before the turn's plan event; EventProgress reports a long_running run's
// step done or a tool's progress; EventHeartbeat reports a long_running
// run's checkpoint and until when its lease runs.
const (
	EventCompiled   EventKind = engine.EventCompiled
	EventPlan       EventKind = engine.EventPlan
	EventPlanDelta  EventKind = engine.EventPlanDelta
	EventVerdict    EventKind = engine.EventVerdict
	EventToolCall   EventKind = engine.EventToolCall
	EventToolResult EventKind = engine.EventToolResult
	EventPause      EventKind = engine.EventPause
	EventDecision   EventKind = engine.EventDecision
	EventProgress   EventKind = engine.EventProgress
	EventHeartbeat  EventKind = engine.EventHeartbeat
	EventError      EventKind = engine.EventError
	EventResult     EventKind = engine.EventResult
)

// NoticeToolsWithheld: the run's safety mode withholds capabilities the
// pack allows, because their approval mode is above it (the default
// safety mode, read_only, withholds every write-class capability). The
// planner is not offered them and the gateway refuses their calls.
const NoticeToolsWithheld NoticeCode = engine.NoticeToolsWithheld

// KeyReplay is the span attribute that marks a replay's spans
// (Runtime.Replay): what they describe re-ran recorded work, no live
// model call or tool call. A replay records no metric of its run.
const KeyReplay = engine.KeyReplay

// MaxReplanBytes bounds the Plan.Replan reason the runtime keeps.
const MaxReplanBytes = engine.MaxReplanBytes

// LateTurnGrace is how long the runtime still waits for a planner turn
// after the turn's context ended, for the usage of the answer it will not
// use: a plan or a PlanUsageError that arrives within it is charged to the
// run budget before the run's record is written.
const LateTurnGrace = engine.LateTurnGrace

// NewInMemoryCheckpoints returns an empty checkpoint store. It counts
// leases on its Now (default: time.Now).
func NewInMemoryCheckpoints() *InMemoryCheckpoints { return engine.NewInMemoryCheckpoints() }

// NewInMemoryPackets returns an empty packet store.
func NewInMemoryPackets() *InMemoryPackets { return engine.NewInMemoryPackets() }

// NewInMemoryMemory returns a memory store holding items: it recalls the
// promoted ones, whatever the query, and keeps a copy of every proposal.
func NewInMemoryMemory(items ...compiler.MemoryItem) *InMemoryMemory {
	return engine.NewInMemoryMemory(items...)
}

// InMemoryMemory is the in-memory MemoryStore.
type InMemoryMemory = engine.InMemoryMemory
