package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/jsonv"
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
	// keeping the last DefaultMemoryTranscriptRuns runs (Gateway.Transcript
	// returns it).
	Transcript TranscriptSink
	// Redactors add to (or replace, by name) BuiltinRedactors.
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
}

// Gateway brokers every capability call: it holds the registered adapters
// and the stores, and checks, executes and records calls for runs. Safe for
// concurrent use.
type Gateway struct {
	opts     Options
	adapters map[string]*registered
	rules    map[string]Redactor
	tracer   trace.Tracer // nil when the provider is the no-op one
}

type registered struct {
	id      string
	adapter Adapter
	caps    map[string]*capSpec
}

type capSpec struct {
	Capability
	schema *jsonschema.Schema
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
		o.Transcript = NewMemoryTranscriptLimit(DefaultMemoryTranscriptRuns)
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
		for name, c := range reg.Capabilities {
			cs := &capSpec{Capability: c}
			if len(c.ArgsSchema) > 0 {
				s, err := compileSchema(reg.AdapterID+"."+name, c.ArgsSchema)
				if err != nil {
					return nil, fmt.Errorf("%w: %s.%s args schema: %v", ErrConfig, reg.AdapterID, name, err)
				}
				cs.schema = s
			}
			if c.CostCents < 0 || math.IsNaN(c.CostCents) || math.IsInf(c.CostCents, 0) {
				return nil, fmt.Errorf("%w: %s.%s cost must be a finite number of cents ≥ 0", ErrConfig, reg.AdapterID, name)
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

func deterministicJitter(id string, attempt int, d time.Duration) time.Duration {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * 1099511628211
	}
	h = (h ^ uint64(attempt)) * 1099511628211
	return d/2 + time.Duration(h%uint64(d/2+1))
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
	base    *policy.Result
	baseIDs string // digest of the run-level decision ids
	// runDecisionID names the run's policy evaluation: the decision a call
	// is bound to when the run's evaluation is the call's and no rule
	// decision of its own gates or denies it.
	runDecisionID string
	doc           policy.Document
	meter         *runcontext.Meter
	surfaced      map[string]*surfaced
	snapshot      string
	redact        []Redactor
	now           func() time.Time
	observe       func(Attempt) // nil when nothing observes the attempts
	usesTool      bool          // per-call policy evaluation can differ from the run's
	// principals and authRef are the run's principal chain and auth ref,
	// shared by its envelopes (which are read only once built).
	principals []runcontext.Principal
	members    *runMembers
	authRef    *string
	trace      runcontext.Trace // the run's trace context, parsed once

	mu   sync.Mutex
	seq  int
	prev string
}

type surfaced struct {
	spanName    string
	capName     string      // the capability's name within its adapter
	reg         *registered // nil when no adapter is registered under its id
	spec        *capSpec    // nil when the adapter does not register it
	meta        compiler.CapabilityMetadata
	perm        pack.Permission
	mode        runcontext.ApprovalMode // the adapter's declared (highest) mode
	constraints []argConstraint         // perm.ArgConstraints, compiled
}

// RunOptions tunes one run. The zero value uses the gateway's options.
type RunOptions struct {
	// Now is the run's clock (approval TTLs, latencies). Default: the
	// gateway's Options.Now. The runtime passes its per-run clock, so a
	// replay reads the same times.
	Now func() time.Time
	// Chain continues a resumed run's transcript chain where its
	// checkpoint left it. Default: a new chain.
	Chain *ChainState
	// Observe, when set, is told every adapter attempt of the run as the
	// gateway took it: checked, bounded and redacted (see Attempt). The
	// runtime's replay recorder observes here, above the redaction, so
	// what it keeps never holds an adapter's raw value. It is called on
	// the calling goroutine, once per attempt, in order.
	Observe func(Attempt)
}

// ChainState is where a run's transcript chain stands.
type ChainState struct {
	Seq  int    `json:"seq"`
	Hash string `json:"hash"`
}

// ChainState returns where the run's transcript chain stands.
func (r *Run) ChainState() ChainState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ChainState{Seq: r.seq, Hash: r.prev}
}

// NewRun binds a run. prepared and cc are the compile of req and rc; meter
// charges the run's budget; opts may be nil.
func (g *Gateway) NewRun(prepared *compiler.Prepared, cc *compiler.CompiledContext, req *runcontext.InvokeRequest, rc *runcontext.RunContext, meter *runcontext.Meter, opts *RunOptions) (*Run, error) {
	if prepared == nil || cc == nil || req == nil || rc == nil || meter == nil {
		return nil, fmt.Errorf("%w: NewRun needs the prepared packs, compiled context, request, run context and meter", ErrConfig)
	}
	r := &Run{g: g, cc: cc, rc: rc, req: req, pack: prepared.Pack(), engine: prepared.Engine(), meter: meter, surfaced: map[string]*surfaced{}, prev: GenesisHash, now: g.opts.Now}
	if opts != nil && opts.Now != nil {
		r.now = opts.Now
	}
	if opts != nil && opts.Chain != nil {
		r.seq, r.prev = opts.Chain.Seq, opts.Chain.Hash
	}
	if opts != nil {
		r.observe = opts.Observe
	}
	r.doc = policy.NewDocument(req.Input, rc)
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
	base, err := r.engine.Evaluate(policy.Input{RunID: rc.RunID, Data: r.doc})
	if err != nil {
		return nil, fmt.Errorf("gateway: run policy: %w", err)
	}
	r.base = base
	r.usesTool = r.engine.UsesTool()
	if r.baseIDs, err = decisionIDsDigest(base); err != nil {
		return nil, err
	}
	if r.runDecisionID, err = canon.IDOf(canon.PrefixPolicy, canon.StringPart(rc.RunID), canon.StringPart(r.baseIDs)); err != nil {
		return nil, err
	}
	adapterModes := map[string]runcontext.ApprovalMode{}
	for _, a := range r.pack.ToolingLayer.AdapterRegistry {
		adapterModes[a.AdapterID] = a.ApprovalMode
	}
	perms := pack.EffectivePermissions(r.pack) // an explicit deny wins over any allow
	for _, e := range cc.Manifests.ToolManifest {
		for _, c := range e.Capabilities {
			id := e.AdapterID + "." + c
			s := &surfaced{spanName: "execute_tool " + id, capName: c, reg: g.adapters[e.AdapterID], meta: e.CapabilityMetadata[c], perm: perms[id], mode: adapterModes[e.AdapterID],
				constraints: compileConstraints(perms[id].ArgConstraints)}
			if s.reg != nil {
				s.spec = s.reg.caps[c]
			}
			r.surfaced[id] = s
		}
	}
	if r.snapshot, err = canon.Digest(cc.Manifests.EvidenceManifest); err != nil {
		return nil, err
	}
	for _, name := range cc.RuntimeControls.RedactionRulesActive {
		rule, ok := g.rules[name]
		if !ok {
			return nil, fmt.Errorf("%w: redaction rule %q is active but not known (known: %s)", ErrConfig, name, joinKnown(g.rules))
		}
		r.redact = append(r.redact, rule)
	}
	return r, nil
}

// CallRequest is one plan step's tool call.
type CallRequest struct {
	CapabilityID string
	Args         map[string]any
	EvidenceRefs []string
	// IdempotencyKey is the plan's key for a write. The gateway never uses
	// it verbatim: the key it executes the write once under (and sets on
	// the envelope, in args.idempotency_key when the permission names it,
	// and in Call.IdempotencyKey) is derived from the run's tenant id, the
	// run id and this key, so runs and tenants that pick the same key do
	// not share a result, while a retry within the run does. When empty
	// the gateway derives one from the tenant id, the run id, the step,
	// the capability and the canonical arguments. Either way the same
	// inputs give the same key (resumes and replays reuse it).
	IdempotencyKey string
	// Step is the plan step's index in the run; it keys derived ids.
	Step int
	// ApprovalMode is the mode the planner requests ("" for the
	// capability's effective mode).
	ApprovalMode runcontext.ApprovalMode
	// Attachments names request attachments (artifact ids) the call uses.
	Attachments []string
	// Approval answers a paused call's approval request.
	Approval *Approval
}

// Call checks, executes and records one call. Refusals, pauses and
// failures are results, never adapter invocations. The error is non-nil
// when the result could not be recorded (ErrTranscript), a store failed,
// or the adapter panicked (ErrAdapterPanic); the result is still returned
// when there is one, and recorded when it could be (a panicked call's
// result is, as any failure's).
func (r *Run) Call(ctx context.Context, req CallRequest) (*ToolResultEnvelope, error) {
	start := r.now()
	env, s, res := r.envelope(req)
	// With the no-op provider there is no span to start: a no-op child
	// would only carry the parent's span context, which ctx carries.
	var span trace.Span
	recording := false
	if r.g.tracer != nil {
		name := "execute_tool " + req.CapabilityID
		if s != nil {
			name = s.spanName
		}
		ctx, span = r.g.tracer.Start(ctx, name, spanKindInternal)
		defer span.End()
		// Attributes are built only for a span that records.
		recording = span.IsRecording()
	}
	if recording {
		span.SetAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", req.CapabilityID),
			attribute.String("gen_ai.tool.call.id", env.ToolCallID),
			attribute.String("contextos.run_id", r.rc.RunID),
			attribute.String("contextos.tenant_id", r.rc.TenantID),
			attribute.String("contextos.compiled_context_hash", r.cc.Hash()),
		)
	}
	var err error
	if res == nil {
		res, err = r.govern(ctx, env, s, req)
	}
	res.LatencyMS = r.now().Sub(start).Milliseconds()
	if !res.recorded && !res.Metadata.Duplicate {
		// Refusals are results too: every call's outcome is in the transcript.
		if rerr := r.record(ctx, "result", env, res); rerr != nil && err == nil {
			err = rerr
		}
	}
	if recording {
		span.SetAttributes(attribute.String("contextos.tool.status", string(res.Status)), attribute.Int("contextos.tool.attempts", res.Metadata.Attempts))
		if res.PolicyDecisionID != nil {
			span.SetAttributes(attribute.String("contextos.policy_decision_id", *res.PolicyDecisionID))
		}
		if res.Error != nil {
			span.SetAttributes(attribute.String("contextos.tool.code", res.Error.Code))
			if !res.Status.Succeeded() && res.Status != StatusPaused {
				span.SetStatus(codes.Error, res.Error.Code)
			}
		}
	}
	if r.g.opts.Logger.Enabled(ctx, slog.LevelDebug) {
		r.g.opts.Logger.LogAttrs(ctx, slog.LevelDebug, "tool call", slog.String("run_id", r.rc.RunID), slog.String("tool_call_id", env.ToolCallID),
			slog.String("capability", req.CapabilityID), slog.String("status", string(res.Status)), slog.Int("attempts", res.Metadata.Attempts))
	}
	return res, err
}

