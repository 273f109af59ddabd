package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// CallRequest is one plan step's tool call.
type CallRequest struct {
	CapabilityID string
	Args         map[string]any
	EvidenceRefs []string
	// IdempotencyKey is the plan's key for a write. The gateway never uses
	// it verbatim: the key it executes the write once under (and sets on
	// the envelope, in Call.IdempotencyKey, and in args.idempotency_key
	// when the capability's schema declares that argument or the
	// permission names it and the schema admits it) is derived from the
	// run's tenant id, the run id, this key, the capability and the
	// canonical arguments, so runs and tenants that pick the same key do
	// not share a result, while a retry within the run does. When empty
	// the gateway derives one from the tenant id, the run id, the
	// capability and the canonical arguments (not the step: the same write
	// proposed again later in the run is the same action). Either way the
	// same inputs give the same key (resumes and replays reuse it).
	IdempotencyKey string
	// Step is the plan step the call makes; it keys the call's derived
	// tool_call_id.
	Step StepID
	// ApprovalMode is the mode the planner requests ("" for the
	// capability's effective mode).
	ApprovalMode runcontext.ApprovalMode
	// Attachments names request attachments (artifact ids) the call uses.
	Attachments []string
	// Approval answers a paused call's approval request.
	Approval *Approval
	// ApprovalRequest is the request Approval answers: the pause of this
	// call being resumed. Once it is as old as its gate's ttl_seconds the
	// approval cannot be used (blocked, approval_timeout). The gateway
	// reads it only for the call and gate it names.
	ApprovalRequest *ApprovalRequest
}

// StepID names a plan step within a run: Index is the step's index in
// the plan made at turn Turn. A call's tool_call_id is derived from the run
// id, the step, the capability and the canonical arguments.
//
// The step enters that derivation as the single number Turn*1000+Index,
// which is what runs recorded before StepID existed used: their ids, and
// the replay packets that hold them, stay valid. A plan therefore has at
// most 1000 steps per turn: a call whose Index is outside [0, 999] (or
// whose Turn is negative or too large) is rejected (invalid_input, with
// details.field "step") instead of sharing another step's ids.
type StepID struct {
	Turn, Index int
}

// maxStepsPerTurn is the step-index radix of the derived ids.
const maxStepsPerTurn = 1000

// key returns the number the step's derived ids are keyed by, and false
// when the step is out of range.
func (s StepID) key() (int, bool) {
	if s.Index < 0 || s.Index >= maxStepsPerTurn || s.Turn < 0 || s.Turn > (math.MaxInt-maxStepsPerTurn)/maxStepsPerTurn {
		return 0, false
	}
	return s.Turn*maxStepsPerTurn + s.Index, true
}

// callRecord is what the gateway keeps about one call besides its wire
// envelope: the envelope's cached encodings, the call's own policy
// decisions, and what the checks settled on the way to the adapter. It
// never leaves the gateway; the envelope is its first member, so the two
// are one allocation.
type callRecord struct {
	env ToolCallEnvelope
	s   *surfaced // nil when the capability is not surfaced
	// What the checks read of the request besides the envelope.
	attachments []string
	callerKey   string
	approval    *Approval
	request     *ApprovalRequest
	// m is the run's constant members, encoded once (see runMembers).
	m *runMembers
	// args holds the canonical form of env.Args as the gateway built it
	// (nil when not known) while the call is made: a buffer from argsBufs
	// (see argsJSON). A check that changes the args encodes them again.
	args *[]byte
	// citeRef is "tool:<capability_id>:<tool_call_id>", the evidence ref a
	// result cites when the adapter cites nothing (ToolCallID is its tail).
	citeRef string
	// eval is the call's own policy evaluation (nil when the call is
	// bound to the run's).
	eval *policy.Evaluation

	// What the checks settled, for the ones after them and the execution.
	write bool // the capability's highest mode is write-class
	// argsFlat: env.Args holds only JSON scalars (the checks only ever set
	// a string member in it, the injected idempotency key), so a copy of
	// the map is a deep copy. outFlat: the output of the result x.res
	// holds only JSON scalars (see redactOutcome). Both sit in write's
	// padding: the record keeps its size class.
	argsFlat, outFlat bool
	key               string                 // a write's derived idempotency key
	attHashes         []string               // the used attachments' hashes
	delegation        *runcontext.Delegation // the user's, for a delegated call
	approved          *ResultMetadata        // what an approval adds to the result's metadata (nil: none)

	// polID holds the run's policy decision id when the call is bound to
	// it (env.PolicyDecisionID then points here); keyCopy a write's
	// idempotency key for env.IdempotencyKey (a copy: key is what the
	// call is executed under, whatever a sink does to the envelope).
	polID, keyCopy string
	// x is what executing the call takes (see executed): part of the
	// record, so a call that runs makes one allocation for both.
	x executed
	// sink is the envelope the call's transcript entry carries, with room
	// for what it owns (see sinkEnvelope).
	sink ownedCall
}

