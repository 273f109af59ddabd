package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/backoff"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/internal/storefail"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// Options tunes a Gateway. The zero value is ready to use.
type Options struct {
	// Idempotency guarantees one execution per key. Default: in memory.
	Idempotency IdempotencyStore
	// Approvals records used approvals. Default: in memory.
	Approvals ApprovalLog
	// Transcript receives every call and result. Default: in memory,
	// keeping the last 10,000 runs (Gateway.Transcript
	// returns it).
	Transcript TranscriptSink
	// Redactors add to (or replace, by name) BuiltinRedactors. The
	// built-in "secret" rule applies to every run whatever the pack names;
	// a host rule named "secret" applies in addition when a pack names it.
	Redactors map[string]Redactor
	// TracerProvider makes one span per call. Default: no-op.
	TracerProvider trace.TracerProvider
	// Logger logs one line per call (no arguments or outputs). Default: discard.
	Logger *slog.Logger
	// Now is the clock (approval TTLs). Default: time.Now.
	Now func() time.Time
	// Sleep waits between retries, honouring ctx. Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns the jittered backoff for an attempt. Default: a
	// deterministic jitter in [d/2, d] derived from the tool call id and
	// attempt, so replays wait the same.
	Jitter func(toolCallID string, attempt int, d time.Duration) time.Duration
	// BaseBackoff and MaxBackoff shape exponential backoff. Defaults: 100ms, 30s.
	BaseBackoff, MaxBackoff time.Duration
	// Grace bounds how long past its timeout a call waits for an adapter
	// that ignores its context. Default: 50ms.
	Grace time.Duration
	// AttachmentScope reports whether an attachment may be used by the
	// tenant's calls (beyond being declared in the request). Default: any
	// declared attachment.
	AttachmentScope func(tenantID string, a runcontext.Attachment) bool
	// OmitContractMetadata leaves arg_schema_ref, protocol and version out
	// of call envelope metadata, as runtimes did before they were recorded.
	// Only a replay of a packet recorded then sets it, so its envelopes are
	// the recorded ones.
	OmitContractMetadata bool
}

// Gateway brokers every capability call: it holds the registered adapters
// and the stores, and checks, executes and records calls for runs. Safe for
// concurrent use.
type Gateway struct {
	opts     Options
	adapters map[string]*registered
	rules    map[string]Redactor
	tracer   trace.Tracer // nil when the provider is the no-op one
	// callMetas keeps call metadata by callMetaKey (see callMetadata),
	// callMetaCount how many.
	callMetas     sync.Map
	callMetaCount atomic.Int64
	// bindings keeps a *packBinding by *pack.Pack (see packBinding),
	// bindingCount how many; bindingsMu orders their stores.
	bindings     sync.Map
	bindingsMu   sync.Mutex
	bindingCount int
}

type registered struct {
	id      string
	adapter Adapter
	caps    map[string]*capSpec
	// protocol and version are what call envelopes record (metadata).
	protocol, version string
}

type capSpec struct {
	Capability
	schema *jsonschema.Schema
	shape  *shapeSchema // schema's shape, nil when it has none (see shapeSchema)
	argRef string       // metadata.arg_schema_ref
	// callDigest and resultDigest remember SHA-256's state after the
	// first block of the capability's call and result envelopes (their
	// approval modes; empty artifacts and the capability id), which the
	// gateway's calls of it share across runs: the entry hashes are the
	// same, each one block shorter to compute (see canon.PrefixState).
	callDigest, resultDigest canon.PrefixState
}