// spanKindInternal is built once: an option made per call is an allocation.
var spanKindInternal = trace.WithSpanKind(trace.SpanKindInternal)

// envelope builds the call envelope and finds the capability in the run's
// tool manifest (nil when it is not surfaced); a malformed request yields
// a rejected result at once.
func (r *Run) envelope(req CallRequest) (*ToolCallEnvelope, *surfaced, *ToolResultEnvelope) {
	args, _ := jsonv.Normalize(req.Args).(map[string]any)
	// The arguments are encoded once: the tool-call id, the idempotency key,
	// the payload size and the transcript digest all use these bytes.
	argsJSON, err := canon.JSON(args)
	// The id is written after "tool:<capability>:", the evidence ref a
	// result cites by default: one string holds both.
	var buf [128]byte
	cite := append(append(append(buf[:0], "tool:"...), req.CapabilityID...), ':')
	b := cite
	if err == nil {
		b, err = canon.AppendIDOf(cite, canon.PrefixToolCall, canon.StringPart(r.rc.RunID), canon.IntPart(req.Step), canon.StringPart(req.CapabilityID), canon.RawPart(argsJSON))
	}
	if err != nil {
		argsJSON = nil
		b, _ = canon.AppendIDOf(cite, canon.PrefixToolCall, canon.StringPart(r.rc.RunID), canon.IntPart(req.Step), canon.StringPart(req.CapabilityID))
	}
	citeRef := string(b)
	id := citeRef[len(cite):]
	env := &ToolCallEnvelope{
		EnvelopeVersion: CallEnvelopeVersion, ToolCallID: id, RunID: r.rc.RunID, TraceID: r.rc.TraceID, SessionID: r.rc.SessionID,
		CapabilityID: req.CapabilityID, Args: args, PrincipalChain: r.principals, EvidenceRefs: slices.Clone(req.EvidenceRefs),
		ApprovalModeRequested: req.ApprovalMode, AuthRef: r.authRef, argsJSON: argsJSON, members: r.members, citeRef: citeRef,
	}
	if env.EvidenceRefs == nil {
		env.EvidenceRefs = []string{}
	}
	s := r.surfaced[req.CapabilityID]
	if s != nil {
		env.ApprovalModeEffective, env.ApprovalModeHighest = s.meta.ApprovalMode, s.mode
		if env.ApprovalModeRequested == "" {
			env.ApprovalModeRequested = s.meta.ApprovalMode
		}
		if s.perm.RequiresApprovalGate != "" {
			env.Metadata = map[string]any{"requires_approval_gate": s.perm.RequiresApprovalGate}
		}
	}
	if err != nil {
		return env, s, r.refuse(env, StatusRejected, NewToolError(CodeInvalidInput, false, "args have no canonical JSON form", nil), nil)
	}
	if _, _, ok := splitCapability(req.CapabilityID); !ok || req.Args == nil {
		return env, s, r.refuse(env, StatusRejected, NewToolError(CodeInvalidInput, false, "a call names adapter_id.capability and carries an args object", nil), nil)
	}
	return env, s, nil
}

