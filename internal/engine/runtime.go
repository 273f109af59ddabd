package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextos/contextos/internal/sortedkeys"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/gatewayhook"
	"github.com/contextos/contextos/internal/ontology"
	"github.com/contextos/contextos/internal/opmetrics"
	"github.com/contextos/contextos/internal/packref"
	"github.com/contextos/contextos/internal/playback"
	"github.com/contextos/contextos/internal/w3ctrace"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// RuntimeContractVersion is the runtime contract this SDK implements; packs
// check it through contract_meta.compatibility.requires.runtime.
const RuntimeContractVersion = pack.RuntimeContractVersion

// Options tunes a Runtime: contextos.Options, which documents each field.
// The root converts its Options to this type, so the two keep the same
// fields, in the same order, of the same types (a difference does not
// compile). Defaults are filled by New (newRuntime).
type Options struct {
	Adapters          []gateway.Registration
	Gateway           gateway.Options
	Transcripts       TranscriptStore
	Critic            Critic
	Memory            MemoryStore
	Evidence          compiler.EvidenceSource
	Checkpoints       CheckpointStore
	HeartbeatTTL      time.Duration
	Decisions         decision.Store
	Replays           PacketStore
	ReplaySampleRate  float64
	TracerProvider    trace.TracerProvider
	MeterProvider     metric.MeterProvider
	Logger            *slog.Logger
	Now               func() time.Time
	NewRunID          func(req *runcontext.InvokeRequest) (string, error)
	DefaultSafetyMode runcontext.ApprovalMode
	Tokenizer         compiler.Tokenizer
	RuntimeVersion    string
	Ontologies        []string
	Overlays          []*pack.Overlay
	KnowledgeSnapshot string
	Policy            policy.Options
	MaxTurns          int
	Identity          IdentityOptions
	OnPause           func(ctx context.Context, p PendingApproval)
}

// TranscriptStore is where the gateway appends each run's transcript and
// where the runtime reads it back: a transcript sink that is also a
// reader.
type TranscriptStore interface {
	gateway.TranscriptSink
	gateway.TranscriptReader
}

// PacketStore keeps replay packets. Safe for concurrent use.
type PacketStore interface {
	Save(ctx context.Context, p *replay.Packet) error
	Get(ctx context.Context, id string) (*replay.Packet, error)
}

// InMemoryPackets is the in-memory PacketStore.
type InMemoryPackets struct {
	mu sync.Mutex
	m  map[string][]byte
}

// NewInMemoryPackets returns an empty store.
func NewInMemoryPackets() *InMemoryPackets { return &InMemoryPackets{m: map[string][]byte{}} }

// Save implements PacketStore.
func (s *InMemoryPackets) Save(ctx context.Context, p *replay.Packet) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[p.ReplayPacketID] = b
	return nil
}

// Get implements PacketStore.
func (s *InMemoryPackets) Get(ctx context.Context, id string) (*replay.Packet, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	b, ok := s.m[id]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: no replay packet %q", ErrNotFound, id)
	}
	return replay.DecodePacket(b)
}

// Sentinel errors.
var (
	// ErrNotFound reports an unknown run, checkpoint or packet.
	ErrNotFound = errors.New("contextos: not found")
	// ErrNotResumable reports a Resume of a run that is not paused.
	ErrNotResumable = errors.New("contextos: run is not paused")
	// ErrResumeInput reports a Resume whose input does not answer what
	// the run awaits.
	ErrResumeInput = errors.New("contextos: resume input does not answer the pause")
	// ErrConfig reports invalid options.
	ErrConfig = errors.New("contextos: invalid configuration")
	// ErrRunInProgress reports an Invoke of a run id (by default derived
	// from tenant and request_id) whose run is still going.
	ErrRunInProgress = errors.New("contextos: run is in progress")
	// ErrRequestConflict reports an Invoke whose run id already ran with
	// another request.
	ErrRequestConflict = errors.New("contextos: run id already used by another request")
	// ErrReplayInputsLost reports a Capture of a run that a takeover
	// settled with the decision its runtime had stored before dying: the
	// run's record and transcript are whole, but what a replay needs of
	// the part that runtime ran (planner outputs, adapter outcomes, clock
	// readings) died with it.
	ErrReplayInputsLost = errors.New("contextos: the run's replay inputs were lost with the runtime that ran it")
)

// Runtime runs governed agent work. Build one with New; it is safe for
// concurrent use by many runs.
type Runtime struct {
	planner Planner
	packs   *pack.Resolver
	opts    Options
	gw      *gateway.Gateway
	// transcripts is the gateway's transcript, read back for replay
	// capture and takeovers.
	transcripts TranscriptStore
	tracer      trace.Tracer
	metrics     *opmetrics.Metrics
	builtin     builtinCritic
	// schemas are the registered capabilities' argument schemas, for
	// PlanRequest.Tools.
	schemas map[string]json.RawMessage

	mu       sync.Mutex
	prepared map[string]*compiler.Prepared
	// evRedact remembers the evidence contents its runs' sources
	// returned last, redacted (evidence source items enter redacted).
	evRedact memo[redacted]
	// evMeta remembers the other members of those items (ref, kind,
	// source id, snapshot) redacted, as evRedact does their contents.
	evMeta memo[metaRedacted]
	// decisions are the planner's decision options of the pack its runs
	// last compiled (run.decisionOptions): read only (PlanRequest's
	// Decisions hands out copies), so its runs share them.
	decisions atomic.Pointer[packDecisions]

	// mode is what the runtime's runs are: ModeLive, or ModeReplay on
	// the runtimes Replay builds, whose replayed says what of the packet
	// they reproduce (nil in ModeLive).
	mode     Mode
	replayed *replaySource
	// inline marks a runtime running in a workflow's deterministic code
	// (inline.go): no goroutine, no deadline of its own.
	inline bool
}