// metaJSON is the canonical form of env.Metadata, which the run's calls
// of one capability share (nil when the capability is not surfaced).
func (c *callRecord) metaJSON() []byte {
	if c.s == nil {
		return nil
	}
	return c.s.callMetaJSON
}

// argsBufs pools the buffers calls encode their arguments into. The
// encoding is read only while the call is made (its ids, its idempotency
// key, its size and its transcript entry), so Call gives the buffer back
// when it returns instead of keeping it in the call's record, which
// outlives the call (the result points into it).
var argsBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// maxPooledArgs bounds the buffers argsBufs keeps.
const maxPooledArgs = 16 << 10

// argsJSON is the canonical form of env.Args as the gateway built it, nil
// when not known (it is then encoded afresh where it is needed).
func (c *callRecord) argsJSON() []byte {
	if c.args == nil {
		return nil
	}
	return *c.args
}

// releaseArgs gives the call's argument buffer back (see argsBufs): from
// now on the encoding is not known.
func (c *callRecord) releaseArgs() {
	b := c.args
	if b == nil {
		return
	}
	c.args = nil
	if cap(*b) > maxPooledArgs {
		return // left to the collector
	}
	*b = (*b)[:0]
	argsBufs.Put(b)
}

// decisions are the decisions of the call's own policy evaluation, nil
// when the call is bound to the run's.
func (c *callRecord) decisions() []policy.Decision {
	if c.eval == nil {
		return nil
	}
	return c.eval.Decisions
}

// Call checks, executes and records one call. Refusals, pauses and
// failures are results, never adapter invocations. The error is non-nil
// when the result could not be recorded (ErrTranscript), a store failed,
// or the adapter panicked (ErrAdapterPanic); the result is still returned
// when there is one, and recorded when it could be (a panicked call's
// result is, as any failure's).
func (r *Run) Call(ctx context.Context, req CallRequest) (*ToolResultEnvelope, error) {
	start := r.now()
	c, res := r.envelope(req)
	defer c.releaseArgs()
	// With the no-op provider there is no span to start: a no-op child
	// would only carry the parent's span context, which ctx carries.
	var span trace.Span
	recording := false
	if r.g.tracer != nil {
		name := "execute_tool " + req.CapabilityID
		if c.s != nil {
			name = c.s.spanName
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
			attribute.String("gen_ai.tool.call.id", c.env.ToolCallID),
			attribute.String("contextos.run_id", r.rc.RunID),
			attribute.String("contextos.tenant_id", r.rc.TenantID),
			attribute.String("contextos.compiled_context_hash", r.cc.Hash()),
		)
	}
	var err error
	if res == nil {
		res, err = r.govern(ctx, c)
	}
	out := &res.env
	// A clock that went back measures no negative duration.
	out.LatencyMS = max(r.now().Sub(start).Milliseconds(), 0)
	if !res.recorded && !res.abandoned && !out.Metadata.Duplicate {
		// Refusals are results too: every call's outcome is in the
		// transcript, while the run is this runtime's (holdRefusal).
		if herr := r.holdRefusal(ctx, res); herr != nil {
			err = joinErr(err, herr)
		} else if _, rerr := r.record(ctx, c, res); rerr != nil && err == nil {
			err = rerr
		}
	}
	r.keepDecisions(out.ToolCallID, c.decisions(), out.Metadata.Duplicate)
	if recording {
		span.SetAttributes(attribute.String("contextos.tool.status", string(out.Status)), attribute.Int("contextos.tool.attempts", out.Metadata.Attempts))
		if out.PolicyDecisionID != nil {
			span.SetAttributes(attribute.String("contextos.policy_decision_id", *out.PolicyDecisionID))
		}
		if out.Error != nil {
			span.SetAttributes(attribute.String("contextos.tool.code", out.Error.Code))
			if !out.Status.Succeeded() && out.Status != StatusPaused {
				span.SetStatus(codes.Error, out.Error.Code)
			}
		}
	}
	if r.g.opts.Logger.Enabled(ctx, slog.LevelDebug) {
		r.g.opts.Logger.LogAttrs(ctx, slog.LevelDebug, "tool call", slog.String("run_id", r.rc.RunID), slog.String("tool_call_id", c.env.ToolCallID),
			slog.String("capability", req.CapabilityID), slog.String("status", string(out.Status)), slog.Int("attempts", out.Metadata.Attempts))
	}
	return out, err
}