// refuse builds a result for a call that never reached the adapter.
func (r *Run) refuse(env *ToolCallEnvelope, status Status, te *ToolError, polID *string) *ToolResultEnvelope {
	retryable := te.Retryable
	res := newResult(env, polID)
	res.Status, res.Error = status, te
	res.Metadata = ResultMetadata{ToolStatus: string(status), ToolCode: te.Code, ToolReason: te.Reason, Retryable: &retryable}
	return res
}

func (r *Run) govern(ctx context.Context, env *ToolCallEnvelope, s *surfaced, req CallRequest) (*ToolResultEnvelope, error) {
	// Surfaced in the compiled tool manifest, and registered.
	if s == nil {
		return r.refuse(env, StatusRejected, NewToolError(CodeUnsupportedTool, false,
			fmt.Sprintf("capability %s is not in the compiled tool manifest; surfaced: %s", env.CapabilityID, strings.Join(sortStrings(keys(r.surfaced)), ", ")), nil), nil), nil
	}
	reg, spec, capName := s.reg, s.spec, s.capName
	if spec == nil {
		return r.refuse(env, StatusRejected, NewToolError(CodeUnsupportedTool, false, fmt.Sprintf("no adapter is registered for %s", env.CapabilityID), nil), nil), nil
	}
	write := s.mode.IsWrite()
	// Idempotency key before any argument check.
	key := ""
	if write {
		k, err := r.idempotencyKey(env, req)
		if err != nil {
			return r.refuse(env, StatusRejected, NewToolError(CodeInvalidInput, false, "args have no canonical JSON form", nil), nil), nil
		}
		key = k
		env.IdempotencyKey = strPtr(key)
		if _, named := s.perm.ArgConstraints["idempotency_key"]; named {
			if _, has := env.Args["idempotency_key"]; !has {
				env.Args["idempotency_key"] = key
				env.argsJSON = nil
			}
		}
	}
	// Tenant and attachments.
	var attHashes []string
	for _, id := range req.Attachments {
		i := slices.IndexFunc(r.req.Attachments, func(a runcontext.Attachment) bool { return a.ArtifactID == id })
		if i < 0 || r.g.opts.AttachmentScope != nil && !r.g.opts.AttachmentScope(r.rc.TenantID, r.req.Attachments[i]) {
			return r.refuse(env, StatusRejected, NewToolError(CodePermissionDenied, false, fmt.Sprintf("attachment %q is not one of this tenant's request attachments", clip(id)), nil), nil), nil
		}
		a := r.req.Attachments[i]
		ref := "artifact:" + a.ArtifactID + "#" + strings.TrimPrefix(a.SHA256, "sha256:")
		env.EvidenceRefs = append(env.EvidenceRefs, ref)
		attHashes = append(attHashes, "sha256:"+strings.TrimPrefix(a.SHA256, "sha256:"))
	}
	for _, p := range env.PrincipalChain {
		if p.TenantID != "" && p.TenantID != r.rc.TenantID {
			return r.refuse(env, StatusRejected, NewToolError(CodePermissionDenied, false, "principal chain crosses tenants", nil), nil), nil
		}
	}
	// Arguments: JSON Schema, then the permission's constraints.
	if probs := validateArgs(spec.schema, env.Args, s.constraints); len(probs) > 0 {
		return r.refuse(env, StatusRejected, argsError(env.CapabilityID, probs), nil), nil
	}
	// Payload size.
	if max := r.rc.RunBudget.MaxPayloadBytes; max > 0 {
		if size, err := env.argsSize(); err != nil || size > max {
			return r.refuse(env, StatusRejected, NewToolError(CodeInvalidInput, false, fmt.Sprintf("args are larger than max_payload_bytes (%d); pass large payloads as attachments", max), map[string]any{"max_payload_bytes": max}), nil), nil
		}
	}
	// Per-call policy, bound into the envelope.
	res := r.base
	if r.usesTool {
		var err error
		res, err = r.engine.Evaluate(policy.Input{RunID: r.rc.RunID, Data: r.doc.WithTool(env.CapabilityID, env.Args, env.ApprovalModeRequested)})
		if err != nil {
			return r.refuse(env, StatusBlocked, NewToolError(CodeRuntimePolicyInvalid, false, "per-call policy evaluation failed closed: "+err.Error(), nil), nil), nil
		}
	}
	polID, blockedBy := r.bindPolicy(env, res, s, write)
	env.PolicyDecisionID = polID
	if blockedBy != "" {
		return r.refuse(env, StatusBlocked, NewToolError(CodePermissionDenied, false, blockedBy, nil), polID), nil
	}
	// Approval modes against the run's safety mode.
	for _, m := range []struct {
		name string
		mode runcontext.ApprovalMode
	}{{"requested", env.ApprovalModeRequested}, {"effective", env.ApprovalModeEffective}, {"highest", env.ApprovalModeHighest}} {
		if !m.mode.AtMost(r.rc.SafetyMode) {
			return r.refuse(env, StatusBlocked, NewToolError(CodePermissionDenied, false, fmt.Sprintf("%s approval mode %s is above the run's safety mode %s", m.name, m.mode, r.rc.SafetyMode), nil), polID), nil
		}
	}
	// Delegated identity.
	var delegation *runcontext.Delegation
	if env.ApprovalModeEffective.Compare(runcontext.Delegated) >= 0 {
		d := r.rc.User.Delegation
		switch {
		case d == nil:
			return r.refuse(env, StatusBlocked, NewToolError(CodePermissionDenied, false, fmt.Sprintf("a %s call needs a user delegation and the run has none", env.ApprovalModeEffective), nil), polID), nil
		case strings.TrimSpace(d.TokenRef) == "":
			// Seed 000: every delegated call carries the user's delegation
			// token reference, which the adapter exchanges for a token.
			return r.refuse(env, StatusBlocked, NewToolError(CodePermissionDenied, false, fmt.Sprintf("a %s call needs the user delegation's token_ref and it is empty", env.ApprovalModeEffective),
				map[string]any{"field": "user.delegation.token_ref"}), polID), nil
		case !d.HasScopes(spec.Scopes...):
			return r.refuse(env, StatusBlocked, NewToolError(CodePermissionDenied, false, fmt.Sprintf("the user delegation lacks scopes %v that %s needs", missing(d.Scopes, spec.Scopes), env.CapabilityID), nil), polID), nil
		}
		delegation = d
	}
	// Budget left.
	callsLeft, costLeft := r.meter.Left()
	if callsLeft <= 0 {
		return r.refuse(env, StatusBlocked, NewToolError(CodeRuntimePolicyInvalid, false, fmt.Sprintf("tool-call budget exhausted (max_tool_calls %d)", r.rc.RunBudget.MaxToolCalls), map[string]any{"dimension": runcontext.DimToolCalls}), polID), nil
	}
	if spec.CostCents > costLeft {
		return r.refuse(env, StatusBlocked, NewToolError(CodeRuntimePolicyInvalid, false, fmt.Sprintf("cost budget exhausted (%.4g cents left, the call costs %.4g)", costLeft, spec.CostCents), map[string]any{"dimension": runcontext.DimCost}), polID), nil
	}
	// Approval gate. What the approval and the attachments add to the
	// result's metadata is set before the result is recorded, so the
	// transcript carries it.
	meta := ResultMetadata{EvidenceHashes: attHashes}
	if gate := s.perm.RequiresApprovalGate; gate != "" && slices.Contains(r.cc.RuntimeControls.ApprovalGatesActive, gate) {
		out, who, err := r.checkApproval(ctx, env, req.Approval, gate, key)
		if err != nil {
			return out, err
		}
		if out != nil {
			return out, r.record(ctx, "result", env, out)
		}
		meta.Approver, meta.ApprovalID, meta.ApprovalGateID, meta.ApprovedAt = who, req.Approval.ApprovalID, gate, req.Approval.DecidedAt.UTC().Format(time.RFC3339)
		meta.ApprovalEvidenceSnapshotHash = r.snapshot
	}
	// Execute once per idempotency key.
	if write {
		prior, claimed, err := r.g.opts.Idempotency.Claim(ctx, key)
		if err != nil {
			return r.refuse(env, StatusFailed, NewToolError(CodeExecutionFailed, true, "idempotency store unavailable", nil), polID), fmt.Errorf("gateway: idempotency claim: %w", err)
		}
		if !claimed {
			dup := *prior
			dup.Metadata.Duplicate = true
			return &dup, nil
		}
	}
	out, err := r.execute(ctx, env, reg.adapter, spec, capName, key, delegation, polID, meta)
	if write {
		// Writes keep their result whatever it is (a panicked adapter's
		// too): a retry with the same key never runs the effect twice. The
		// store gets its own copy: this call goes on to set its latency
		// while duplicates read theirs.
		kept := *out
		cctx := ctx
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), detachedTimeout)
			defer cancel()
		}
		if cerr := r.g.opts.Idempotency.Complete(cctx, key, &kept); cerr != nil {
			cerr = fmt.Errorf("gateway: idempotency complete: %w", cerr)
			if err == nil {
				err = cerr
			} else {
				err = errors.Join(err, cerr)
			}
		}
	}
	return out, err
}

