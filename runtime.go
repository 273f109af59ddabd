package contextos

import (
	"context"
	"iter"
	"log/slog"
	"maps"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/engine"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// Options tunes a Runtime. The zero value is ready to use: in-memory
// stores, a no-op tracer and meter, a discarding logger, the wall clock. The
// in-memory checkpoint, decision and packet stores keep everything for the
// life of the process (the default transcript keeps the last
// 10,000 runs): they suit tests and
// development; a production host plugs in durable stores.
type Options struct {
	// Adapters are the tool adapters the gateway may call.
	Adapters []gateway.Registration
	// Gateway tunes the gateway (idempotency store, approval log,
	// redactors, logger). Its clock, tracer provider and transcript are
	// the runtime's: set Now, TracerProvider and Transcripts here; New
	// refuses Gateway.Now, Gateway.TracerProvider and Gateway.Transcript
	// with ErrConfig rather than overwrite them. The names of its
	// Redactors become known to pack validation
	// (pack.ValidateOptions).
	Gateway gateway.Options
	// Transcripts receives every run's tool-call transcript and reads it
	// back (a failed run is always captured for replay from it, and a
	// takeover continues its chain). Default: the gateway's in-memory
	// transcript, which keeps the last gateway.DefaultMemoryTranscriptRuns
	// runs.
	Transcripts TranscriptStore
	// Critic, when set, runs after the built-in critic and can only make a
	// verdict stricter.
	Critic Critic
	// Memory recalls promoted memories and receives proposals.
	Memory MemoryStore
	// Evidence retrieves evidence for compilation.
	Evidence compiler.EvidenceSource
	// Checkpoints persists paused and long-running runs. Default: in memory.
	Checkpoints CheckpointStore
	// HeartbeatTTL is how long the claim of a runtime continuing a run
	// lasts, counted on the checkpoint store's clock from the claim's
	// last save; a takeover before then is refused (ErrLeaseHeld). A
	// long_running run renews it with each heartbeat; any run renews it
	// before a planner turn, a tool call or its terminal record once half
	// of it has passed. Keep it above twice the longest planner call, tool
	// call or store write. Default: 10 minutes.
	HeartbeatTTL time.Duration
	// Decisions stores the records. Default: in memory (a host that reads
	// records back beyond each Result's passes its store here).
	Decisions decision.Store
	// Replays stores captured replay packets. Default: in memory.
	Replays PacketStore
	// ReplaySampleRate is the share of runs captured for replay besides the
	// failed ones (0 to 1; sampling is by run id, so it is deterministic).
	ReplaySampleRate float64
	// TracerProvider makes the spans. Default: no-op.
	TracerProvider trace.TracerProvider
	// MeterProvider receives the operational metrics (seed 003: compile
	// results and latency, tool-surface size, policy rule evaluations,
	// bucket truncations, required-evidence resolution, replay
	// determinism, runs by status, gateway call latency, refusals), made
	// once per Runtime under the scope "github.com/contextos/contextos".
	// Attributes are pack refs, intents and names the packs declare, never
	// tenant, subject, request or run ids, amounts or arguments. Default:
	// no-op (nothing is measured, and the clock is not read for it).
	MeterProvider metric.MeterProvider
	// Logger receives the runtime's warnings and errors: a failed planner
	// turn, tool call, host critic or store write, a plug-in's panic (with
	// its stack, which never reaches a record), a refused or missing
	// identity claim, the run's notices, memory proposals not accepted, a
	// record with problems, a replay packet not captured. The gateway logs
	// to it too (a debug line per tool call, without arguments or outputs,
	// and an adapter's panic) unless Gateway.Logger is set. The built-in
	// secret detectors are applied to every message and attribute it
	// receives, and the values of secret-named attributes are redacted
	// whole. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// NewRunID makes run ids when the host RunContext has none. Default:
	// derived from tenant and request id.
	NewRunID func(req *runcontext.InvokeRequest) (string, error)
	// DefaultSafetyMode applies when the host RunContext sets none.
	// Default: read_only.
	DefaultSafetyMode runcontext.ApprovalMode
	// Tokenizer counts compiled-block tokens. Default: the estimate.
	Tokenizer compiler.Tokenizer
	// RuntimeVersion is checked against packs' requires.runtime. Default:
	// RuntimeContractVersion.
	RuntimeVersion string
	// Ontologies are the ontology versions the host declares,
	// "namespace@version" with a semantic version (1.10.0 is later than
	// 1.9.0). A pack's ontology must be declared here; the highest version
	// is the host's "ontology" for packs' compatibility.requires.
	Ontologies []string
	// Overlays are the declared environment overlays of this runtime's
	// environment (pack.DecodeOverlay): each applies to the pack its base
	// names, whenever a run uses that pack, and the run's ledger records
	// it (packs[].overlay: id, environment, digest). Overlays only
	// constrain (pack.ApplyOverlay refuses one that expands power); two
	// for the same pack are refused.
	Overlays []*pack.Overlay
	// KnowledgeSnapshot pins the knowledge-graph snapshot of evidence.
	KnowledgeSnapshot string
	// Policy bounds each JsonLogic evaluation of a pack's policy rules and
	// gate conditions (operations and bytes built); a rule over the budget
	// fails closed with policy.ErrBudget naming it. Zero: the defaults of
	// policy.Options.
	Policy policy.Options
	// MaxTurns bounds planner turns per run (a loop guard). Default: 16.
	MaxTurns int
	// Identity verifies agents' identity claims and says when a run must
	// carry one (see IdentityOptions). The zero value requires a claim of
	// every run whose packs allow delegated or destructive work and, having
	// no keys, refuses every claim.
	Identity IdentityOptions
	// OnPause, when set, is told of each pause on an approval gate once
	// the pause is persisted (checkpoint saved, DEFERRED record stored),
	// with the pending approval as PendingApprovals lists it (arguments
	// redacted), so a host can notify approvers. It runs on the run's
	// goroutine before Invoke or Resume returns, so it must not block;
	// it cannot change the run, and its panic is recovered and logged. A
	// replay never calls it.
	OnPause func(ctx context.Context, p PendingApproval)
}

// Runtime runs governed agent work. Build one with New; it is safe for
// concurrent use by many runs.
type Runtime struct {
	e *engine.Runtime
}

// New returns a runtime that plans with planner and resolves packs from
// registry, verifying their signatures with keys.
func New(planner Planner, registry pack.Registry, keys pack.KeyResolver, opts *Options) (*Runtime, error) {
	var eo *engine.Options
	if opts != nil {
		o := engine.Options(*opts)
		eo = &o
	}
	e, err := engine.New(planner, registry, keys, eo)
	if err != nil {
		return nil, err
	}
	return &Runtime{e: e}, nil
}

// Invoke runs one request to a terminal record, a pause or a budget limit.
// An error means the request could not be run at all (invalid input,
// packs refused, compile refused) or a store failed; governed outcomes —
// rejections, escalations, pauses — are results with their record.
//
// The run keeps its own copy of req (rc is copied as it is materialized):
// what the caller does to either once it has handed them over — from a
// Stream consumer, say, which runs between the run's steps — changes
// nothing the run enforces, records or replays.
func (rt *Runtime) Invoke(ctx context.Context, req *runcontext.InvokeRequest, rc *runcontext.RunContext) (res *Result, err error) {
	return rt.e.Invoke(ctx, req.Clone(), rc)
}

// Stream runs one request like Invoke and yields its typed events (compiled,
// plan, verdict, tool call, tool result, pause, decision, progress and
// heartbeat for long_running, error) ending with a result event. Stopping
// the iteration cancels the run.
func (rt *Runtime) Stream(ctx context.Context, req *runcontext.InvokeRequest, rc *runcontext.RunContext) iter.Seq2[Event, error] {
	return rt.e.Stream(ctx, req.Clone(), rc)
}

// Resume continues a paused run with what it awaits (an approval), on any
// runtime sharing the checkpoint, decision, idempotency and approval
// stores. Completed side effects are never repeated: finished steps are
// not re-run, the paused call keeps its idempotency key, and approvals are
// checked as in the gateway. The run ends as Invoke's would.
//
// A run stopped because the decision store failed its record and could
// not say whether it kept it (record_not_stored) is settled, not
// continued: Resume stores the record the run built (or adopts the copy
// the store kept) and ends the run with it, without planning or calling
// again and whatever in holds. Invoking the run again does the same.
//
// The run keeps its own copy of in.Budget, which its checkpoint and
// replay packet record: the caller's edits to it after the call (from a
// ResumeStream consumer, say) change neither.
func (rt *Runtime) Resume(ctx context.Context, runID string, in ResumeInput) (res *Result, err error) {
	if in.Budget != nil {
		b := *in.Budget
		b.BucketTokens = maps.Clone(b.BucketTokens)
		in.Budget = &b
	}
	return rt.e.Resume(ctx, runID, in)
}

// ResumeStream resumes like Resume and yields the run's events as Stream
// does, ending with a result event.
func (rt *Runtime) ResumeStream(ctx context.Context, runID string, in ResumeInput) iter.Seq2[Event, error] {
	if in.Budget != nil {
		b := *in.Budget
		b.BucketTokens = maps.Clone(b.BucketTokens)
		in.Budget = &b
	}
	return rt.e.ResumeStream(ctx, runID, in)
}

// Replay re-runs a captured packet offline through the same loop, policy,
// gateway and critic code as a live run: the planner's recorded outputs
// stand in for the model, a playback adapter serves the recorded adapter
// outcomes in place of every registered adapter (a call with no recorded
// outcome is a mismatch, never a live call), the clock serves the recorded
// readings, evidence and memory are the pinned items, and every store is
// fresh and in memory. Packs are resolved from rt's registry for replay
// (deprecated and archived versions allowed) and must have the pinned
// content hashes.
//
// The result is replay_equal when the compiled context hash, the context
// ledger (when the packet pins one: its ledger_hash, which covers the
// environment overlay applied to each pack and the environment), the tool
// transcript and the rebuilt DecisionRecord (its content, byte for byte)
// match the packet; otherwise replay_mismatch with typed differences naming
// the first step that diverged. A packet whose invoke envelope does not
// match its hash or whose transcript chain is broken is refused: the
// result is invalid with a tamper difference and the error wraps
// replay.ErrTamper. An error without a result means the packet could not
// be replayed at all.
//
// Each replay counts in the contextos.replays metric by its status (its
// replay_equal share is the replay determinism rate).
func (rt *Runtime) Replay(ctx context.Context, p *replay.Packet) (report *replay.Report, err error) {
	return rt.e.Replay(ctx, p)
}

// ReplayRecord replays the decision a stored record proves. It reads the
// record (Options.Decisions) and the replay packet the record names
// (Options.Replays), holds the two together, and replays the packet as
// Replay does: the record's content must hash to its record_hash, the
// packet must be the one the record names, and the packet must pin that
// record as stored (its expected.decision_record_hash is the record's
// record_hash). A packet put in the record's packet's place, a record
// edited in the store, or another record than recordID answered by the
// store, is refused with an error wrapping
// replay.ErrTamper, so replay_equal here is a replay of the stored
// decision itself, which Replay of a packet fetched by hand does not
// promise. A record the store does not hold is the store's error
// (decision.ErrNotFound); one that names no packet (its run was not
// sampled), or whose packet is not stored, is an error wrapping
// ErrNotFound.
func (rt *Runtime) ReplayRecord(ctx context.Context, recordID string) (*replay.Report, error) {
	return rt.e.ReplayRecord(ctx, recordID)
}

// Capture captures a finished run for replay after the fact — when an
// operator corrects its decision (replay.SourceOperatorCorrection) or it
// is promoted to a golden case (replay.SourceGoldenCase) — and stores the
// packet. It works for any run whose checkpoint, records and transcript
// are still in the stores, sampled or not, and for a paused run (its
// packet replays to the same pause). The packet pins the run's last record
// that is not CLOSED, as the decision store holds it: the packet's
// expected.decision_record_hash is that record's record_hash.
//
// Capture never changes the stored record: records are append-only and
// hash-chained. The record names only the packet captured with it when it
// was stored (its replay.replay_packet_id and lineage.replay_packet_id,
// inside its record_hash); a packet captured later names the record
// (source_ref, expected.decision_record_hash) instead. Packet ids are
// derived from the run, the record and the kind, so
// capturing a record with replay.SourceDecisionRecord gives the packet the
// record names — the way to restore one whose capture failed at the end of
// the run.
func (rt *Runtime) Capture(ctx context.Context, runID string, kind replay.SourceKind) (*replay.Packet, error) {
	return rt.e.Capture(ctx, runID, kind)
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
	return rt.e.PendingApprovals(ctx, runs)
}

// PendingApprovalsOf is PendingApprovals of one tenant's runs: a
// PendingIndex lists that tenant's only, and a run of another tenant is
// never listed. An empty tenantID is an error wrapping ErrConfig.
func (rt *Runtime) PendingApprovalsOf(ctx context.Context, runs CheckpointLister, tenantID string) ([]PendingApproval, error) {
	return rt.e.PendingApprovalsOf(ctx, runs, tenantID)
}

// Packets returns the store of captured replay packets.
func (rt *Runtime) Packets() PacketStore {
	return rt.e.Packets()
}