// Mode is what a Runtime's runs are. The engine runs a run the same way in
// either mode; the mode decides where the run's inputs come from and
// which of its effects are kept.
type Mode int

const (
	// ModeLive runs a host's requests: its planner, adapters and stores,
	// its clock (Options.Now), and the run's claims, leases, pause hook,
	// metrics and replay capture. New builds a runtime in this mode.
	ModeLive Mode = iota
	// ModeReplay re-runs a captured replay packet offline (Runtime.Replay
	// builds such a runtime): the recorded planner outputs and adapter
	// outcomes, the packet's clock readings, interruptions, compiled form
	// and takeover points, and fresh in-memory stores. It takes no lease,
	// calls no pause hook, captures no packet and verifies packs for
	// replay (pack.UseReplay); a run recorded without an identity claim
	// was waived when it ran, and is again.
	ModeReplay
)

// replaySource is what a runtime in ModeReplay reproduces of its packet.
type replaySource struct {
	// hash is the compiled_context_hash the replayed packet pins: a
	// packet recorded in an earlier compiled form (compiler.EarlierForms)
	// is compiled in that form, so its hash and records are reproduced.
	hash string
	// clock serves the packet's clock readings.
	clock *playback.Clock
	// interrupts are the interruption checks the live run stopped at.
	interrupts []replay.Interrupt
	// failures are the store requests the live run's stores failed
	// (nil: none), which the replay's stores fail.
	failures *replayedFailures
	// stopAt is the takeover point the replay's run stops at, where the
	// packet's run was taken over next (0: none; run.replayStop).
	stopAt int
	// spent is what the packet's next takeover charged of its dead
	// runtime's planner spend (replay.Takeover.Spent): the replay's
	// takeover charges it as recorded.
	spent *replay.Spent
}