// idempotencyKey returns the key a write is executed once under, scoped to
// the run's tenant and run: from the caller's key when it gives one, else
// from the step, the capability and the canonical arguments. Two tenants
// (run ids can be host-chosen) or two runs that pick the same caller key
// never share a result; the same inputs always give the same key, so a
// retry, a resume and a replay use it again.
func (r *Run) idempotencyKey(env *ToolCallEnvelope, req CallRequest) (string, error) {
	// The arguments are part of every key: a caller key reused with other
	// arguments names another action (it never answers with the first
	// action's result), and the same write proposed again in a later turn
	// of the run is the same action (it never runs twice).
	if req.IdempotencyKey != "" {
		return canon.IDOf(canon.PrefixIdem, canon.StringPart(r.rc.TenantID), canon.StringPart(r.rc.RunID), canon.StringPart(req.IdempotencyKey), canon.StringPart(env.CapabilityID), canon.RawPart(env.argsJSON))
	}
	return canon.IDOf(canon.PrefixIdem, canon.StringPart(r.rc.TenantID), canon.StringPart(r.rc.RunID), canon.StringPart(env.CapabilityID), canon.RawPart(env.argsJSON))
}

// bindPolicy picks the policy decision the call is bound to and says why
// policy blocks it, if it does: a refusal blocks every call; a deny or an
// escalation blocks write-class calls.
func (r *Run) bindPolicy(env *ToolCallEnvelope, res *policy.Result, s *surfaced, write bool) (*string, string) {
	switch {
	case res.Verdict == policy.VerdictRefuse:
		return r.callDecisionID(env, res), fmt.Sprintf("must_refuse guardrail %v fired; no tool calls are allowed", res.Raised.MustRefuse)
	case write && res.Verdict == policy.VerdictEscalate:
		return r.callDecisionID(env, res), fmt.Sprintf("must_escalate guardrail %v fired; write-class calls are blocked", res.Raised.MustEscalate)
	}
	if write {
		for _, d := range res.Decisions {
			if d.Outcome == policy.Deny {
				id := d.PolicyDecisionID
				return &id, fmt.Sprintf("policy rule %s denied: %s", d.RuleID, d.Reason)
			}
		}
	}
	for _, d := range res.Decisions {
		if d.RequiresApprovalGate != "" && d.RequiresApprovalGate == s.perm.RequiresApprovalGate {
			id := d.PolicyDecisionID
			return &id, ""
		}
	}
	return r.callDecisionID(env, res), ""
}