// spanKindInternal is built once: an option made per call is an allocation.
var spanKindInternal = trace.WithSpanKind(trace.SpanKindInternal)

// keepDecisions keeps a call's own policy decisions for CallDecisions;
// a later call with the same id refused before policy ran (no decisions)
// never erases them. A duplicate's result names the call that ran first: what that call kept
// stands, and the duplicate's evaluation is kept only when the run has
// nothing for it (the first call ran before a resume).
func (r *Run) keepDecisions(toolCallID string, ds []policy.Decision, duplicate bool) {
	if ds == nil {
		// A call refused before policy ran (or bound to the run's
		// evaluation) has no decisions of its own; a call with the same id
		// that did run keeps its own.
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.decisions[toolCallID]; ok && duplicate {
		return
	}
	if r.decisions == nil {
		r.decisions = map[string][]policy.Decision{}
	}
	r.decisions[toolCallID] = ds
}

// CallDecisions returns the decisions of the policy evaluation of the
// run's call toolCallID (a result's ToolCallID): one per rule that applied
// to the call (its applies_to matched the call's tool.* data), in the
// policy's rule order. It is nil when the pack's policy reads no tool data
// (every call is bound to the run's evaluation, whose decisions are the
// compiled context's policy_results), the call was refused before policy
// was evaluated, or the run made no such call. The slice is the caller's
// own copy.
func (r *Run) CallDecisions(toolCallID string) []policy.Decision {
	r.mu.Lock()
	ds := r.decisions[toolCallID]
	r.mu.Unlock()
	if ds == nil {
		return nil
	}
	out := make([]policy.Decision, len(ds))
	for i, d := range ds {
		out[i] = d.Clone()
	}
	return out
}

// envelope builds the call's record and envelope and finds the capability
// in the run's tool manifest (nil when it is not surfaced); a malformed
// request yields a rejected result at once.
func (r *Run) envelope(req CallRequest) (*callRecord, *result) {
	c := &callRecord{attachments: req.Attachments, callerKey: req.IdempotencyKey, approval: req.Approval, request: req.ApprovalRequest, m: r.members}
	// A map whose members are all JSON scalars is normalized by copying it
	// (jsonv.Normalize's own path for it); the record remembers that its
	// copy is flat, so the adapter's copy (execute) needs no second look.
	var args map[string]any
	if req.Args != nil && jsonv.Flat(req.Args) {
		args, c.argsFlat = maps.Clone(req.Args), true
	} else {
		args, _ = jsonv.Normalize(req.Args).(map[string]any)
	}
	// The arguments are encoded once: the tool-call id, the idempotency key,
	// the payload size and the transcript digest all use these bytes.
	c.args = argsBufs.Get().(*[]byte)
	argsJSON, err := canon.AppendValue((*c.args)[:0], args)
	step, stepOK := req.Step.key()
	stepPart := canon.IntPart(step)
	if !stepOK {
		// Refused below; its id must not be another step's.
		stepPart = canon.StringPart(fmt.Sprintf("step %d.%d", req.Step.Turn, req.Step.Index))
	}
	// The id is written after "tool:<capability>:", the evidence ref a
	// result cites by default: one string holds both.
	var buf [128]byte
	cite := append(append(append(buf[:0], "tool:"...), req.CapabilityID...), ':')
	b := cite
	if err == nil {
		b, err = canon.AppendIDOf(cite, canon.PrefixToolCall, canon.StringPart(r.rc.RunID), stepPart, canon.StringPart(req.CapabilityID), canon.RawPart(argsJSON))
	}
	if err != nil {
		argsJSON = nil
		b, _ = canon.AppendIDOf(cite, canon.PrefixToolCall, canon.StringPart(r.rc.RunID), stepPart, canon.StringPart(req.CapabilityID))
	}
	idEnd := len(b)
	s := r.surfaced[req.CapabilityID]
	keyed := false
	if _, _, named := splitCapability(req.CapabilityID); err == nil && stepOK && named && req.Args != nil && s != nil && s.spec != nil && s.mode.IsWrite() {
		// A write that passes the envelope reaches checkIdempotencyKey (the
		// third check, after two that read only s), which derives its key
		// from these same bytes: derived here, the key is written into the
		// id's string (one allocation for both).
		if kb, kerr := r.appendIdempotencyKey(b, req.IdempotencyKey, req.CapabilityID, argsJSON); kerr == nil {
			b, keyed = kb, true
		}
	}
	all := string(b)
	c.citeRef = all[:idEnd]
	if keyed {
		c.key = all[idEnd:]
	}
	if argsJSON == nil {
		c.releaseArgs()
	} else {
		*c.args = argsJSON
	}
	c.env = ToolCallEnvelope{
		EnvelopeVersion: CallEnvelopeVersion, ToolCallID: c.citeRef[len(cite):], RunID: r.rc.RunID, TraceID: r.rc.TraceID, SessionID: r.rc.SessionID,
		CapabilityID: req.CapabilityID, Args: args, PrincipalChain: r.principals, EvidenceRefs: slices.Clone(req.EvidenceRefs),
		ApprovalModeRequested: req.ApprovalMode, AuthRef: r.authRef,
	}
	env := &c.env
	if env.EvidenceRefs == nil {
		env.EvidenceRefs = []string{}
	}
	c.s = s
	if s != nil {
		env.ApprovalModeEffective, env.ApprovalModeHighest = s.meta.ApprovalMode, s.mode
		if env.ApprovalModeRequested == "" {
			env.ApprovalModeRequested = s.meta.ApprovalMode
		}
		// Each envelope owns its metadata: an envelope a sink changes does
		// not change another's.
		env.Metadata = maps.Clone(s.callMeta)
	}
	switch {
	case err != nil:
		return c, r.refuse(c, StatusRejected, NewToolError(CodeInvalidInput, false, "args have no canonical JSON form", nil), nil)
	case !stepOK:
		return c, r.refuse(c, StatusRejected, NewToolError(CodeInvalidInput, false,
			fmt.Sprintf("step %d of turn %d is out of range: a turn's plan has at most %d steps, and turns count from 0", req.Step.Index, req.Step.Turn, maxStepsPerTurn),
			map[string]any{"field": "step"}), nil)
	}
	if _, _, ok := splitCapability(req.CapabilityID); !ok || req.Args == nil {
		return c, r.refuse(c, StatusRejected, NewToolError(CodeInvalidInput, false, "a call names adapter_id.capability and carries an args object", nil), nil)
	}
	return c, nil
}

// refuse builds a result for a call that never reached the adapter.
func (r *Run) refuse(c *callRecord, status Status, te *ToolError, polID *string) *result {
	retryable := te.Retryable
	res := newResult(c, polID)
	res.env.Status, res.env.Error = status, te
	res.env.Metadata = ResultMetadata{ToolStatus: string(status), ToolCode: te.Code, ToolReason: te.Reason, Retryable: &retryable}
	return res
}