// New returns a runtime that plans with planner and resolves packs from
// registry, verifying their signatures with keys.
func New(planner Planner, registry pack.Registry, keys pack.KeyResolver, opts *Options) (*Runtime, error) {
	if planner == nil || registry == nil || keys == nil {
		return nil, fmt.Errorf("%w: New needs a planner, a pack registry and a key resolver", ErrConfig)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	// The gateway's clock, tracer provider and transcript are the
	// runtime's: a value set on the gateway's options would be
	// overwritten, so it is refused.
	switch {
	case o.Gateway.Now != nil:
		return nil, fmt.Errorf("%w: Gateway.Now is set: the gateway's clock is Options.Now", ErrConfig)
	case o.Gateway.TracerProvider != nil:
		return nil, fmt.Errorf("%w: Gateway.TracerProvider is set: the gateway's tracer provider is Options.TracerProvider", ErrConfig)
	case o.Gateway.Transcript != nil:
		return nil, fmt.Errorf("%w: Gateway.Transcript is set: the runtime's transcript is Options.Transcripts (a sink it can read back)", ErrConfig)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RuntimeVersion == "" {
		o.RuntimeVersion = RuntimeContractVersion
	}
	host := pack.Host{"runtime": o.RuntimeVersion}
	for i, ont := range o.Ontologies {
		if _, _, err := ontology.Parse(ont); err != nil {
			return nil, fmt.Errorf("%w: Ontologies[%d]: %w", ErrConfig, i, err)
		}
	}
	if v := ontology.Highest(o.Ontologies); v != "" {
		host["ontology"] = v // compared as semantic versions
	}
	for i, ov := range o.Overlays {
		if ov == nil {
			return nil, fmt.Errorf("%w: Overlays[%d] is nil", ErrConfig, i)
		}
		if b, err := pack.ParseRef(ov.Base); err != nil || b.String() != ov.Base {
			return nil, fmt.Errorf("%w: Overlays[%d].base is not a pinned pack ref (id@major.minor.patch)", ErrConfig, i)
		}
	}
	if err := ownOptions(&o); err != nil {
		return nil, err
	}
	return newRuntime(planner, pack.NewResolver(registry, keys, &pack.ResolverOptions{Host: host, Now: o.Now, Validation: hostValidation(o)}), o)
}

// newRuntime fills the defaults of o and builds the runtime around a pack
// resolver (shared by a runtime and the runtimes its replays build).
// hostValidation is the pack validation the host's options call for: the
// names of its gateway's redaction rules are known.
func hostValidation(o Options) pack.ValidateOptions {
	return pack.ValidateOptions{RedactionRules: sortedkeys.Of(o.Gateway.Redactors)}
}

func newRuntime(planner Planner, packs *pack.Resolver, o Options) (*Runtime, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Checkpoints == nil {
		cps := NewInMemoryCheckpoints()
		cps.Now = o.Now
		o.Checkpoints = cps
	}
	if o.Decisions == nil {
		o.Decisions = decision.NewMemoryStore()
	}
	if o.Replays == nil {
		o.Replays = NewInMemoryPackets()
	}
	if o.TracerProvider == nil {
		o.TracerProvider = noop.NewTracerProvider()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	o.Logger = withoutSecretsLogger(o.Logger) // secrets.go
	if o.RuntimeVersion == "" {
		o.RuntimeVersion = RuntimeContractVersion
	}
	if o.MaxTurns <= 0 {
		o.MaxTurns = 16
	}
	if o.ReplaySampleRate < 0 || o.ReplaySampleRate > 1 {
		return nil, fmt.Errorf("%w: ReplaySampleRate must be in [0, 1]", ErrConfig)
	}
	rt := &Runtime{planner: planner, packs: packs, opts: o, prepared: map[string]*compiler.Prepared{},
		tracer: o.TracerProvider.Tracer("github.com/contextos/contextos")}
	rt.opts.Decisions = guardedDecisions{rt, o.Decisions} // guard.go: a panic is a failed call
	var err error
	if rt.metrics, err = opmetrics.New(o.MeterProvider); err != nil {
		return nil, fmt.Errorf("%w: MeterProvider: %w", ErrConfig, err)
	}
	// Packs may name the host's redaction rules: the names must be valid.
	hv := hostValidation(o)
	if err := hv.Check(); err != nil {
		return nil, fmt.Errorf("%w: Gateway.Redactors: %w", ErrConfig, err)
	}
	gopts := gatewayOptions(&o)
	// Adapters are registered as given: the recorder observes each run's
	// attempts through the gateway (gatewayRunOptions), after its
	// redaction, so packets and checkpoints never hold a raw outcome.
	gw, err := gateway.New(o.Adapters, &gopts)
	if err != nil {
		return nil, err
	}
	rt.gw = gw
	rt.schemas = argSchemas(o.Adapters)
	// The transcript the runtime reads back: Options.Transcripts, or the
	// gateway's default in-memory transcript, which is a reader too.
	tr, ok := gw.Transcript().(TranscriptStore)
	if !ok {
		return nil, fmt.Errorf("%w: the gateway's transcript cannot be read back", ErrConfig)
	}
	rt.transcripts = tr
	return rt, nil
}

// Packets returns the store of captured replay packets.
func (rt *Runtime) Packets() PacketStore { return rt.opts.Replays }

// Result is the outcome of Invoke or Resume.
type Result struct {
	RunID  string          `json:"run_id"`
	Status decision.Status `json:"status"`
	// Record is the run's (latest) DecisionRecord, as stored.
	Record *decision.Record `json:"decision_record"`
	// Compiled is the run's compiled context.
	Compiled *compiler.CompiledContext `json:"-"`
	// ToolResults are every tool result of the run, in order.
	ToolResults []*gateway.ToolResultEnvelope `json:"tool_results"`
	// Pending is the approval a DEFERRED run awaits.
	Pending *gateway.ApprovalRequest `json:"pending_approval,omitempty"`
	// ReplayPacketID names the captured packet, if any.
	ReplayPacketID string `json:"replay_packet_id,omitempty"`
	// Notices tell what the run did that the host may not have meant, such
	// as the tools its safety mode withheld (Notice).
	Notices []Notice `json:"notices,omitempty"`
}

// ResumeInput answers what a paused run awaits, or lets a hard-stopped
// run go on.
type ResumeInput struct {
	// Approvals answer a pause on an approval gate; one must name the
	// awaited gate.
	Approvals []gateway.Approval
	// Budget, when set, replaces the run budget (limits count the run's
	// usage so far; wall_clock_ms counts active time, not time paused), as
	// an operator does to let a run stopped by a budget limit finish. An
	// optional limit it leaves unset (0) — max_session_duration_ms,
	// plan_timeout_ms, max_payload_bytes — keeps the run's value rather
	// than falling back to the default: raising one is explicit. The
	// checkpoint's run context holds the budget in force.
	Budget *runcontext.RunBudget
	// Takeover continues a run another runtime was continuing when it
	// stopped without pausing or ending (it crashed, say). It is refused
	// (ErrLeaseHeld) while that runtime's claim lasts (Options.HeartbeatTTL
	// from its last save, on the checkpoint store's clock), and of any
	// number of takeovers of one run exactly one continues it: the others
	// get ErrLeaseHeld or ErrCheckpointConflict before doing anything. A
	// run whose runtime died resuming it with an approval goes on with
	// that approval when Approvals names none; one whose runtime had
	// stored its decision is ended with that decision.
	Takeover bool
	// Pause, when set, is the id of the DEFERRED record of the pause the
	// input answers (PendingApproval.RecordID): a run that no longer
	// awaits that pause (it was continued, and ended or paused again) is
	// refused with ErrNotResumable, so an approval decided for one pause
	// never lands on the next. The check holds against a concurrent
	// resume: the resume's claim is refused (ErrCheckpointConflict) if
	// the checkpoint moved on since it was read.
	Pause string
}

// Invoke runs one request to a terminal record, a pause or a budget limit.
// An error means the request could not be run at all (invalid input,
// packs refused, compile refused) or a store failed; governed outcomes —
// rejections, escalations, pauses — are results with their record.
func (rt *Runtime) Invoke(ctx context.Context, req *runcontext.InvokeRequest, rc *runcontext.RunContext) (res *Result, err error) {
	defer rt.guard(&res, &err)
	return rt.invoke(ctx, req, rc, nil)
}

// guard is the last line against a panic escaping the SDK: the plug-ins'
// panics are recovered where they are called and end the run with a
// record; anything else becomes a *PanicError (logged with its stack).
func (rt *Runtime) guard(res **Result, err *error) {
	if p := recover(); p != nil {
		*res, *err = nil, rt.recovered(p, "runtime", "")
	}
}

// Stream runs one request like Invoke and yields its typed events (compiled,
// plan, verdict, tool call, tool result, pause, decision, progress and
// heartbeat for long_running, error) ending with a result event. Stopping
// the iteration cancels the run.
func (rt *Runtime) Stream(ctx context.Context, req *runcontext.InvokeRequest, rc *runcontext.RunContext) iter.Seq2[Event, error] {
	return streamEvents(ctx, func(ctx context.Context, emit func(Event)) (res *Result, err error) {
		defer rt.guard(&res, &err)
		return rt.invoke(ctx, req, rc, emit)
	})
}

// streamEvents runs do, yielding its events and then its result (or its
// error); a consumer that stops iterating cancels the run.
func streamEvents(ctx context.Context, do func(ctx context.Context, emit func(Event)) (*Result, error)) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stopped := false
		var consumerPanic any
		emit := func(e Event) {
			if stopped {
				return
			}
			// A consumer that panics stops the run like one that stops
			// iterating (the run ends with its record), and its panic goes
			// on once the run has ended.
			defer func() {
				if p := recover(); p != nil {
					consumerPanic, stopped = p, true
					cancel()
				}
			}()
			if !yield(e, nil) {
				stopped = true
				cancel()
			}
		}
		res, err := do(ctx, emit)
		if consumerPanic != nil {
			panic(consumerPanic)
		}
		if stopped {
			return
		}
		if err != nil {
			yield(Event{Kind: EventError, Message: err.Error()}, err)
			return
		}
		yield(Event{Kind: EventResult, RunID: res.RunID, Final: res}, nil)
	}
}

// run is one run's state.
type run struct {
	rt       *Runtime
	req      *runcontext.InvokeRequest
	rc       *runcontext.RunContext
	clock    *playback.Clock
	meter    *runcontext.Meter
	inputs   []compiler.Input
	prepared *compiler.Prepared
	cc       *compiler.CompiledContext
	gwRun    *gateway.Run
	cp       *checkpointState
	emit     func(Event)
	span     trace.Span
	long     bool
	pins     *pins
	// identity is what the run's identity claim got (identity.go).
	identity decision.ClaimVerification
	// decisions are the pack's decisions for the planner (decisionOptions).
	decisions []DecisionOption
	// lab are the run's metric labels (labels).
	lab opmetrics.Labels
	// inputsLost marks a run settled by a takeover from a checkpoint saved
	// before its last part ran (the runtime that ran it died): its replay
	// inputs are incomplete, so no packet is captured.
	inputsLost bool
	// awaiting is the approval request a resumed run was paused on.
	awaiting *gateway.ApprovalRequest
	// recompiled marks a run whose context is compiled again to go on
	// with it or to read it back (a resume, a settle, a stored run): that
	// compile is not the run's work, and the run's wall clock does not
	// bound it (a run's own work after it still is).
	recompiled bool
	// clockTaken counts the clock readings already taken into the
	// checkpoint (takeInputs).
	clockTaken int
	// spent is what the run's planner turns charged since its last state
	// save (snapshotInto), and spentUnsaved marks a charge saveSpent has
	// not made durable yet.
	spent        replay.Spent
	spentUnsaved bool
	// call is what the attempts of the run's tool call in progress spent
	// before the gateway last retried it (SaveAttemptsSpent), nil once the
	// call returned: saveSpent saves it with the planner's spend.
	call *callInProgress
	// failedSince are the store failures of the run's calls since its
	// last state save (snapshotInto), which storeFailed saved with the
	// spend (saveSpent): a takeover's packet names them.
	failedSince []replay.StoreFailure
	// recorder records the adapter attempts of this runtime's part of the
	// run (its own: a run a takeover continues in the same process keeps
	// its attempts apart from those of the part it took over).
	recorder *playback.Recorder
	// factsMemo is the run's latest facts with exactly the inputs they were
	// built from (facts): the facts are built at every turn's judgement,
	// write check and record, often from the same inputs. Its users only
	// read them (verifyWrite edits a shallow copy).
	factsMemo factsMemo
	// redactedDecision is the decision of the latest plan redactPlan
	// redacted (the run's own copy of the plan, which nothing edits
	// after): build marks its outputs as redacted already
	// (decisionhook.OutputsRedacted).
	redactedDecision *DecisionProposal
	// sample is whether the run id falls within the replay sample rate,
	// once known (run.capture).
	sample struct{ known, in bool }
	// keepsWorker and work are the run's worker goroutine (worker.go).
	keepsWorker bool
	work        chan func()
	// plugin holds the copies of req, rc, cc and the step results the
	// run's planner and critic read (pluginReq, pluginRC, pluginCC,
	// pluginResults), and of the pack its host critic reads (pluginPack);
	// of and packOf are what cc and pack copy.
	plugin struct {
		req          *runcontext.InvokeRequest
		rc           *runcontext.RunContext
		cc, of       *compiler.CompiledContext
		results      []StepResult
		pack, packOf *pack.Pack
	}
}

func (rt *Runtime) invoke(ctx context.Context, req *runcontext.InvokeRequest, host *runcontext.RunContext, emit func(Event)) (*Result, error) {
	// Materialize validates the request before anything else (its error
	// is req.Validate's), then the host context and the result.
	rc, err := runcontext.Materialize(req, host, &runcontext.MaterializeOptions{NewRunID: rt.opts.NewRunID, DefaultSafetyMode: rt.opts.DefaultSafetyMode})
	if err != nil {
		return nil, err
	}
	req, rc = withoutSecrets(req, rc) // secrets.go: before anything sees or stores them
	clock := rt.clockFor(rc.RunID)
	start := clock.Now()
	identity, err := rt.verifyIdentity(ctx, rc, start)
	if err != nil {
		return nil, err
	}
	r := &run{rt: rt, req: req, rc: rc, clock: clock, meter: runcontext.NewMeter(rc.RunBudget, start), emit: emit, long: req.Mode == runcontext.ModeLongRunning, identity: identity}
	r.keepWorker()
	defer r.releaseWorker()
	// The claim is the run's first takeover point; it holds the start's
	// reading, so a takeover from it replays.
	r.cp = &checkpointState{RunID: rc.RunID, Request: req, Run: rc, StartedAt: start.UTC().Format(time.RFC3339Nano), Plans: []*Plan{}, Active: true, Points: 1}
	r.renewLease(start)
	r.cp.Clock, r.clockTaken = []time.Time{start}, 1
	// Claim the run before any work: a run id that already ran returns its
	// stored result, and one still running is refused.
	if err := rt.saveCheckpoint(ctx, r.cp); err != nil {
		if !errors.Is(err, ErrCheckpointConflict) {
			return nil, fmt.Errorf("contextos: claim run %s: %w", rc.RunID, err)
		}
		prev, err := rt.loadCheckpoint(ctx, rc.RunID)
		if err != nil {
			return nil, fmt.Errorf("contextos: load run %s: %w", rc.RunID, err)
		}
		if prev.Stopped != notStarted || prev.Active {
			return rt.stored(ctx, req, prev, emit)
		}
		// The run's earlier Invoke failed before it started: this one
		// starts it, over the earlier claim's revision.
		r.cp.rev = prev.rev
		if err := rt.saveCheckpoint(ctx, r.cp); err != nil {
			if errors.Is(err, ErrCheckpointConflict) {
				return nil, fmt.Errorf("%w: run %s", ErrRunInProgress, rc.RunID)
			}
			return nil, fmt.Errorf("contextos: claim run %s: %w", rc.RunID, err)
		}
	}
	if err := r.replayStop(ctx, true); err != nil {
		return nil, err
	}
	ctx, r.span = rt.startRunSpan(ctx, req, rc)
	defer r.span.End()
	if err := r.setupRun(ctx, nil); err != nil {
		// Nothing ran: the claim is released so the request can be
		// invoked again.
		r.cp.Active, r.cp.Stopped = false, notStarted
		sctx, cancel := detached(ctx)
		defer cancel()
		if serr := rt.saveCheckpoint(sctx, r.cp); serr != nil {
			rt.opts.Logger.Error("run claim not released", "run_id", rc.RunID, "error", logWords(serr))
		}
		return nil, err
	}
	return r.run(ctx, nil)
}

// notStarted marks the claim of a run whose Invoke failed before the run
// started (nothing ran): a later Invoke of the same request starts it.
const notStarted = "not_started"

// stored answers an Invoke of a run id that is already claimed: the stored
// result of a run that ended or paused, ErrRunInProgress for a run still
// going, and ErrRequestConflict for another request under the same id.
func (rt *Runtime) stored(ctx context.Context, req *runcontext.InvokeRequest, cp *checkpointState, emit func(Event)) (*Result, error) {
	runID := cp.RunID
	if err := checkCheckpoint(cp); err != nil {
		return nil, err
	}
	same, err := sameRequest(cp.Request, req)
	if err != nil {
		return nil, err
	}
	switch {
	case !same:
		return nil, fmt.Errorf("%w: run %s was invoked with another request under request_id %s", ErrRequestConflict, runID, req.RequestID)
	case cp.Active:
		return nil, fmt.Errorf("%w: run %s", ErrRunInProgress, runID)
	}
	// A record whose storage failed is stored now, as a resume would: a
	// pause's before the pause is answered, the run's own by settling the
	// run with it.
	if err := rt.confirmPause(ctx, cp); err != nil {
		return nil, err
	}
	if cp.Unconfirmed != nil {
		return rt.settle(ctx, cp, false, emit)
	}
	r, rec, err := rt.reopen(ctx, cp, emit)
	if err != nil {
		return nil, err
	}
	res := &Result{RunID: runID, Status: rec.Status, Record: rec, Compiled: r.cc, ToolResults: r.toolResults(), Pending: cp.Pending, Notices: r.notices()}
	if id, err := canon.ID(canon.PrefixReplay, runID, rec.RecordID, string(replay.SourceDecisionRecord)); err == nil {
		if _, err := rt.opts.Replays.Get(ctx, id); err == nil {
			res.ReplayPacketID = id
		}
	}
	return res, nil
}

// reopen rebuilds a stopped, paused or ended run from its checkpoint (its
// packs resolved for replay, its context compiled again) with its last
// record that is not CLOSED.
func (rt *Runtime) reopen(ctx context.Context, cp *checkpointState, emit func(Event)) (*run, *decision.Record, error) {
	recs, err := rt.opts.Decisions.List(ctx, decision.Filter{RunID: cp.RunID})
	if err != nil {
		return nil, nil, fmt.Errorf("contextos: load records of %s: %w", cp.RunID, err)
	}
	var rec *decision.Record
	for _, x := range recs {
		if x.Status != decision.Closed {
			rec = x
		}
	}
	if rec == nil {
		return nil, nil, fmt.Errorf("%w: no decision record for run %s", ErrNotFound, cp.RunID)
	}
	r, err := rt.rebuild(ctx, cp, emit)
	if err != nil {
		return nil, nil, err
	}
	return r, rec, nil
}

// rebuild rebuilds a run from its checkpoint to record what it already
// did (reopen, settle): its packs resolved for replay, its context
// compiled again, its transcript chain where the transcript has it. The
// run is not continued: no plan, no call, so nothing of it is bounded by
// the run's wall clock, however long ago the run started.
func (rt *Runtime) rebuild(ctx context.Context, cp *checkpointState, emit func(Event)) (*run, error) {
	start, _ := time.Parse(time.RFC3339Nano, cp.StartedAt) // checked by checkCheckpoint
	r := &run{rt: rt, req: cp.Request, rc: cp.Run, clock: playback.RecordingClock(rt.opts.Now), cp: cp, emit: emit,
		meter: runcontext.RestoreMeter(cp.Run.RunBudget, start, cp.MeterUsage), span: noopSpan, recompiled: true}
	chain, _, _, _, err := rt.chainOf(ctx, cp)
	if err != nil {
		return nil, err
	}
	if err := r.setup(ctx, pack.UseReplay, &chain); err != nil {
		return nil, err
	}
	return r, nil
}

// chainOf is where a run's transcript chain stands and how many entries
// the transcript holds: after its last entry (a runtime that died may
// have recorded calls its checkpoint does not know), or where the
// checkpoint left it when the transcript holds none (the zero ChainState
// is the chain's start; a transcript that keeps a bounded number of runs
// may have let the run's entries go); what the calls it records after the
// checkpoint spent (spentAfter); and the checkpoint's call in progress
// when the transcript holds no result of it (callOwed), nil otherwise.
//
// The entries are verified before the run goes on from them (the chain
// is a digest chain anyone who can write the store can extend, so a run
// must not seal a chain it has not checked): the chain recomputes from
// its start, each entry's kind is the envelope it holds, and the
// checkpoint's chain state lies on it (its entry's chain hash is the one
// the checkpoint saved). A transcript that fails is refused with
// gateway.ErrChain and ErrNotResumable: the run is not continued over it.
func (rt *Runtime) chainOf(ctx context.Context, cp *checkpointState) (gateway.ChainState, int, runcontext.Usage, *callInProgress, error) {
	entries, err := rt.transcripts.RunEntries(ctx, cp.RunID)
	if err != nil {
		return gateway.ChainState{}, 0, runcontext.Usage{}, nil, fmt.Errorf("contextos: read the transcript of %s: %w", cp.RunID, err)
	}
	if len(entries) == 0 {
		return cp.Chain, 0, runcontext.Usage{}, callOwed(nil, cp.CallInProgress), nil
	}
	if err := checkTranscript(entries, cp.Chain); err != nil {
		return gateway.ChainState{}, 0, runcontext.Usage{}, nil, fmt.Errorf("%w: the transcript of %s: %w", ErrNotResumable, cp.RunID, err)
	}
	// The count is the chain's length (its next sequence): the entries
	// the transcript holds when it kept the run's from the start.
	last := entries[len(entries)-1]
	return gateway.ChainState{Seq: last.Seq + 1, Hash: last.ChainHash}, last.Seq + 1, spentAfter(entries, cp.Chain.Seq), callOwed(entries, cp.CallInProgress), nil
}

// callOwed is c, the spend a checkpoint saved of its run's call in
// progress, when entries hold no result of that call after its call
// entry, and nil otherwise (or for a nil c): the result carries the cost
// and tokens of all the call's attempts, which spentAfter charges, so a
// takeover charges the saved spend only when the call never got one.
func callOwed(entries []gateway.TranscriptEntry, c *callInProgress) *callInProgress {
	if c == nil {
		return nil
	}
	for _, e := range entries {
		if e.Seq > c.Seq && e.Kind == "result" && e.Result != nil && e.Result.ToolCallID == c.ToolCallID {
			return nil
		}
	}
	return c
}

// checkTranscript verifies a run's transcript entries against the chain
// state its checkpoint saved at: the chain verifies from its start, every
// entry is a "call" holding a call or a "result" holding a result (the
// kind is not part of an entry's hash, and a takeover counts calls by
// it), and the entry before at.Seq ends at at.Hash (the transcript holds
// every entry the checkpoint knew, unchanged).
func checkTranscript(entries []gateway.TranscriptEntry, at gateway.ChainState) error {
	// A transcript that keeps a bounded number of runs may have dropped
	// the run's earlier entries while it was paused, and holds those the
	// run appended after (from the chain state its checkpoint saved): the
	// entries it holds verify as the chain's part from the first of them,
	// which the checkpoint's chain hash anchors below.
	first := entries[0].Seq
	if first < 0 {
		return fmt.Errorf("%w: its first entry's sequence is %d", gateway.ErrChain, first)
	}
	prev := gateway.GenesisHash // a whole chain starts there
	if first > 0 {
		prev = entries[0].PrevHash
	}
	if _, err := gatewayhook.VerifyChain(entries, first, prev); err != nil {
		return err
	}
	end := first + len(entries)
	switch {
	case at.Seq == 0 && first == 0:
	case at.Seq < first:
		// Entries the checkpoint knew are missing, not dropped with the
		// run's earlier ones.
		return fmt.Errorf("%w: it holds the run's entries from %d and the checkpoint recorded %d", gateway.ErrChain, first, at.Seq)
	case at.Seq > end:
		return fmt.Errorf("%w: it holds %d entries and the checkpoint recorded %d", gateway.ErrChain, end, at.Seq)
	case at.Seq == first:
		if entries[0].PrevHash != at.Hash {
			return fmt.Errorf("%w: entry %d does not follow the one the checkpoint recorded", gateway.ErrChain, first)
		}
	case entries[at.Seq-1-first].ChainHash != at.Hash:
		return fmt.Errorf("%w: entry %d is not the one the checkpoint recorded", gateway.ErrChain, at.Seq-1)
	}
	return nil
}

// spentAfter is what the calls a transcript records from seq on spent:
// a tool call for each call the gateway made (it records a call entry
// only for a call it charged and runs), and the cost and tokens their
// results report (a duplicate's are the first call's, charged then). A
// result whose call entry is before seq is not counted: that call was in
// progress when the checkpoint's state was saved, which only a takeover's
// claim does, and the takeover charged what that call's attempts had
// spent (callOwed); the result, recorded after the takeover read the
// transcript by the runtime it took the run from, carries those attempts
// too, so counting it would charge them twice (what is left out is the
// spend of the attempt in progress at the takeover, which a death loses).
func spentAfter(entries []gateway.TranscriptEntry, seq int) runcontext.Usage {
	var u runcontext.Usage
	for i, e := range entries {
		switch {
		case e.Seq < seq:
		case e.Kind == "call":
			u.ToolCalls++
		case e.Result != nil && callBefore(entries[:i], e.Result.ToolCallID, seq):
		case e.Result != nil && !e.Result.Metadata.Duplicate:
			u.CostCents = min(u.CostCents+max(e.Result.Metadata.CostCents, 0), canon.MaxSafeInteger)
			u.Tokens = min(u.Tokens+max(e.Result.Metadata.Tokens, 0), canon.MaxSafeInteger)
		}
	}
	return u
}

// callBefore reports whether the last call entry of toolCallID in
// entries (those before its result) is before seq.
func callBefore(entries []gateway.TranscriptEntry, toolCallID string, seq int) bool {
	for i := len(entries) - 1; i >= 0; i-- {
		if e := entries[i]; e.Kind == "call" && e.Call != nil && e.Call.ToolCallID == toolCallID {
			return e.Seq < seq
		}
	}
	return false
}

// addUsage adds b's tool calls, cost and tokens to a's, saturating at
// 2^53−1 as charges do.
func addUsage(a, b runcontext.Usage) runcontext.Usage {
	a.ToolCalls = min(a.ToolCalls+b.ToolCalls, canon.MaxSafeInteger)
	a.CostCents = min(a.CostCents+b.CostCents, canon.MaxSafeInteger)
	a.Tokens = min(a.Tokens+b.Tokens, canon.MaxSafeInteger)
	return a
}

// sameRequest reports whether two invoke requests are the same request.
func sameRequest(a, b *runcontext.InvokeRequest) (bool, error) {
	da, err := canon.Digest(a)
	if err != nil {
		return false, err
	}
	db, err := canon.Digest(b)
	if err != nil {
		return false, err
	}
	return da == db, nil
}

// startRunSpan starts the invoke span as a child of the request's W3C
// trace context, so the run's trace id is the request's.
func (rt *Runtime) startRunSpan(ctx context.Context, req *runcontext.InvokeRequest, rc *runcontext.RunContext) (context.Context, trace.Span) {
	carrier := propagation.MapCarrier{}
	w3ctrace.Inject(req.Trace, func(k, v string) { carrier[k] = v })
	ctx = propagation.TraceContext{}.Extract(ctx, carrier)
	return rt.tracer.Start(ctx, "invoke_agent", trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("contextos.tenant_id", rc.TenantID),
		attribute.String("contextos.run_id", rc.RunID),
		attribute.String("contextos.pack_ref", spanPackRefs(req.ContextPackRefs)),
		attribute.String("contextos.mode", string(req.Mode)),
	))
}