// callDecisionID names the evaluation a call is bound to when no rule
// decision of its own applies: the run's (one id per run, from the run and
// its decision ids) when the policy does not read the tool, else the
// call's own (from the run, the call and the decisions that applied).
func (r *Run) callDecisionID(env *ToolCallEnvelope, res *policy.Result) *string {
	if res == r.base {
		id := r.runDecisionID // each envelope its own copy
		return &id
	}
	digest, err := decisionIDsDigest(res)
	if err != nil {
		return nil
	}
	id, err := canon.IDOf(canon.PrefixPolicy, canon.StringPart(r.rc.RunID), canon.StringPart(env.ToolCallID), canon.StringPart(digest))
	if err != nil {
		return nil
	}
	return &id
}

func decisionIDsDigest(res *policy.Result) (string, error) {
	ids := make([]string, len(res.Decisions))
	for i, d := range res.Decisions {
		ids[i] = d.PolicyDecisionID
	}
	return canon.Digest(ids)
}

func (r *Run) checkApproval(ctx context.Context, env *ToolCallEnvelope, a *Approval, gateID, key string) (*ToolResultEnvelope, string, error) {
	var gate pack.ApprovalGate
	for _, g := range r.pack.PolicyLayer.ApprovalGates {
		if g.GateID == gateID {
			gate = g
		}
	}
	digest, err := ActionDigest(env.CapabilityID, env.Args, r.cc.Hash(), gateID)
	if err != nil {
		return r.refuse(env, StatusRejected, NewToolError(CodeInvalidInput, false, "args have no canonical JSON form", nil), env.PolicyDecisionID), "", nil
	}
	now := r.now()
	if a == nil {
		res := r.refuse(env, StatusPaused, NewToolError(CodeApprovalPending, false, fmt.Sprintf("awaiting approval on %s by a %s", gateID, gate.RequiredApproverRole), nil), env.PolicyDecisionID)
		res.Approval = &ApprovalRequest{GateID: gateID, ApproverRole: gate.RequiredApproverRole, TTLSeconds: gate.TTLSeconds, ActionDigest: digest,
			EvidenceSnapshotHash: r.snapshot, ToolCallID: env.ToolCallID, IdempotencyKey: key, RequestedAt: now.UTC()}
		return res, "", nil
	}
	deny := func(code, msg string) (*ToolResultEnvelope, string, error) {
		return r.refuse(env, StatusBlocked, NewToolError(code, false, msg, map[string]any{"gate_id": gateID}), env.PolicyDecisionID), "", nil
	}
	switch {
	case strings.TrimSpace(a.ApprovalID) == "":
		return deny(CodeApprovalDenied, "the approval has no approval_id (each approval is identified, and used once)")
	case strings.TrimSpace(a.Approver) == "":
		return deny(CodeApprovalDenied, "the approval names no approver")
	case a.GateID != gateID:
		return deny(CodeApprovalDenied, fmt.Sprintf("the approval is for gate %s, not %s", clip(a.GateID), gateID))
	case a.ActionDigest != digest:
		return deny(CodeApprovalDenied, "the approval names another action (capability, arguments, compiled context or gate differ)")
	case a.Denied:
		return deny(CodeApprovalDenied, "the approver denied the action")
	case a.ApproverRole != gate.RequiredApproverRole:
		return deny(CodeApprovalDenied, fmt.Sprintf("the approver's role %q is not %s", clip(a.ApproverRole), gate.RequiredApproverRole))
	case strings.EqualFold(strings.TrimSpace(a.Approver), strings.TrimSpace(r.rc.User.UserID)) && !gate.AllowSelfApproval:
		return deny(CodeApprovalDenied, fmt.Sprintf("the approver is the run's requesting user; gate %s needs someone else", gateID))
	case a.DecidedAt.After(now) || !now.Before(a.DecidedAt.Add(time.Duration(gate.TTLSeconds)*time.Second)):
		return deny(CodeApprovalTimeout, fmt.Sprintf("the approval is outside its %ds TTL", gate.TTLSeconds))
	}
	// Approval ids are used once per tenant: another tenant's id never
	// spends this one.
	if err := r.g.opts.Approvals.Consume(ctx, r.rc.TenantID+"/"+a.ApprovalID); err != nil {
		if errors.Is(err, ErrApprovalUsed) {
			return deny(CodeApprovalDenied, "the approval was already used")
		}
		return r.refuse(env, StatusFailed, NewToolError(CodeExecutionFailed, true, "approval log unavailable", nil), env.PolicyDecisionID), "", fmt.Errorf("gateway: approval log: %w", err)
	}
	return nil, a.Approver, nil
}