// New returns a gateway for the registered adapters. A registration
// without an adapter, a duplicate adapter id, or an argument schema that
// does not compile is an error (ErrConfig).
func New(regs []Registration, opts *Options) (*Gateway, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Idempotency == nil {
		o.Idempotency = NewMemoryIdempotency()
	}
	if o.Approvals == nil {
		o.Approvals = NewMemoryApprovalLog()
	}
	if o.Transcript == nil {
		o.Transcript = NewMemoryTranscriptLimit(defaultMemoryTranscriptRuns)
	}
	if o.TracerProvider == nil {
		o.TracerProvider = noop.NewTracerProvider()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.Jitter == nil {
		o.Jitter = deterministicJitter
	}
	if o.BaseBackoff <= 0 {
		o.BaseBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.Grace <= 0 {
		o.Grace = 50 * time.Millisecond
	}
	g := &Gateway{opts: o, adapters: map[string]*registered{}, rules: BuiltinRedactors()}
	if _, none := o.TracerProvider.(noop.TracerProvider); !none {
		g.tracer = o.TracerProvider.Tracer("github.com/contextos/contextos/gateway")
	}
	for name, r := range o.Redactors {
		g.rules[name] = r
	}
	for _, reg := range regs {
		if reg.AdapterID == "" || reg.Adapter == nil {
			return nil, fmt.Errorf("%w: registration needs an adapter id and an adapter", ErrConfig)
		}
		if _, dup := g.adapters[reg.AdapterID]; dup {
			return nil, fmt.Errorf("%w: adapter %s registered twice", ErrConfig, reg.AdapterID)
		}
		r := &registered{id: reg.AdapterID, adapter: reg.Adapter, caps: map[string]*capSpec{}}
		r.protocol, r.version = reg.protocol()
		if err := checkProtocolName("protocol", r.protocol, false); err != nil {
			return nil, fmt.Errorf("%w: adapter %s: %w", ErrConfig, reg.AdapterID, err)
		}
		if err := checkProtocolName("version", r.version, true); err != nil {
			return nil, fmt.Errorf("%w: adapter %s: %w", ErrConfig, reg.AdapterID, err)
		}
		for name, c := range reg.Capabilities {
			// The gateway's own copy: a host editing the Scopes or
			// ArgsSchema it registered after New changes no check.
			c.Scopes, c.ArgsSchema = slices.Clone(c.Scopes), bytes.Clone(c.ArgsSchema)
			cs := &capSpec{Capability: c}
			ref, err := argSchemaRef(&c)
			if err != nil {
				return nil, fmt.Errorf("%w: %s.%s %w", ErrConfig, reg.AdapterID, name, err)
			}
			cs.argRef = ref
			if len(c.ArgsSchema) > 0 {
				s, err := compileSchema(reg.AdapterID+"."+name, c.ArgsSchema)
				if err != nil {
					return nil, fmt.Errorf("%w: %s.%s args schema: %s", ErrConfig, reg.AdapterID, name, schemaProblem(err))
				}
				cs.schema, cs.shape = s, compileShape(s)
			}
			if !validCost(c.CostCents) {
				return nil, fmt.Errorf("%w: %s.%s cost must be a number of cents from 0 to 2^53−1", ErrConfig, reg.AdapterID, name)
			}
			if cs.Timeout <= 0 {
				cs.Timeout = DefaultTimeout
			}
			if cs.MaxAttempts <= 0 {
				cs.MaxAttempts = 3
			}
			r.caps[name] = cs
		}
		g.adapters[reg.AdapterID] = r
	}
	return g, nil
}

// Transcript returns the transcript sink.
func (g *Gateway) Transcript() TranscriptSink { return g.opts.Transcript }

// schemaProblem is what an error compiling an argument schema says,
// redacted by every built-in rule and clipped: a schema can come from
// outside (an MCP server's tool list), and the compiler quotes it.
func schemaProblem(err error) string {
	msg, _ := sensitive.Redact(strings.ToValidUTF8(err.Error(), "?"), sensitive.All)
	return clip(msg, maxSchemaProblem)
}

// maxSchemaProblem bounds what a schema compile error says, in bytes.
const maxSchemaProblem = 400

func compileSchema(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := "mem://args/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// deterministicJitter is the module's one backoff policy's equal jitter
// (internal/backoff): half the delay plus a fraction of the other half
// keyed by the call and the attempt, never a clock or a random source.
func deterministicJitter(id string, attempt int, d time.Duration) time.Duration {
	return backoff.Spread(backoff.Equal, d, backoff.Fraction(0, id, attempt))
}

// Run binds the gateway to one run: its compiled context, run context,
// budget meter and policy.
type Run struct {
	g       *Gateway
	cc      *compiler.CompiledContext
	rc      *runcontext.RunContext
	req     *runcontext.InvokeRequest
	pack    *pack.Pack
	engine  *policy.Engine
	base    *policy.Evaluation
	baseIDs string // digest of the run-level decision ids
	// runDecisionID names the run's policy evaluation: the decision a call
	// is bound to when the run's evaluation is the call's and no rule
	// decision of its own gates or denies it.
	runDecisionID string
	doc           policy.Document
	meter         *runcontext.Meter
	surfaced      map[string]*surfaced
	// evidence is the run's copy of its compiled evidence manifest, which
	// its approvals are bound to (evidence_snapshot_hash, see
	// evidenceSnapshot): its digest is worked out once, when a call at
	// an approval gate first needs it (snapshotOnce, snapshot).
	evidence     []compiler.EvidenceManifestEntry
	snapshotOnce sync.Once
	snapshot     string
	redact       []Redactor
	// clean is cleanSet of redact, when cleanKnown (every rule is a
	// built-in one): what an outcome's strings are checked against before
	// the rules are applied one by one (see redactOutcome).
	clean         sensitive.Set
	cleanKnown    bool
	now           func() time.Time
	observe       func(Attempt)                                       // nil when nothing observes the attempts
	observeCopies bool                                                // observe is told copies (RunOptions.Observe)
	saver         spendSaver                                          // nil when nothing saves spend between attempts
	storeFailed   func(context.Context, storefail.StoreFailure) error // nil when nothing records store failures
	verifyWrite   func(*WriteCall) *ToolError
	verifyCopies  bool // verifyWrite is told copies, its errors' details copied (RunOptions.VerifyWrite)
	usesTool      bool // per-call policy evaluation can differ from the run's
	// unbound are the approval gates no permission names
	// (packview.UnboundGates): active, each holds every write-class call.
	unbound []string
	// principals and authRef are the run's principal chain and auth ref,
	// shared by its envelopes (which are read only once built).
	principals []runcontext.Principal
	members    *runMembers
	authRef    *string
	trace      runcontext.Trace // the run's trace context, parsed once

	mu   sync.Mutex
	seq  int
	prev string
	// decisions are the calls' own policy decisions, by tool call id (see
	// CallDecisions).
	decisions map[string][]policy.Decision
}

// surfaced is a capability the run's compiled context surfaces: its
// binding, shared by every run of the pack, and its compiled metadata.
type surfaced struct {
	*capBinding
	meta compiler.CapabilityMetadata
}

// RunOptions tunes one run. The zero value uses the gateway's options.
type RunOptions struct {
	// Now is the run's clock (approval TTLs, latencies). Default: the
	// gateway's Options.Now. The runtime passes its per-run clock, so a
	// replay reads the same times.
	Now func() time.Time
	// Chain continues a resumed run's transcript chain where its
	// checkpoint left it. Default, or the zero ChainState: a new chain,
	// from GenesisHash. A chain past its start without a hash is refused.
	Chain *ChainState
	// Observe, when set, is told every adapter attempt of the run as the
	// gateway took it: checked, bounded and redacted (see Attempt). The
	// runtime's replay recorder observes here, above the redaction, so
	// what it keeps never holds an adapter's raw value. It is called on
	// the calling goroutine, once per attempt, in order.
	// What an observer is told is its copy: what it does to it changes
	// neither the call, its result nor its transcript entry.
	Observe func(Attempt)
	// observeShared, set only through gatewayhook.ObserveShared by the
	// module's runtime, is told each attempt as the gateway holds it (no
	// copy); it is used when Observe is not set.
	observeShared func(Attempt)
	// VerifyWrite, when set, is asked about every write-class call that
	// passed the checks before it (see the package doc, "evidence"),
	// before any approval gate holds it: nil lets the call go on; an
	// error blocks it (status blocked, the error's code and message, not
	// retryable), and nothing reaches the adapter. The runtime checks
	// here that the run already holds the evidence the call's rules and
	// decision require. It is called on the calling goroutine.
	// What a hook is told is its copy, and the run keeps a copy of the
	// error it returns: what it does to either, then or later, changes
	// neither the call, its result nor its transcript entry.
	VerifyWrite func(w *WriteCall) *ToolError
	// verifyWriteShared, set only through gatewayhook.VerifyWriteShared
	// by the module's runtime, is asked with the decisions as the run
	// holds them, and its error's details are kept as they are; it is
	// used when VerifyWrite is not set.
	verifyWriteShared func(w *WriteCall) *ToolError
	// saver, set only through gatewayhook.SaveSpent by the module's
	// runtime, is told what a call's attempts spent before each retry
	// (see spendSaver).
	saver spendSaver
	// storeFailed, set only through gatewayhook.StoreFailed by the
	// module's runtime, is told each store request of a call that failed.
	// An error from it is the run no longer this runtime's: it joins the
	// call's error.
	storeFailed func(context.Context, storefail.StoreFailure) error
}

// spendSaver is the module's runtime, which makes what a call's attempts
// spent durable before the gateway retries the call, so a runtime that
// dies between the attempts loses at most the spend of the attempt in
// progress (the call's result, which carries all of it, is recorded only
// when its last attempt ends). SaveAttemptsSpent is told the call's tool
// call id, the transcript sequence of its call entry, and the cost (each
// attempt's declared cost and what it reported) and tokens of the
// attempts made so far. It is asked only after an attempt that spent
// something and that the gateway retries, on the calling goroutine. An
// error means the run is no longer the runtime's (a takeover has it): the
// gateway makes no further attempt and records nothing more of the call,
// and Call returns the error.
type spendSaver interface {
	SaveAttemptsSpent(ctx context.Context, toolCallID string, seq int, costCents float64, tokens int) error
}

// claimHolder is a spendSaver that is asked, before a call's entry is
// recorded and again before its first attempt, before a retry that saves
// no spend and once a call's last attempt ended and before its result is
// recorded, whether the run is still the runtime's (it renews the run's
// claim when that is due). An error means a takeover has the run: the
// gateway makes no further attempt and records nothing of the call (a
// call given up before its first attempt never reached the adapter, and a
// write given up then or before a retry gives its idempotency key up, as
// an abandoned one does; a write whose last attempt ended keeps its
// result under the key: the effect may have happened), and Call returns
// the error. It is asked too before a refusal or a pause of a call that
// never reached the adapter is recorded (an error: the refusal is not
// recorded, and Call returns the error with it). So a runtime frozen in
// a call's checks, a write's idempotency claim or a tool call (slow, not
// dead) that comes back after its run was taken over makes no attempt
// and writes neither the call's result nor its refusal into the run's
// transcript.
type claimHolder interface {
	HoldClaim(ctx context.Context) error
}

// WriteCall is a write-class call RunOptions.VerifyWrite is asked about.
type WriteCall struct {
	CapabilityID string
	ToolCallID   string
	// Decisions are the decisions of the call's own policy evaluation
	// (the rules that applied to the call), nil when the call is bound to
	// the run's evaluation (the pack's policy reads no tool data). They
	// are the hook's copy.
	Decisions []policy.Decision
}

// ChainState is where a run's transcript chain stands: Seq entries
// recorded, the last ending at Hash. Its zero value is the start of a
// chain (no entry yet: the next one follows GenesisHash).
type ChainState struct {
	Seq  int    `json:"seq"`
	Hash string `json:"hash"`
}

// ChainState returns where the run's transcript chain stands: how many
// entries it has and its chain hash (tool_transcript_chain_hash), which a
// checkpoint keeps so a resumed run continues it (RunOptions.Chain).
func (r *Run) ChainState() ChainState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ChainState{Seq: r.seq, Hash: r.prev}
}

// RunConfig is what a Run is bound to: one run's compile and its budget
// meter. Every field is required.
type RunConfig struct {
	// Prepared is the prepared packs the run's context was compiled from.
	Prepared *compiler.Prepared
	// Compiled is Prepared's compile of Request and RunContext.
	Compiled *compiler.CompiledContext
	// Request is the run's invoke request (its input is policy data; its
	// attachments are what calls may use).
	Request *runcontext.InvokeRequest
	// RunContext is the run's materialized run context.
	RunContext *runcontext.RunContext
	// Meter charges the run's budget.
	Meter *runcontext.Meter
	// policy, set only through gatewayhook.WithPolicy by the module's own
	// runtime, is the run-level policy evaluation Compiled was compiled
	// with (compilehook.CompileWithPolicy): Prepared.Engine()'s
	// evaluation of Request's input and RunContext under
	// RunContext.RunID. NewRun then enforces it rather than evaluating the
	// policy again; when nil, NewRun evaluates it. The run keeps it as its
	// own: nothing may change it afterwards. It is not exported, so a
	// caller cannot have a run enforce an evaluation of other input.
	policy *policy.Evaluation
	// owned, set only through gatewayhook.Owned by the module's own
	// runtime, reports that Request and RunContext are the runtime's own
	// copies, which nothing changes for the run's life and nobody else
	// holds (a planner or critic gets copies of its own): NewRun keeps
	// them rather than copying them again. A run bound through the
	// exported RunConfig always takes its own copies.
	owned bool
}

// check reports the first missing field (ErrConfig, naming it).
func (c *RunConfig) check() error {
	for _, f := range [...]struct {
		name    string
		missing bool
	}{{"Prepared", c.Prepared == nil}, {"Compiled", c.Compiled == nil}, {"Request", c.Request == nil}, {"RunContext", c.RunContext == nil}, {"Meter", c.Meter == nil}} {
		if f.missing {
			return fmt.Errorf("%w: RunConfig.%s is required", ErrConfig, f.name)
		}
	}
	return nil
}

// NewRun binds a run to cfg; opts may be nil. A required RunConfig field left nil
// is an error (ErrConfig, naming the field).
func (g *Gateway) NewRun(cfg RunConfig, opts *RunOptions) (*Run, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	// The run enforces the request and run context as they are handed
	// over: a caller that edits its own after NewRun (its safety mode,
	// delegation, user or budget) changes no check of the run's calls.
	prepared, cc, req, rc, meter := cfg.Prepared, cfg.Compiled, cfg.Request, cfg.RunContext, cfg.Meter
	if !cfg.owned {
		req, rc = req.Clone(), rc.Clone()
	}
	r := &Run{g: g, cc: cc, rc: rc, req: req, pack: prepared.Pack(), engine: prepared.Engine(), meter: meter, prev: GenesisHash, now: g.opts.Now}
	if opts != nil && opts.Now != nil {
		r.now = opts.Now
	}
	if opts != nil && opts.Chain != nil {
		switch c := opts.Chain; {
		case c.Hash != "":
			r.seq, r.prev = c.Seq, c.Hash
		case c.Seq != 0:
			return nil, fmt.Errorf("%w: RunOptions.Chain stands at entry %d without a hash", ErrConfig, c.Seq)
		}
	}
	if opts != nil {
		r.observe, r.observeCopies, r.verifyWrite = opts.Observe, opts.Observe != nil, opts.VerifyWrite
		if r.observe == nil {
			r.observe = opts.observeShared
		}
		if r.verifyCopies = r.verifyWrite != nil; !r.verifyCopies {
			r.verifyWrite = opts.verifyWriteShared
		}
		r.saver = opts.saver
		r.storeFailed = opts.storeFailed
	}
	r.principals, r.authRef = rc.PrincipalChain(), strPtr(rc.AuthRef())
	r.members = newRunMembers(rc.RunID, rc.SessionID, rc.TraceID, r.principals)
	r.trace = runcontext.Trace{TraceID: rc.TraceID}
	if rc.TraceContext != nil {
		// Checked when the run context was; headers that do not parse leave
		// adapters the bare trace id, as before.
		if t, err := runcontext.TraceFromHeaders(*rc.TraceContext); err == nil {
			r.trace = t
		}
	}
	base := cfg.policy
	r.usesTool = r.engine.UsesTool()
	// The run's policy document is read by its own evaluation and, when
	// the policy reads the tool call, by each call's.
	if base == nil || r.usesTool {
		r.doc = policy.NewDocument(req.Input, rc)
	}
	if base == nil {
		var err error
		if base, err = r.engine.Evaluate(policy.Input{RunID: rc.RunID, Data: r.doc}); err != nil {
			return nil, fmt.Errorf("gateway: run policy: %w", err)
		}
	}
	r.base = base
	var err error
	if r.baseIDs, err = decisionIDsDigest(base); err != nil {
		return nil, err
	}
	if r.runDecisionID, err = canon.IDOf(canon.PrefixPolicy, canon.StringPart(rc.RunID), canon.StringPart(r.baseIDs)); err != nil {
		return nil, err
	}
	// What the run binds of its pack is the gateway's binding of it,
	// built once per pack: only the compiled metadata is the run's own.
	b := g.packBinding(r.pack)
	r.unbound = b.unbound
	n := 0
	for _, e := range cc.Manifests.ToolManifest {
		n += len(e.Capabilities)
	}
	r.surfaced = make(map[string]*surfaced, n)
	all := make([]surfaced, n)
	for _, e := range cc.Manifests.ToolManifest {
		for _, c := range e.Capabilities {
			cb, err := g.capBinding(b, e.AdapterID, c)
			if err != nil {
				return nil, err
			}
			s := &all[0]
			all = all[1:]
			s.capBinding, s.meta = cb, e.CapabilityMetadata[c]
			r.surfaced[cb.id] = s
		}
	}
	// A copy: what changes the caller's compiled context after NewRun
	// changes no approval of the run. Its entries are strings.
	r.evidence = slices.Clone(cc.Manifests.EvidenceManifest)
	// The built-in secret detectors apply whatever the pack names (an
	// empty list included): a key, token or credential never reaches a
	// result, the transcript or a record. The pack's rules add to them.
	r.redact = append(make([]Redactor, 0, 1+len(cc.RuntimeControls.RedactionRulesActive)), redactSecrets)
	for _, name := range cc.RuntimeControls.RedactionRulesActive {
		rule, ok := g.rules[name]
		if !ok {
			return nil, fmt.Errorf("%w: redaction rule %q is active but not known (known: %s)", ErrConfig, name, joinKnown(g.rules))
		}
		if !isSecretRule(rule) {
			r.redact = append(r.redact, rule)
		}
	}
	r.clean, r.cleanKnown = cleanSet(r.redact)
	return r, nil
}

// evidenceSnapshot is the digest of the run's compiled evidence manifest
// (its canonical JSON), which the run's approval requests and approved
// calls carry (evidence_snapshot_hash): the same for every call of the
// run, worked out when the first call that needs it does.
func (r *Run) evidenceSnapshot() string {
	r.snapshotOnce.Do(func() {
		// evidenceManifest's encoding cannot fail (strings only).
		r.snapshot, _ = canon.DigestOf(evidenceManifest(r.evidence))
	})
	return r.snapshot
}

// execute records the call, runs the attempts and records the result,
// whose metadata starts from what the checks settled.
func (r *Run) execute(ctx context.Context, c *callRecord) (*result, error) {
	env, polID := &c.env, c.env.PolicyDecisionID
	ad, spec, key := c.s.reg.adapter, c.s.spec, c.key
	if err := r.meter.ChargeToolCall(); err != nil {
		return r.refuse(c, StatusBlocked, NewToolError(CodeRuntimePolicyInvalid, false, err.Error(), map[string]any{"dimension": runcontext.DimToolCalls}), polID), nil
	}
	// Each attempt's declared cost is charged before it is made, refused
	// whole when the budget no longer has it: checkBudget's look at the
	// cost left is no reservation, and calls made at once on the run
	// would each find the same cost left.
	if err := r.meter.ChargeCost(spec.CostCents); err != nil {
		return r.refuse(c, StatusBlocked, NewToolError(CodeRuntimePolicyInvalid, false, err.Error(), map[string]any{"dimension": runcontext.DimCost}), polID), nil
	}
	// The adapter sees a deep copy of the recorded envelope and of the
	// user's delegation: what it writes into args, lists, pointers or
	// metadata changes neither the record, its hash, the run nor the
	// result. The copy is taken before the call is recorded: what the
	// transcript sink does to the entry it stores does not reach the
	// adapter either (it runs with the arguments that were checked).
	x := &c.x
	x.env = *env
	x.env.Metadata = maps.Clone(env.Metadata)
	if c.argsFlat {
		x.env.Args = maps.Clone(env.Args) // only scalars: a deep copy
	} else {
		x.env.Args, _ = jsonv.Normalize(env.Args).(map[string]any) // args are JSON-shaped: a deep copy
	}
	x.env.PrincipalChain = cloneInto(x.principals[:0], env.PrincipalChain)
	x.env.EvidenceRefs = slices.Clone(env.EvidenceRefs)
	x.env.PolicyDecisionID = copyInto(&x.ptrs[0], env.PolicyDecisionID)
	x.env.IdempotencyKey = copyInto(&x.ptrs[1], env.IdempotencyKey)
	x.env.AuthRef = copyInto(&x.ptrs[2], env.AuthRef)
	x.call = Call{Envelope: &x.env, Capability: c.s.capName, IdempotencyKey: key, Trace: r.trace}
	if d := c.delegation; d != nil {
		x.delegation = *d
		x.delegation.Scopes = cloneInto(x.scopes[:0], d.Scopes)
		x.call.Delegation = &x.delegation
	}
	// No call is recorded or made once the run is another runtime's: this
	// one may have been slow (frozen) in the call's checks or in a write's
	// idempotency claim since the run's takeover point, and again in the
	// call entry's append. A call given up here never reached the adapter:
	// nothing more is recorded, and a write's key is given up (executeOnce)
	// for the runtime that has the run.
	holder, holds := r.saver.(claimHolder)
	if holds {
		if err := holder.HoldClaim(ctx); err != nil {
			return r.abandon(c, polID), err
		}
	}
	seq, err := r.record(ctx, c, nil)
	if err != nil {
		res := r.refuse(c, StatusFailed, NewToolError(CodeExecutionFailed, true, "the call could not be recorded, so it was not run", nil), polID)
		res.notRun = true
		return res, err
	}
	if holds {
		if err := holder.HoldClaim(ctx); err != nil {
			return r.abandon(c, polID), err
		}
	}
	call := &x.call
	var out *Outcome
	var te *ToolError
	panicked := false
	attempts := 0
	cost := 0.0
	tokens := 0
	invalid := false  // the adapter's outcome was refused as invalid
	redacted := false // redaction changed the attempt's outcome or error
	var lost error    // the run is no longer this runtime's (spendSaver)
	for attempt := 1; ; attempt++ {
		attempts = attempt
		call.Attempt = attempt
		var room *attemptContext
		if attempt == 1 {
			room = &x.actx
		}
		out, te, panicked = r.attempt(ctx, ad, call, spec.Timeout, spec.HonorsContext, room)
		canceled := ctx.Err() != nil
		t := r.take(ad, call, out, te, &x.outcome)
		out, te, redacted, invalid = t.out, t.te, t.redacted, t.invalid != nil
		c.outFlat = t.flat && out != nil
		// The attempt was made: what it reports it spent is charged
		// whatever the budget says, now, so a retry is made only while
		// the run still has the budget for it. A cost that takes the run
		// over its budget leaves the meter Exceeded, which the runtime
		// checks after every call; the call's result stands (its side
		// effect happened).
		cost = addCost(addCost(cost, spec.CostCents), t.cost)
		tokens = addTokens(tokens, t.tokens)
		_ = r.meter.ChargeIncurredCost(t.cost)
		_ = r.meter.ChargeIncurredTokens(t.tokens)
		if r.observe != nil {
			a := Attempt{RunID: env.RunID, ToolCallID: env.ToolCallID, CapabilityID: env.CapabilityID, Attempt: attempt,
				Outcome: out, Error: te, Panicked: panicked, Invalid: t.invalid, Canceled: canceled, Redacted: redacted}
			switch {
			case panicked:
				a.Error = nil
			case invalid:
				// What is left of an invalid outcome: its cost and tokens, when valid.
				a.Error, a.Outcome = nil, &Outcome{CostCents: t.cost, Tokens: t.tokens}
			case te != nil && (t.cost != 0 || t.tokens != 0):
				// A failed attempt that spent something: the error, and what it spent.
				a.Outcome = &Outcome{CostCents: t.cost, Tokens: t.tokens}
			}
			if r.observeCopies {
				a = a.copied()
			}
			r.observe(a)
		}
		if te == nil || !te.Retryable || attempt >= spec.MaxAttempts || canceled || stopsRetrying(ad, call) || !r.affordsRetry(spec.CostCents) {
			break
		}
		if r.saver != nil && (spec.CostCents != 0 || t.cost != 0 || t.tokens != 0) {
			// What the attempts spent is made durable before the next
			// one starts (an attempt that spent nothing costs no save).
			if err := r.saver.SaveAttemptsSpent(ctx, env.ToolCallID, seq, cost, tokens); err != nil {
				lost = err
				break
			}
		} else if h, ok := r.saver.(claimHolder); ok {
			// No attempt starts once the run is another runtime's (this
			// one was slow in the last attempt, and taken over).
			if err := h.HoldClaim(ctx); err != nil {
				lost = err
				break
			}
		}
		var wait time.Duration
		if spec.Backoff != nil {
			wait = spec.Backoff(env.ToolCallID, attempt)
		} else {
			wait = r.g.opts.Jitter(env.ToolCallID, attempt, backoff.Exponential(r.g.opts.BaseBackoff, r.g.opts.MaxBackoff, attempt))
		}
		if err := r.g.opts.Sleep(ctx, wait); err != nil {
			te, invalid, redacted = NewToolError(CodeCanceled, false, "canceled while waiting to retry", nil), false, false
			break
		}
	}
	startResult(&x.res, c, polID)
	res := &x.res.env
	if c.approved != nil {
		res.Metadata = *c.approved
	}
	res.Metadata.EvidenceHashes = c.attHashes
	res.Metadata.Attempts, res.Metadata.Retries, res.Metadata.CostCents, res.Metadata.IdempotencyKey = attempts, attempts-1, cost, key
	res.Metadata.RedactionApplied, res.Metadata.Tokens = redacted, tokens
	if te != nil {
		res.Error, res.Status = te, failureStatus(te.Code)
		if invalid {
			res.Status = StatusError
		}
		retryable := te.Retryable
		res.Metadata.ToolStatus, res.Metadata.ToolCode, res.Metadata.ToolReason, res.Metadata.Retryable = string(res.Status), te.Code, te.Reason, &retryable
	} else {
		// The outcome is the gateway's redacted copy, which owns its lists.
		res.Output = out.Output
		res.Mutations, res.Artifacts = orEmpty(out.Mutations), orEmpty(out.Artifacts)
		res.Citations, res.RiskTags = orEmpty(out.Citations), orEmpty(out.RiskTags)
		res.Metadata.Signals = out.Signals
		res.Status = StatusOK
		if env.ApprovalModeHighest.IsWrite() {
			res.Status = StatusCompleted
			if len(out.Mutations) == 0 {
				res.Status = StatusError
				res.Error = NewToolError(CodeExecutionFailed, false, "a completed write must name its side effects in mutations[]", nil)
			}
		}
		if len(res.Citations) == 0 {
			x.cite[0] = Citation{EvidenceRef: c.citeRef}
			res.Citations = x.cite[:]
		}
	}
	if h, ok := r.saver.(claimHolder); ok && lost == nil {
		// The run may have been taken over while the call ran (this
		// runtime was slow): its result is recorded only while the run
		// is this runtime's.
		if err := h.HoldClaim(ctx); err != nil {
			lost = err
			x.res.ran = true
		}
	}
	if lost != nil {
		// The run is another runtime's now: nothing more of the call is
		// recorded, as if this runtime had died here.
		x.res.abandoned = true
		return &x.res, lost
	}
	_, err = r.record(ctx, c, &x.res)
	if panicked {
		perr := fmt.Errorf("%w: %s (tool call %s, attempt %d)", ErrAdapterPanic, env.CapabilityID, env.ToolCallID, attempts)
		if err == nil {
			err = perr
		} else {
			err = errors.Join(perr, err)
		}
	}
	return &x.res, err
}

// abandon is the result of a call given up before its first attempt
// because the run is another runtime's (claimHolder): it is neither
// recorded nor kept, and a write's key is given up.
func (r *Run) abandon(c *callRecord, polID *string) *result {
	res := r.refuse(c, StatusFailed, NewToolError(CodeExecutionFailed, true, "the run is another runtime's, so the call was not run", nil), polID)
	res.abandoned = true
	return res
}

// holdRefusal asks, before a refusal or a pause of a call that never
// reached the adapter is recorded, whether the run is still the
// runtime's (claimHolder): this runtime may have been slow (frozen) in
// the call's checks since the run's takeover point. When it is not, res
// is marked abandoned (not recorded) and the claim's error returned.
func (r *Run) holdRefusal(ctx context.Context, res *result) error {
	h, ok := r.saver.(claimHolder)
	if !ok {
		return nil
	}
	if err := h.HoldClaim(ctx); err != nil {
		res.abandoned = true
		return err
	}
	return nil
}

// joinErr is err and more, either of which may be nil.
func joinErr(err, more error) error {
	if err == nil {
		return more
	}
	return errors.Join(err, more)
}

// taken is one attempt as the gateway goes on with it.
type taken struct {
	out      *Outcome   // the redacted outcome, or nil
	te       *ToolError // the attempt's error, redacted and bounded, or nil
	invalid  []string   // what made the outcome invalid (te refuses it)
	cost     float64    // the outcome's cost to charge
	tokens   int        // the outcome's tokens to charge
	redacted bool       // redaction changed the outcome or the error
	flat     bool       // out's output holds only JSON scalars (redactOutcomeFlat)
}

// defaultMaxPayloadBytes is runcontext.DefaultRunBudget().MaxPayloadBytes,
// read once: the default budget is built afresh on every call to it (its
// token buckets are a new map), which take would otherwise pay per attempt.
var defaultMaxPayloadBytes = runcontext.DefaultRunBudget().MaxPayloadBytes

// take checks, bounds and redacts one attempt's outcome or error, right
// after the attempt, so nothing that follows (the result, the transcript,
// an observer) sees the adapter's raw value. An outcome the gateway
// refuses (invalid, too large, too deep) is not kept: it becomes the
// refusal's error, and only what it spent (its valid cost and tokens) is
// charged; so is what a failed attempt returned beside its error.
// Results are bounded by the run
// budget's max_payload_bytes, or runcontext.DefaultRunBudget().MaxPayloadBytes when it
// sets none.
func (r *Run) take(ad Adapter, call *Call, out *Outcome, te *ToolError, dst *takenOutcome) taken {
	var t taken
	kept := true // the adapter's text is what the result carries
	max := r.rc.RunBudget.MaxPayloadBytes
	if max <= 0 {
		// Results are bounded even when the run's budget sets no limit.
		max = defaultMaxPayloadBytes
	}
	switch {
	case te != nil:
		t.te = boundError(te, max)
		kept = t.te == te
		t.redacted = redactError(t.te, r.redact)
		if out != nil {
			// What the failed attempt spent: only its cost and tokens are read.
			t.cost, t.tokens = spent(out)
		}
	case out != nil:
		refusal, bad := checkOutcome(out, max)
		// What the attempt spent is two scalars, read without walking the
		// output: charged whether the outcome is taken, invalid or refused
		// for its size or depth (the attempt ran).
		t.cost, t.tokens = spent(out)
		if refusal != nil {
			t.te, t.invalid = refusal, bad
		} else {
			// A taken outcome ends the call's attempts: dst holds it.
			t.out = &dst.out
			t.redacted, t.flat = redactOutcomeFlat(dst, out, r.redact, r.clean, r.cleanKnown)
		}
	}
	// An adapter's report of a redaction it made (the attempt's text
	// redacted before the gateway saw it) counts only when that text is
	// kept: an error the gateway replaced for its size holds none of it,
	// as an in-process run's does not. The report is taken either way
	// (a reporter forgets the call when asked).
	reported := reportsRedaction(ad, call)
	t.redacted = t.redacted || kept && reported
	return t
}

// validCost reports whether c is a cost the gateway takes: a number of
// cents from 0 to 2^53−1 (false for NaN and the infinities). A larger
// number is no cost any call has, and would not read back exactly from a
// record's JSON.
func validCost(c float64) bool { return c >= 0 && c <= canon.MaxSafeInteger }

// validTokens reports whether n is a token count the gateway takes: from
// 0 to 2^53−1.
func validTokens(n int) bool { return n >= 0 && n <= canon.MaxSafeInteger }

// spent returns the cost and tokens of out to charge: each only when valid.
func spent(out *Outcome) (cost float64, tokens int) {
	if validCost(out.CostCents) {
		cost = out.CostCents
	}
	if validTokens(out.Tokens) {
		tokens = out.Tokens
	}
	return cost, tokens
}

// addTokens adds token counts, saturating at 2^53−1 instead of growing
// past what a record holds exactly (or wrapping).
func addTokens(a, b int) int {
	if b > canon.MaxSafeInteger-a {
		return canon.MaxSafeInteger
	}
	return a + b
}

// retryStopper is an optional, module-internal interface of an Adapter that knows, after an
// attempt, that no further attempt may be made: replay's playback stops
// where the recorded run stopped retrying (its caller had gone).
type retryStopper interface {
	StopRetrying(call *Call) bool
}

// affordsRetry charges another attempt's declared cost, cents, and
// reports whether the run had the budget for it: no dimension is over its
// limit (an attempt's reported cost or tokens may have taken it over) and
// the cost left covers the attempt.
func (r *Run) affordsRetry(cents float64) bool {
	return r.meter.Exceeded() == nil && r.meter.ChargeCost(cents) == nil
}

func stopsRetrying(ad Adapter, call *Call) bool {
	rs, ok := ad.(retryStopper)
	return ok && rs.StopRetrying(call)
}

// addCost adds valid costs, saturating at 2^53−1 cents, so a sum is
// always a cost the meter and the record take.
func addCost(a, b float64) float64 { return min(a+b, canon.MaxSafeInteger) }

// executed is what an executed call takes, part of its record (one
// allocation): the Call its adapter gets (with its copies of the
// envelope and the delegation, and room for short lists and the
// envelope's strings behind pointers), the redacted copy of the outcome
// it took, its result (with the result's transcript copy), and the
// result's default citation.
type executed struct {
	env        ToolCallEnvelope      // the adapter's copy of the call envelope
	delegation runcontext.Delegation // the adapter's copy of the user's delegation
	principals [2]runcontext.Principal
	scopes     [4]string
	ptrs       [3]string      // policy decision id, idempotency key, auth ref
	actx       attemptContext // the first attempt's context
	call       Call
	outcome    takenOutcome // the taken outcome's redacted copy
	res        result
	cite       [1]Citation
}

// ownResult gives e, a copy of a result envelope for the transcript
// sink, its own copies of what it shares with the result by reference
// (its output, lists and pointers), so a sink that edits the entry it
// stores does not edit the result the call returns. Short lists and the
// values behind pointers are held in room (part of the result: no
// allocation), but for a paused call's approval request; the output is
// copied.
func ownResult(e *ToolResultEnvelope, room *resultRoom) {
	if e.Output != nil {
		e.Output = jsonv.CloneObject(e.Output)
	}
	ownResultRefs(e, room)
}

// ownResultRefs is ownResult but for the output: e's lists, error and
// the values behind its pointers.
func ownResultRefs(e *ToolResultEnvelope, room *resultRoom) {
	strs := room.strs[:]
	e.Artifacts, e.Mutations, e.RiskTags = takeStrings(&strs, e.Artifacts), takeStrings(&strs, e.Mutations), takeStrings(&strs, e.RiskTags)
	e.Citations = cloneInto(room.cites[:0], e.Citations)
	e.PolicyDecisionID = copyInto(&room.polID, e.PolicyDecisionID)
	if e.Error != nil {
		room.err = *e.Error
		if room.err.Details != nil {
			room.err.Details = jsonv.CloneObject(room.err.Details)
		}
		e.Error = &room.err
	}
	if e.Approval != nil {
		// Only a paused call's result has one: its copy is not kept in
		// room, which every result carries.
		a := *e.Approval
		e.Approval = &a
	}
	m := &e.Metadata
	m.Signals, m.EvidenceHashes = takeStrings(&strs, m.Signals), takeStrings(&strs, m.EvidenceHashes)
	if m.Retryable != nil {
		room.retryable = *m.Retryable
		m.Retryable = &room.retryable
	}
}

// resultRoom is where ownResult keeps a transcript entry's own copies.
type resultRoom struct {
	polID     string
	retryable bool
	err       ToolError
	cites     [2]Citation
	strs      [6]string
}

// takeStrings returns a copy of s (nil for nil) in what is left of room
// when it fits (the copy's capacity is its length), else in a new array.
func takeStrings(room *[]string, s []string) []string {
	if s == nil {
		return nil
	}
	if len(s) > len(*room) {
		return slices.Clone(s)
	}
	c := (*room)[:len(s):len(s)]
	copy(c, s)
	*room = (*room)[len(s):]
	return c
}

// sinkEnvelope returns the copy of the call's envelope its transcript
// entry carries (see record).
func (c *callRecord) sinkEnvelope() *ToolCallEnvelope {
	s := &c.sink.env
	*s = c.env
	ownCall(s, &c.sink.room)
	return s
}

// ownCall gives e, a copy of a call envelope, its own copies of the
// values behind its pointers and of its principal chain, held in room
// when they fit (no allocation). Its args, metadata and evidence refs are
// left shared.
func ownCall(e *ToolCallEnvelope, room *callRoom) {
	e.PolicyDecisionID = copyInto(&room.ptrs[0], e.PolicyDecisionID)
	e.IdempotencyKey = copyInto(&room.ptrs[1], e.IdempotencyKey)
	e.AuthRef = copyInto(&room.ptrs[2], e.AuthRef)
	e.PrincipalChain = cloneInto(room.principals[:0], e.PrincipalChain)
}

// callRoom is where ownCall keeps a call envelope's own copies.
type callRoom struct {
	ptrs       [3]string // policy decision id, idempotency key, auth ref
	principals [2]runcontext.Principal
}

// cloneInto returns a copy of s that owns its elements: in room's backing
// array when s fits it, else in a new one. The copy's capacity is its
// length, so appending to it never writes into room. A nil s stays nil.
func cloneInto[T any](room, s []T) []T {
	if s == nil {
		return nil
	}
	if len(s) <= cap(room) {
		room = append(room[:0], s...)
		return room[:len(s):len(s)]
	}
	return slices.Clone(s)
}

// copyInto returns a pointer to a copy of *p held in room (nil for nil).
func copyInto(room *string, p *string) *string {
	if p == nil {
		return nil
	}
	*room = *p
	return room
}

// result is a result the gateway built, with room for the copy its
// transcript entry holds (one allocation for both). The envelope holds
// only wire members; what the gateway knows about it besides lives here.
type result struct {
	env      ToolResultEnvelope
	entry    ToolResultEnvelope // the transcript's copy, written by record
	room     resultRoom         // what entry owns (see ownResult)
	recorded bool               // appended to the transcript already
	// abandoned marks the result of a call given up between its attempts
	// (spendSaver): it is neither recorded nor kept; or, with ran, of a
	// call whose attempts ended when the run was no longer the runtime's
	// (claimHolder): it is not recorded, and a write's is kept.
	abandoned, ran bool
	// notRun marks the refusal of a call whose call entry could not be
	// recorded: the adapter was never called, so a write's key is given
	// up, not kept with the refusal (a later call makes the write).
	notRun bool
	m      *runMembers // the run's, when record encodes the result
}

// newResult starts a result for c with every list present (empty, never
// null), so results always have the same shape.
func newResult(c *callRecord, polID *string) *result {
	res := new(result)
	startResult(res, c, polID)
	return res
}

// startResult starts res, which is zero (new, or the unused one in the
// call's record), for c. Only the members it sets are written: the
// envelope is half a kilobyte, and copying a whole one in would copy its
// zero members too.
func startResult(res *result, c *callRecord, polID *string) {
	env, e := &c.env, &res.env
	e.EnvelopeVersion, e.ToolCallID, e.RunID, e.TraceID, e.SessionID, e.CapabilityID = ResultEnvelopeVersion, env.ToolCallID, env.RunID, env.TraceID, env.SessionID, env.CapabilityID
	e.PolicyDecisionID = polID
	e.Artifacts, e.Citations, e.Mutations, e.RiskTags = []string{}, []Citation{}, []string{}, []string{}
}

func failureStatus(code string) Status {
	switch code {
	case CodeTimeout, CodeCanceled, CodeExecutionFailed, CodeIsolationUnavailable, CodeSecretResolutionFailed:
		return StatusFailed
	}
	return StatusError
}

// attempt runs one adapter attempt under the capability timeout, and
// returns within timeout plus the grace even when the adapter ignores its
// context. panicked reports an adapter that panicked during the attempt
// (its error is then "the adapter panicked"); a panic after an abandoned
// attempt timed out is only logged.
// room, when not nil, is an unused attemptContext the attempt may use.
func (r *Run) attempt(ctx context.Context, ad Adapter, call *Call, timeout time.Duration, honorsContext bool, room *attemptContext) (_ *Outcome, _ *ToolError, panicked bool) {
	var res adapterResult
	var actx context.Context
	if honorsContext {
		// The adapter returns when its context is done: its context is made
		// lazily (see attemptContext), in the call's record for a first
		// attempt (no allocation), its own for a retry (an attempt's adapter
		// may keep its context past the attempt).
		ac := room
		if ac == nil {
			ac = new(attemptContext)
		}
		ac.start(withProgressRules(ctx, r.redact), timeout)
		defer ac.end()
		actx = ac
		res = r.callAdapter(actx, ad, call)
	} else {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(withProgressRules(ctx, r.redact), timeout)
		defer cancel()
		// The attempt may outlive this call to attempt (the adapter ignores
		// its context): it gets its own copy of the call, which the next
		// attempt does not change.
		own := *call
		done := make(chan adapterResult, 1)
		go func() { done <- r.callAdapter(actx, ad, &own) }()
		select {
		case res = <-done:
		case <-actx.Done():
			grace := time.NewTimer(r.g.opts.Grace)
			select {
			case res = <-done:
				grace.Stop()
			case <-grace.C:
				return nil, contextError(ctx, timeout), false
			}
		}
	}
	if res.panicked {
		return nil, NewToolError(CodeExecutionFailed, false, "the adapter panicked", nil), true
	}
	if res.err == nil && res.out == nil {
		return nil, NewToolError(CodeExecutionFailed, false, "the adapter returned no outcome", nil), false
	}
	if res.err != nil {
		// An outcome returned with the error is what the failed attempt
		// spent: take reads only its cost and tokens.
		spent := res.out
		if actx.Err() != nil && ctx.Err() == nil && errors.Is(res.err, context.DeadlineExceeded) {
			return spent, contextError(ctx, timeout), false
		}
		var te *ToolError
		if errors.As(res.err, &te) {
			c := *te
			if c.Reason == "" {
				c.Reason = ReasonFor(c.Code)
			}
			// Details the gateway keeps are its own: redaction copies
			// non-empty ones, and an empty map the adapter keeps could
			// gain members after the call.
			if len(c.Details) == 0 {
				c.Details = map[string]any{}
			}
			return spent, &c, false
		}
		if errors.Is(res.err, context.Canceled) || errors.Is(res.err, context.DeadlineExceeded) {
			return spent, contextError(ctx, timeout), false
		}
		// A plain error's text may carry backend output; it is not echoed.
		return spent, NewToolError(CodeExecutionFailed, false, "the adapter failed", nil), false
	}
	return res.out, nil, false
}

type adapterResult struct {
	out      *Outcome
	err      error
	panicked bool
}

// callAdapter makes one adapter call, turning a panic into a failure. The
// panic value and stack are logged at Error level, and go nowhere else.
func (r *Run) callAdapter(ctx context.Context, ad Adapter, call *Call) (res adapterResult) {
	defer func() {
		if p := recover(); p != nil {
			r.g.opts.Logger.LogAttrs(ctx, slog.LevelError, "adapter panicked", slog.String("run_id", r.rc.RunID),
				slog.String("tool_call_id", call.Envelope.ToolCallID), slog.String("capability", call.Envelope.CapabilityID), slog.Int("attempt", call.Attempt),
				slog.String("panic_type", fmt.Sprintf("%T", p)), slog.String("stack", string(debug.Stack()))) // not the value: it may hold a secret
			res = adapterResult{panicked: true}
		}
	}()
	out, err := ad.Call(ctx, call)
	return adapterResult{out: out, err: err}
}

func contextError(parent context.Context, timeout time.Duration) *ToolError {
	if parent.Err() != nil && !errors.Is(parent.Err(), context.DeadlineExceeded) {
		return NewToolError(CodeCanceled, false, "the call was canceled", nil)
	}
	return NewToolError(CodeTimeout, true, fmt.Sprintf("execution exceeded timeout_ms (%d)", timeout.Milliseconds()), map[string]any{"timeout_ms": timeout.Milliseconds()})
}

// record appends a transcript entry for c (res nil) or for its result
// res, advances the run's chain, and returns the entry's sequence. The gateway records envelopes it has
// just built, so it encodes them with the call's cached encodings and the
// run's constant members; VerifyTranscript encodes everything afresh.
func (r *Run) record(ctx context.Context, c *callRecord, res *result) (int, error) {
	kind := "call"
	if res != nil {
		kind = "result"
	}
	// The entry hash and the chain hash are written side by side and made
	// one string: one allocation for both.
	var hashes [2*canon.DigestLen + 48]byte // and room for a result's transcript id
	var b []byte
	var err error
	var callState, resultState *canon.PrefixState
	if c.s != nil && c.s.spec != nil {
		callState, resultState = &c.s.spec.callDigest, &c.s.spec.resultDigest
	}
	if res == nil {
		b, err = canon.AppendDigestOfCached(hashes[:0], (*recordedCall)(c), callState)
	} else {
		res.m = c.m
		b, err = canon.AppendDigestOfCached(hashes[:0], (*recordedResult)(res), resultState)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrTranscript, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b = appendChain(b, r.prev, b)
	if res != nil {
		// The result's transcript id (run#seq) joins the hashes' string.
		b = strconv.AppendInt(append(append(b, r.rc.RunID...), '#'), int64(r.seq), 10)
	}
	all := string(b)
	e := TranscriptEntry{RunID: r.rc.RunID, Seq: r.seq, Kind: kind, EntryHash: all[:canon.DigestLen], PrevHash: r.prev, ChainHash: all[canon.DigestLen : 2*canon.DigestLen]}
	if res == nil {
		// The call entry is a copy of the envelope (in the record: no
		// allocation) with its own pointers and principal chain, so a
		// sink that edits what it stores changes neither the record, the
		// result nor the run. Its args, metadata and evidence refs are the
		// record's: nothing reads them once the call is recorded (the
		// adapter's deep copy is taken before).
		e.Call = c.sinkEnvelope()
	} else {
		res.entry = res.env
		if res == &c.x.res && c.outFlat {
			// The output is the gateway's redacted copy and holds only JSON
			// scalars (redactOutcomeFlat): its map's own copy is a deep copy.
			res.entry.Output = maps.Clone(res.entry.Output)
			ownResultRefs(&res.entry, &res.room)
		} else {
			ownResult(&res.entry, &res.room)
		}
		e.Result = &res.entry
		// The transcript id and the recorded mark are set after the entry is
		// hashed and copied: they point at the entry, not into it.
		res.env.Metadata.ToolTranscriptID = all[2*canon.DigestLen:]
		res.recorded = true
	}
	if ctx.Err() != nil {
		// What ran is recorded even when the caller has gone.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), detachedTimeout)
		defer cancel()
	}
	if err := r.g.opts.Transcript.Append(ctx, e); err != nil {
		kept, taken := r.kept(ctx, e)
		if !kept {
			if taken && !errors.Is(err, ErrPositionTaken) {
				// Another runtime's entry is at the position (a sink that
				// refuses the fork with an error of its own).
				err = fmt.Errorf("%w: %w", ErrPositionTaken, err)
			}
			err = fmt.Errorf("%w: %w", ErrTranscript, err)
			if !taken && r.storeFailed != nil {
				if herr := r.storeFailed(ctx, storefail.StoreFailure{ToolCallID: c.env.ToolCallID, Store: storefail.Transcript, Op: storefail.OpAppend, Kind: kind, Seq: e.Seq}); herr != nil {
					err = errors.Join(err, herr)
				}
			}
			return 0, err
		}
	}
	r.seq++
	r.prev = e.ChainHash
	return e.Seq, nil
}

// kept reports whether a transcript whose append of e failed holds e
// after all (a store whose commit succeeded and whose answer was lost): a
// sink that can read the run back holds it as its entry at e's sequence
// with e's chain hash. The entry is then the run's, as appended: a resume
// finds it in the chain and must not take it for one the run never wrote.
//
// taken reports, when e is not kept, that the run holds another chained
// entry at e's sequence: another runtime (one that took the run over, or
// that the run was taken from) recorded there, and the append was the
// sink refusing a fork of the run's chain (ErrPositionTaken).
func (r *Run) kept(ctx context.Context, e TranscriptEntry) (kept, taken bool) {
	rd, ok := r.g.opts.Transcript.(TranscriptReader)
	if !ok {
		return false, false
	}
	es, err := rd.RunEntries(ctx, e.RunID)
	if err != nil || len(es) == 0 {
		return false, false
	}
	last := es[len(es)-1]
	if last.Seq == e.Seq && last.ChainHash == e.ChainHash && last.EntryHash == e.EntryHash {
		return true, false
	}
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].Seq == e.Seq && es[i].ChainHash != "" {
			return false, true
		}
	}
	return false, false
}

// detachedTimeout bounds a transcript append or an idempotency completion
// made after the caller's context is done: a call that ran is recorded.
const detachedTimeout = 30 * time.Second

// Policy returns a copy of the run-level policy result the gateway
// enforces: editing it changes nothing the run enforces or records.
func (r *Run) Policy() *policy.Evaluation { return r.base.Clone() }

func missing(have, want []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}