// spanPackRefs is the request's pack refs as the run's span names them:
// the caller's text, each shown as a refusal would show it (packref.Show:
// a ref holding a secret, or not of the ref grammar, is withheld).
func spanPackRefs(refs []string) string {
	shown := make([]string, len(refs))
	for i, r := range refs {
		shown[i] = packref.Show(r)
	}
	return strings.Join(shown, ",")
}

// appendPreparedKey appends a pack's part of the prepared packs' key,
// "ref=content_hash;" (the ref in its canonical form, pack.Ref.String).
func appendPreparedKey(b []byte, ref pack.Ref, contentHash string) []byte {
	b = append(b, ref.ID...)
	b = append(b, '@')
	b = strconv.AppendUint(b, ref.Major, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, ref.Minor, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, ref.Patch, 10)
	b = append(b, '=')
	b = append(b, contentHash...)
	return append(b, ';')
}

// setup resolves the packs, compiles and binds the gateway; chain, when
// set, continues a paused run's transcript chain.
func (r *run) setup(ctx context.Context, use pack.Use, chain *gateway.ChainState) (err error) {
	rt := r.rt
	_, span := rt.tracer.Start(ctx, "compile")
	defer span.End()
	defer func() {
		if err != nil {
			failSpan(span, "compile failed: "+errorType(err))
		}
	}()
	r.inputs = r.inputs[:0]
	// The prepared packs' key, "ref=content_hash;" for each pack, is
	// written into a buffer on the stack (for one or two packs): its map
	// lookup makes no string, its store one copy.
	var keyBuf [192]byte
	key := keyBuf[:0]
	for _, ref := range r.req.ContextPackRefs {
		res, err := rt.packs.ResolveString(ctx, ref, use)
		if err != nil {
			return err
		}
		r.inputs = append(r.inputs, compiler.Input{Ref: res.Ref, Pack: res.Pack, ContentHash: res.ContentHash})
		key = appendPreparedKey(key, res.Ref, res.ContentHash)
	}
	start, _ := time.Parse(time.RFC3339Nano, r.cp.StartedAt)
	copts := &compiler.Options{Ontologies: rt.opts.Ontologies, Host: rt.packs.Host(), Overlays: rt.opts.Overlays, Tokenizer: rt.opts.Tokenizer, At: start, KnowledgeSnapshot: rt.opts.KnowledgeSnapshot, Policy: rt.opts.Policy, Validation: hostValidation(rt.opts)}
	rt.mu.Lock()
	prepared := rt.prepared[string(key)]
	rt.mu.Unlock()
	if prepared == nil {
		var err error
		if prepared, err = compiler.Prepare(r.inputs, copts); err != nil {
			return err
		}
		rt.mu.Lock()
		if len(rt.prepared) >= maxPrepared {
			clear(rt.prepared) // packs are re-prepared on demand
		}
		rt.prepared[string(key)] = prepared
		rt.mu.Unlock()
	}
	if r.pins == nil {
		r.pins = &pins{rt: rt, runID: r.rc.RunID}
	}
	if r.recorder == nil {
		r.recorder = playback.NewRecorder()
	}
	prepared = prepared.At(start).WithSources(r.pins.sources())
	// The compile's policy evaluation is the gateway run's: the same
	// engine over the same request and run context (gatewayhook.WithPolicy).
	cc, eval, err := r.compile(ctx, prepared)
	if rt.mode == ModeReplay && rt.replayed.hash != "" && (err != nil || cc.Hash() != rt.replayed.hash) {
		// A packet recorded in an earlier form replays in it. The
		// recorded run compiled once: these compiles read no clock.
		for _, f := range compiler.EarlierForms() {
			if occ, ok := compileAs(ctx, prepared.WithForm(f), r, rt.replayed.hash); ok {
				prepared, cc, eval, err = prepared.WithForm(f), occ, nil, nil // the gateway evaluates
				break
			}
		}
	}
	if err != nil {
		return err
	}
	if err := r.pinLedgerPacks(cc); err != nil {
		return err
	}
	r.prepared, r.cc = prepared, cc
	if span.IsRecording() || r.span.IsRecording() {
		// Attributes are made only for a span that records them (a span
		// that does not ignores them).
		attrs := []attribute.KeyValue{attribute.String("contextos.compiled_context_hash", cc.Hash())}
		if c := cc.ContextLedger.DataClassification; c != "" {
			attrs = append(attrs, attribute.String("contextos.data_classification", string(c)))
		}
		span.SetAttributes(attrs...)
		r.span.SetAttributes(attrs...)
	}
	gwOpts := gatewayRunOptions(r.clock, chain, r.recorder)
	if rt.mode != ModeReplay {
		// What a call's attempts spent is made durable before the gateway
		// retries it (a replay saves nothing: it charges what its packet
		// recorded).
		gatewayhook.SaveSpent(gwOpts, r)
	}
	// The built-in evidence check only reads the call's decisions and
	// returns a new error each time: it is asked with no copies.
	gatewayhook.VerifyWriteShared(gwOpts, r.verifyWrite)
	// Each store request of a call that failed is recorded (or, in a
	// replay, compared).
	gatewayhook.StoreFailed(gwOpts, r.storeFailed)
	cfg := gateway.RunConfig{Prepared: prepared, Compiled: cc, Request: r.req, RunContext: r.rc, Meter: r.meter}
	if eval != nil {
		gatewayhook.WithPolicy(&cfg, eval)
	}
	// The run's request and run context are its own (the facade clones
	// the caller's request, Materialize the host's run context, a resume
	// decodes both from the checkpoint), never changed in place (a new
	// budget replaces the run context; the checkpoint writer relies on
	// it too), and a planner or critic gets copies (pluginReq,
	// pluginRC): the gateway keeps them rather than copying them again.
	gatewayhook.Owned(&cfg)
	if r.gwRun, err = rt.gw.NewRun(cfg, gwOpts); err != nil {
		return err
	}
	notices := r.notices()
	if use == pack.UseExecute {
		r.logNotices(notices) // once, when the run starts
	}
	if r.emit != nil {
		// The summary is built only for a consumer (r.event).
		r.event(Event{Kind: EventCompiled, Compiled: summarize(cc, notices)})
	}
	return nil
}