// execute records the call, runs the attempts and records the result,
// whose metadata starts from meta.
func (r *Run) execute(ctx context.Context, env *ToolCallEnvelope, ad Adapter, spec *capSpec, capName, key string, delegation *runcontext.Delegation, polID *string, meta ResultMetadata) (*ToolResultEnvelope, error) {
	if err := r.meter.ChargeToolCall(); err != nil {
		return r.refuse(env, StatusBlocked, NewToolError(CodeRuntimePolicyInvalid, false, err.Error(), map[string]any{"dimension": runcontext.DimToolCalls}), polID), nil
	}
	if err := r.record(ctx, "call", env, nil); err != nil {
		return r.refuse(env, StatusFailed, NewToolError(CodeExecutionFailed, true, "the call could not be recorded, so it was not run", nil), polID), err
	}
	x := &executed{call: Call{Envelope: env, Capability: capName, IdempotencyKey: key, Trace: r.trace, Delegation: delegation}}
	call := &x.call
	var out *Outcome
	var te *ToolError
	panicked := false
	attempts := 0
	cost := 0.0
	invalid := false  // the adapter's outcome was refused as invalid
	redacted := false // redaction changed the attempt's outcome or error
	for attempt := 1; ; attempt++ {
		attempts = attempt
		call.Attempt = attempt
		out, te, panicked = r.attempt(ctx, ad, call, spec.Timeout, spec.HonorsContext)
		canceled := ctx.Err() != nil
		cost = addCost(cost, spec.CostCents)
		t := r.take(ad, call, out, te, &x.outcome)
		out, te, redacted, invalid = t.out, t.te, t.redacted, t.invalid != nil
		cost = addCost(cost, t.cost)
		if r.observe != nil {
			a := Attempt{RunID: env.RunID, ToolCallID: env.ToolCallID, CapabilityID: env.CapabilityID, Attempt: attempt,
				Outcome: out, Error: te, Panicked: panicked, Invalid: t.invalid, Canceled: canceled, Redacted: redacted}
			switch {
			case panicked:
				a.Error = nil
			case invalid:
				// What is left of an invalid outcome: its cost, when finite.
				a.Error, a.Outcome = nil, &Outcome{CostCents: t.cost}
			}
			r.observe(a)
		}
		if te == nil || !te.Retryable || attempt >= spec.MaxAttempts || canceled || stopsRetrying(ad, call) {
			break
		}
		var wait time.Duration
		if spec.Backoff != nil {
			wait = spec.Backoff(env.ToolCallID, attempt)
		} else {
			wait = r.g.opts.Jitter(env.ToolCallID, attempt, min(r.g.opts.BaseBackoff<<(attempt-1), r.g.opts.MaxBackoff))
		}
		if err := r.g.opts.Sleep(ctx, wait); err != nil {
			te, invalid, redacted = NewToolError(CodeCanceled, false, "canceled while waiting to retry", nil), false, false
			break
		}
	}
	// The attempts were made: their cost is charged whatever the budget
	// says. A cost that takes the run over its budget leaves the meter
	// Exceeded, which the runtime checks after every call; the call's
	// result stands (its side effect happened).
	_ = r.meter.ChargeIncurredCost(cost)
	res := startResult(&x.results, env, polID)
	res.Metadata = meta
	res.Metadata.Attempts, res.Metadata.Retries, res.Metadata.CostCents, res.Metadata.IdempotencyKey = attempts, attempts-1, cost, key
	res.Metadata.RedactionApplied = redacted
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
			x.cite[0] = Citation{EvidenceRef: env.citeRef}
			res.Citations = x.cite[:]
		}
	}
	err := r.record(ctx, "result", env, res)
	if panicked {
		perr := fmt.Errorf("%w: %s (tool call %s, attempt %d)", ErrAdapterPanic, env.CapabilityID, env.ToolCallID, attempts)
		if err == nil {
			err = perr
		} else {
			err = errors.Join(perr, err)
		}
	}
	return res, err
}