// compileAs compiles r's context with prepared, reading no clock, and
// reports whether it has compiled_context_hash hash (a panic is a miss).
func compileAs(ctx context.Context, prepared *compiler.Prepared, r *run, hash string) (cc *compiler.CompiledContext, ok bool) {
	defer func() {
		if recover() != nil {
			cc, ok = nil, false
		}
	}()
	cc, err := prepared.Compile(ctx, r.req, r.rc)
	return cc, err == nil && cc.Hash() == hash
}

// compile compiles the run's context within what is left of its wall
// clock: a compile (policy evaluation included) still running then is
// abandoned with a budget error. A panic in it (a tokenizer's, say) is a
// *PanicError. It returns the compile's run-level policy evaluation too
// (compilehook.CompileWithPolicy).
func (r *run) compile(ctx context.Context, prepared *compiler.Prepared) (*compiler.CompiledContext, *policy.Evaluation, error) {
	left := r.meter.Remaining(r.clock.Now()) // read inline too: a replay reads the clock as the run did
	if r.rt.inline {
		return r.compileInline(ctx, prepared)
	}
	if r.rc.RunBudget.WallClockMS <= 0 || r.recompiled {
		left = time.Duration(1<<63 - 1)
	}
	cctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	type compiled struct {
		cc   *compiler.CompiledContext
		eval *policy.Evaluation
		err  error
	}
	done := make(chan compiled, 1)
	r.handoff(func() {
		var out compiled
		defer func() {
			if p := recover(); p != nil {
				out = compiled{err: r.rt.recovered(p, "compile", r.rc.RunID)}
			}
			done <- out
		}()
		out.cc, out.eval, out.err = compileWithPolicy(cctx, prepared, r.req, r.rc)
	})
	select {
	case out := <-done:
		return out.cc, out.eval, out.err
	case <-cctx.Done():
		r.abandonWorker()
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("contextos: compile: %w", ctx.Err())
		}
		return nil, nil, fmt.Errorf("contextos: compile: %w", &runcontext.BudgetError{Dimension: runcontext.DimWallClock, Limit: float64(r.rc.RunBudget.WallClockMS)})
	}
}

// noopSpan stands in for a run span where none is started.
var noopSpan = trace.SpanFromContext(context.Background())

// maxPrepared bounds the cache of prepared pack sets.
const maxPrepared = 256

func gatewayRunOptions(c *playback.Clock, chain *gateway.ChainState, rec *playback.Recorder) *gateway.RunOptions {
	opts := &gateway.RunOptions{Now: func() time.Time { return c.Now() }, Chain: chain}
	// The recorder only reads and keeps what it is told: it observes the
	// attempts as the gateway holds them, with no copy.
	gatewayhook.ObserveShared(opts, rec.Observe)
	return opts
}

// event hands e to the run's consumer, if it has one, as a copy that
// shares nothing with the run (Event.detached).
func (r *run) event(e Event) {
	if r.emit != nil {
		e.RunID = r.rc.RunID
		e.Turn = r.cp.planTurn()
		r.emit(e.detached())
	}
}