// taken is one attempt as the gateway goes on with it.
type taken struct {
	out      *Outcome   // the redacted outcome, or nil
	te       *ToolError // the attempt's error, redacted and bounded, or nil
	invalid  []string   // what made the outcome invalid (te refuses it)
	cost     float64    // the outcome's cost to charge
	redacted bool       // redaction changed the outcome or the error
}

// take checks, bounds and redacts one attempt's outcome or error, right
// after the attempt, so nothing that follows (the result, the transcript,
// an observer) sees the adapter's raw value. An outcome the gateway
// refuses is not kept: it becomes the refusal's error, and only its cost
// is charged (not when the outcome is larger than max_payload_bytes: such
// an outcome is not read further). Results are bounded by the run
// budget's max_payload_bytes, or runcontext.DefaultMaxPayloadBytes when it
// sets none.
func (r *Run) take(ad Adapter, call *Call, out *Outcome, te *ToolError, dst *Outcome) taken {
	var t taken
	max := r.rc.RunBudget.MaxPayloadBytes
	if max <= 0 {
		// Results are bounded even when the run's budget sets no limit.
		max = runcontext.DefaultMaxPayloadBytes
	}
	switch {
	case out != nil:
		refusal, bad := checkOutcome(out, max)
		if refusal == nil || bad != nil {
			if validCost(out.CostCents) {
				t.cost = out.CostCents
			}
		}
		if refusal != nil {
			t.te, t.invalid = refusal, bad
		} else {
			// A taken outcome ends the call's attempts: dst holds it.
			t.out, t.redacted = dst, redactOutcome(dst, out, r.redact)
		}
	case te != nil:
		t.te = boundError(te, max)
		t.redacted = redactError(t.te, r.redact)
	}
	t.redacted = t.redacted || reportsRedaction(ad, call)
	return t
}

func validCost(c float64) bool { return c >= 0 && !math.IsInf(c, 1) } // false for NaN too

// RetryStopper is an optional interface of an Adapter that knows, after an
// attempt, that no further attempt may be made: replay's playback stops
// where the recorded run stopped retrying (its caller had gone).
type RetryStopper interface {
	StopRetrying(call *Call) bool
}

func stopsRetrying(ad Adapter, call *Call) bool {
	rs, ok := ad.(RetryStopper)
	return ok && rs.StopRetrying(call)
}

// addCost adds finite costs ≥ 0, saturating at the largest float64 (as the
// meter does), so a sum is always a cost the meter and the record take.
func addCost(a, b float64) float64 { return min(a+b, math.MaxFloat64) }

// executed is what an executed call allocates, in one allocation: the
// Call its adapter gets, the redacted copy of the outcome it took, its
// result and the result's transcript copy, and the result's default
// citation.
type executed struct {
	call    Call
	outcome Outcome
	results [2]ToolResultEnvelope
	cite    [1]Citation
}

// newResult starts a result for env with every list present (empty, never
// null), so results always have the same shape. The result and the copy
// its transcript entry will hold are one allocation.
func newResult(env *ToolCallEnvelope, polID *string) *ToolResultEnvelope {
	return startResult(new([2]ToolResultEnvelope), env, polID)
}

// startResult starts a result in pair[0], pair[1] left for its transcript
// copy.
func startResult(pair *[2]ToolResultEnvelope, env *ToolCallEnvelope, polID *string) *ToolResultEnvelope {
	pair[0] = ToolResultEnvelope{EnvelopeVersion: ResultEnvelopeVersion, ToolCallID: env.ToolCallID, RunID: env.RunID, TraceID: env.TraceID,
		SessionID: env.SessionID, CapabilityID: env.CapabilityID, PolicyDecisionID: polID, members: env.members,
		Artifacts: []string{}, Citations: []Citation{}, Mutations: []string{}, RiskTags: []string{}, entry: &pair[1]}
	return &pair[0]
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
func (r *Run) attempt(ctx context.Context, ad Adapter, call *Call, timeout time.Duration, honorsContext bool) (_ *Outcome, _ *ToolError, panicked bool) {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var res adapterResult
	if honorsContext {
		res = r.callAdapter(actx, ad, call)
	} else {
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
		if actx.Err() != nil && ctx.Err() == nil && errors.Is(res.err, context.DeadlineExceeded) {
			return nil, contextError(ctx, timeout), false
		}
		var te *ToolError
		if errors.As(res.err, &te) {
			c := *te
			if c.Reason == "" {
				c.Reason = ReasonFor(c.Code)
			}
			if c.Details == nil {
				c.Details = map[string]any{}
			}
			return nil, &c, false
		}
		if errors.Is(res.err, context.Canceled) || errors.Is(res.err, context.DeadlineExceeded) {
			return nil, contextError(ctx, timeout), false
		}
		// A plain error's text may carry backend output; it is not echoed.
		return nil, NewToolError(CodeExecutionFailed, false, "the adapter failed", nil), false
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

// record appends a transcript entry and advances the run's chain.
func (r *Run) record(ctx context.Context, kind string, env *ToolCallEnvelope, res *ToolResultEnvelope) error {
	// The entry hash and the chain hash are written side by side and made
	// one string: one allocation for both.
	var hashes [2*canon.DigestLen + 48]byte // and room for a result's transcript id
	var b []byte
	var err error
	if kind == "call" {
		b, err = canon.AppendDigestOf(hashes[:0], callWithArgs{env})
	} else {
		b, err = canon.AppendDigestOf(hashes[:0], resultOfRun{res})
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTranscript, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b = appendChain(b, r.prev, b)
	if kind != "call" {
		// The result's transcript id (run#seq) joins the hashes' string.
		b = strconv.AppendInt(append(append(b, r.rc.RunID...), '#'), int64(r.seq), 10)
	}
	all := string(b)
	e := TranscriptEntry{RunID: r.rc.RunID, Seq: r.seq, Kind: kind, EntryHash: all[:canon.DigestLen], PrevHash: r.prev, ChainHash: all[canon.DigestLen : 2*canon.DigestLen]}
	if kind == "call" {
		// The call entry is the envelope itself: nothing changes it once it
		// is recorded (adapters get it read-only; see Call.Envelope).
		e.Call = env
	} else {
		// Every result is started by newResult or startResult, which
		// allocate its transcript copy with it.
		c := res.entry
		*c = *res
		c.entry, res.entry = nil, nil // used once: a later copy of res must not write into it
		e.Result = c
		// The transcript id and the recorded mark are set after the entry is
		// hashed and copied: they point at the entry, not into it.
		res.Metadata.ToolTranscriptID = all[2*canon.DigestLen:]
		res.recorded = true
	}
	if ctx.Err() != nil {
		// What ran is recorded even when the caller has gone.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), detachedTimeout)
		defer cancel()
	}
	if err := r.g.opts.Transcript.Append(ctx, e); err != nil {
		return fmt.Errorf("%w: %v", ErrTranscript, err)
	}
	r.seq++
	r.prev = e.ChainHash
	return nil
}

// detachedTimeout bounds a transcript append or an idempotency completion
// made after the caller's context is done: a call that ran is recorded.
const detachedTimeout = 30 * time.Second

// ChainHash returns the run's transcript chain hash so far
// (tool_transcript_chain_hash).
func (r *Run) ChainHash() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.prev
}

// Policy returns the run-level policy result the gateway enforces.
func (r *Run) Policy() *policy.Result { return r.base }

// Surfaced reports whether a capability is in the run's tool manifest.
func (r *Run) Surfaced(capabilityID string) bool { _, ok := r.surfaced[capabilityID]; return ok }

func missing(have, want []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sortStrings(s []string) []string { sort.Strings(s); return s }
