package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/gatewayhook"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/internal/principal"
	"github.com/contextos/contextos/internal/sortedkeys"
	"github.com/contextos/contextos/internal/storefail"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// check is one named step of governing a call. It returns nil to let the
// call go on, or the result that ends it (a refusal or a pause; the error
// is a store's failure, returned with the result). A check may settle
// something for the checks after it, on the call's record.
type check struct {
	name string
	run  func(r *Run, ctx context.Context, c *callRecord) (*result, error)
}

// checks are the gateway's checks, in the order they run: the first that
// ends a call decides its result, and a call that passes them all is
// executed (executeOnce). The package doc ("The checks, in order") says
// what each does, in this order; TestChecksTable holds the two together.
var checks = [...]check{
	{"surfaced", (*Run).checkSurfaced},
	{"registered", (*Run).checkRegistered},
	{"idempotency_key", (*Run).checkIdempotencyKey},
	{"attachments", (*Run).checkAttachments},
	{"tenant", (*Run).checkTenant},
	{"args", (*Run).checkArgs},
	{"payload", (*Run).checkPayload},
	{"policy", (*Run).checkPolicy},
	{"safety_mode", (*Run).checkSafetyMode},
	{"delegation", (*Run).checkDelegation},
	{"budget", (*Run).checkBudget},
	{"evidence", (*Run).checkEvidence},
	{"approval", (*Run).checkApprovalGate},
}

// govern runs the checks and, when the call passes them all, executes it.
func (r *Run) govern(ctx context.Context, c *callRecord) (*result, error) {
	for i := range checks {
		if res, err := checks[i].run(r, ctx, c); res != nil || err != nil {
			return res, err
		}
	}
	return r.executeOnce(ctx, c)
}

func (r *Run) checkSurfaced(_ context.Context, c *callRecord) (*result, error) {
	if c.s != nil {
		return nil, nil
	}
	return r.refuse(c, StatusRejected, NewToolError(CodeUnsupportedTool, false,
		fmt.Sprintf("capability %s is not in the compiled tool manifest; surfaced: %s", c.env.CapabilityID, strings.Join(sortedkeys.Of(r.surfaced), ", ")), nil), nil), nil
}

func (r *Run) checkRegistered(_ context.Context, c *callRecord) (*result, error) {
	if c.s.spec != nil {
		return nil, nil
	}
	return r.refuse(c, StatusRejected, NewToolError(CodeUnsupportedTool, false, fmt.Sprintf("no adapter is registered for %s", c.env.CapabilityID), nil), nil), nil
}

func (r *Run) checkIdempotencyKey(_ context.Context, c *callRecord) (*result, error) {
	c.write = c.s.mode.IsWrite()
	if !c.write {
		return nil, nil
	}
	key := c.key // derived with the call's id when the envelope was built (envelope)
	if key == "" {
		var err error
		if key, err = r.idempotencyKey(c); err != nil {
			return r.refuse(c, StatusRejected, NewToolError(CodeInvalidInput, false, "args have no canonical JSON form", nil), nil), nil
		}
	}
	c.key, c.keyCopy = key, key
	c.env.IdempotencyKey = &c.keyCopy
	if c.s.injectsKey {
		if old, has := c.env.Args[keyArg]; has && old != key {
			// The plan's own idempotency_key argument (a model fills in
			// what the tool's schema declares) never reaches the adapter:
			// the key there is the derived one, scoped to the tenant and
			// run, as on the envelope. The plan's value is part of the
			// arguments the key and the call's id were derived from.
			c.env.Args[keyArg] = key
			if b, err := canon.AppendValue(c.argsJSON()[:0], c.env.Args); err == nil && c.args != nil {
				*c.args = b
			} else {
				c.releaseArgs()
			}
		} else if !has {
			// The arguments' encoding with the key, for the payload size and
			// the transcript digest (the call's id and key are derived
			// already): the key's member written into the encoding without
			// it, where it sorts (the same bytes as encoding them again).
			spliced := false
			if old := c.argsJSON(); old != nil {
				nb := argsBufs.Get().(*[]byte)
				if b, err := canon.AppendWithMember((*nb)[:0], old, c.env.Args, keyArg, key); err == nil {
					c.releaseArgs()
					*nb, c.args, spliced = b, nb, true
				} else {
					argsBufs.Put(nb)
				}
			}
			c.env.Args[keyArg] = key
			if !spliced {
				if b, err := canon.AppendValue(c.argsJSON()[:0], c.env.Args); err == nil && c.args != nil {
					*c.args = b
				} else {
					c.releaseArgs()
				}
			}
		}
	}
	return nil, nil
}

func (r *Run) checkAttachments(_ context.Context, c *callRecord) (*result, error) {
	for _, id := range c.attachments {
		i := slices.IndexFunc(r.req.Attachments, func(a runcontext.Attachment) bool { return a.ArtifactID == id })
		if i < 0 || r.g.opts.AttachmentScope != nil && !r.g.opts.AttachmentScope(r.rc.TenantID, r.req.Attachments[i]) {
			return r.refuse(c, StatusRejected, NewToolError(CodePermissionDenied, false, fmt.Sprintf("attachment %q is not one of this tenant's request attachments", clip(id, maxQuoted)), nil), nil), nil
		}
		a := r.req.Attachments[i]
		hex := strings.TrimPrefix(a.SHA256, "sha256:")
		c.env.EvidenceRefs = append(c.env.EvidenceRefs, "artifact:"+a.ArtifactID+"#"+hex)
		c.attHashes = append(c.attHashes, "sha256:"+hex)
	}
	return nil, nil
}

func (r *Run) checkTenant(_ context.Context, c *callRecord) (*result, error) {
	for _, p := range c.env.PrincipalChain {
		if p.TenantID != "" && p.TenantID != r.rc.TenantID {
			return r.refuse(c, StatusRejected, NewToolError(CodePermissionDenied, false, "principal chain crosses tenants", nil), nil), nil
		}
	}
	return nil, nil
}

func (r *Run) checkArgs(_ context.Context, c *callRecord) (*result, error) {
	if probs := validateArgs(c.s.spec.schema, c.s.spec.shape, c.env.Args, c.s.constraints, c.key); len(probs) > 0 {
		return r.refuse(c, StatusRejected, argsError(c.env.CapabilityID, probs), nil), nil
	}
	return nil, nil
}

func (r *Run) checkPayload(_ context.Context, c *callRecord) (*result, error) {
	max := r.rc.RunBudget.MaxPayloadBytes
	if max <= 0 {
		return nil, nil
	}
	if size, err := c.argsSize(); err != nil || size > max {
		return r.refuse(c, StatusRejected, NewToolError(CodeInvalidInput, false, fmt.Sprintf("args are larger than max_payload_bytes (%d); pass large payloads as attachments", max),
			map[string]any{"max_payload_bytes": max}), nil), nil
	}
	return nil, nil
}

// argsSize is the size of the call's canonical arguments.
func (c *callRecord) argsSize() (int64, error) {
	if b := c.argsJSON(); b != nil {
		return int64(len(b)), nil
	}
	b, err := canon.JSON(c.env.Args)
	return int64(len(b)), err
}

// checkPolicy evaluates the call's own policy (when the policy reads tool
// data), keeps it on the call's record (the approval check reads the
// gates it activated) and binds the envelope to a decision.
func (r *Run) checkPolicy(_ context.Context, c *callRecord) (*result, error) {
	env := &c.env
	res := r.base
	if r.usesTool {
		var err error
		// tool.approval_mode is the mode the call is governed at: the
		// capability's effective mode, or the requested one when higher. A
		// plan that requests a lower mode never lowers what a rule or gate
		// over tool.approval_mode sees.
		mode := env.ApprovalModeRequested
		if env.ApprovalModeEffective.Compare(mode) > 0 {
			mode = env.ApprovalModeEffective
		}
		res, err = r.engine.Evaluate(policy.Input{RunID: r.rc.RunID, Data: r.doc.WithTool(env.CapabilityID, env.Args, mode)})
		if err != nil {
			return r.refuse(c, StatusBlocked, NewToolError(CodeRuntimePolicyInvalid, false, "per-call policy evaluation failed closed: "+err.Error(), nil), nil), nil
		}
		c.eval = res
		if i := r.unjudged(c, res.Skipped); i >= 0 {
			return r.refuse(c, StatusBlocked, NewToolError(CodeRuntimePolicyInvalid, false, "per-call policy evaluation failed closed: "+res.Skipped[i].Error().Error(), nil), nil), nil
		}
	}
	polID, blockedBy := r.bindPolicy(env, res, c)
	env.PolicyDecisionID = polID
	if blockedBy != "" {
		return r.refuse(c, StatusBlocked, NewToolError(CodePermissionDenied, false, blockedBy, nil), polID), nil
	}
	return nil, nil
}

// unjudged returns the index of the first skipped rule or gate (one over
// an argument the call does not carry) that keeps the call from running,
// or -1. Any does for a write: it cannot be judged for it. For a
// read-only call, one that could hold it does: the gate its permission
// names, or a rule that names that gate in a branch (whatever else the
// gate's when reads may hold for the call).
func (r *Run) unjudged(c *callRecord, skipped []policy.Skipped) int {
	if len(skipped) == 0 {
		return -1
	}
	if c.write {
		return 0
	}
	own := c.s.perm.RequiresApprovalGate
	if own == "" {
		return -1
	}
	var rules []string
	for _, pc := range r.engine.PerCallGates() {
		if pc.GateID == own {
			rules = pc.Rules
		}
	}
	for i, sk := range skipped {
		if sk.GateID == own || sk.RuleID != "" && slices.Contains(rules, sk.BundleID+"#"+sk.RuleID) {
			return i
		}
	}
	return -1
}

func (r *Run) checkSafetyMode(_ context.Context, c *callRecord) (*result, error) {
	env := &c.env
	for _, m := range [...]struct {
		name string
		mode runcontext.ApprovalMode
	}{{"requested", env.ApprovalModeRequested}, {"effective", env.ApprovalModeEffective}, {"highest", env.ApprovalModeHighest}} {
		if !m.mode.AtMost(r.rc.SafetyMode) {
			return r.refuse(c, StatusBlocked, NewToolError(CodePermissionDenied, false, fmt.Sprintf("%s approval mode %s is above the run's safety mode %s", m.name, m.mode, r.rc.SafetyMode), nil),
				env.PolicyDecisionID), nil
		}
	}
	return nil, nil
}

func (r *Run) checkDelegation(_ context.Context, c *callRecord) (*result, error) {
	mode := c.env.ApprovalModeEffective
	if mode.Compare(runcontext.Delegated) < 0 {
		return nil, nil
	}
	block := func(msg string, details map[string]any) (*result, error) {
		return r.refuse(c, StatusBlocked, NewToolError(CodePermissionDenied, false, msg, details), c.env.PolicyDecisionID), nil
	}
	d := r.rc.User.Delegation
	scopes := c.s.spec.Scopes
	switch {
	case d == nil:
		return block(fmt.Sprintf("a %s call needs a user delegation and the run has none", mode), nil)
	case strings.TrimSpace(d.TokenRef) == "":
		// Seed 000: every delegated call carries the user's delegation
		// token reference, which the adapter exchanges for a token.
		return block(fmt.Sprintf("a %s call needs the user delegation's token_ref and it is empty", mode), map[string]any{"field": "user.delegation.token_ref"})
	case !d.HasScopes(scopes...):
		return block(fmt.Sprintf("the user delegation lacks scopes %v that %s needs", missing(d.Scopes, scopes), c.env.CapabilityID), nil)
	}
	c.delegation = d
	return nil, nil
}

func (r *Run) checkBudget(_ context.Context, c *callRecord) (*result, error) {
	// Tokens are charged after the fact (a delegated agent's, a planner
	// turn's): a run already over its token budget runs no further call.
	// (errors.As only on an error: its target escapes, an allocation per
	// call otherwise.)
	if err := r.meter.Exceeded(); err != nil {
		var be *runcontext.BudgetError
		if errors.As(err, &be) && strings.HasPrefix(be.Dimension, runcontext.DimTokens) {
			return r.refuse(c, StatusBlocked, NewToolError(CodeRuntimePolicyInvalid, false, "token budget exhausted: "+err.Error(),
				map[string]any{"dimension": be.Dimension}), c.env.PolicyDecisionID), nil
		}
	}
	callsLeft, costLeft := r.meter.Left()
	if callsLeft <= 0 {
		return r.refuse(c, StatusBlocked, NewToolError(CodeRuntimePolicyInvalid, false, fmt.Sprintf("tool-call budget exhausted (max_tool_calls %d)", r.rc.RunBudget.MaxToolCalls),
			map[string]any{"dimension": runcontext.DimToolCalls}), c.env.PolicyDecisionID), nil
	}
	if cost := c.s.spec.CostCents; cost > costLeft {
		return r.refuse(c, StatusBlocked, NewToolError(CodeRuntimePolicyInvalid, false, fmt.Sprintf("cost budget exhausted (%.4g cents left, the call costs %.4g)", costLeft, cost),
			map[string]any{"dimension": runcontext.DimCost}), c.env.PolicyDecisionID), nil
	}
	return nil, nil
}

// holdingGates returns the approval gate that holds the call ("" for
// none) and, when more than one does, the others. A gate holds a call
// when it is active at compile time or for the call (c.eval) and
//   - the call's permission names it (requires_approval_gate); or, for a
//     write-class call only,
//   - the call itself made it active (policy.Gate.ByCall: its when, over
//     tool.*, holds for the call, or a rule over tool.* took a branch
//     naming it); or
//   - no permission names it (Run.unbound): a gate that guards no
//     capability of its own guards every write.
//
// The permission's gate comes first, the others in declaration order. A
// read-only call is held only by the gate its permission names: a gate
// over tool.args meant for refunds never holds the lookup that reads the
// same argument.
func (r *Run) holdingGates(c *callRecord) (gate string, more []string) {
	own := c.s.perm.RequiresApprovalGate
	active := r.cc.RuntimeControls.ApprovalGatesActive
	if own != "" && slices.Contains(active, own) {
		gate = own
	}
	add := func(id string) {
		switch {
		case id == gate || slices.Contains(more, id):
		case gate == "":
			gate = id
		default:
			more = append(more, id)
		}
	}
	if c.eval != nil {
		for _, g := range c.eval.Gates {
			if g.Active && (g.GateID == own || c.write && (g.ByCall || slices.Contains(r.unbound, g.GateID))) {
				add(g.GateID)
			}
		}
	}
	if c.write {
		// Active at compile time, whatever the call's evaluation says.
		for _, id := range r.unbound {
			if slices.Contains(active, id) {
				add(id)
			}
		}
	}
	return gate, more
}

func init() {
	gatewayhook.VerifyWriteShared = func(opts, verify any) {
		opts.(*RunOptions).verifyWriteShared = verify.(func(*WriteCall) *ToolError)
	}
}

// checkEvidence asks the run's VerifyWrite hook, when there is one,
// whether a write may run with what the run holds (blocked otherwise).
func (r *Run) checkEvidence(_ context.Context, c *callRecord) (*result, error) {
	if !c.write || r.verifyWrite == nil {
		return nil, nil
	}
	ds := c.decisions()
	if r.verifyCopies && ds != nil {
		// The decisions are the call's (CallDecisions, and those the policy
		// engine may serve again): a hook is told copies.
		own := make([]policy.Decision, len(ds))
		for i, d := range ds {
			own[i] = d.Clone()
		}
		ds = own
	}
	te := r.verifyWrite(&WriteCall{CapabilityID: c.env.CapabilityID, ToolCallID: c.env.ToolCallID, Decisions: ds})
	if te == nil {
		return nil, nil
	}
	// The hook's error is the refusal's, copied (a hook's details too): a
	// later change to it reaches nothing recorded.
	cp := *te
	if cp.Reason == "" {
		cp.Reason = ReasonFor(cp.Code)
	}
	switch {
	case cp.Details == nil:
		cp.Details = map[string]any{}
	case r.verifyCopies:
		cp.Details = jsonv.CloneObject(cp.Details)
	}
	cp.Retryable = false
	return r.refuse(c, StatusBlocked, &cp, c.env.PolicyDecisionID), nil
}

// checkApprovalGate holds a call behind an active approval gate until it
// carries a valid approval. What the approval adds to the result's
// metadata is set before the result is recorded, so the transcript
// carries it.
func (r *Run) checkApprovalGate(ctx context.Context, c *callRecord) (*result, error) {
	gate, more := r.holdingGates(c)
	if gate == "" {
		return nil, nil
	}
	if len(more) > 0 {
		// An approval releases a call through one gate: a call that two
		// gates hold cannot be approved, and does not run.
		all := append([]string{gate}, more...)
		return r.refuse(c, StatusBlocked, NewToolError(CodePermissionDenied, false,
			fmt.Sprintf("the call is held by approval gates %s; an approval releases a call through one gate", strings.Join(all, ", ")),
			map[string]any{"gate_ids": all}), c.env.PolicyDecisionID), nil
	}
	out, who, err := r.checkApproval(ctx, c, gate)
	if err != nil {
		return out, err
	}
	if out != nil {
		// A pause or a refusal at the gate is recorded here, before Call
		// sets the result's latency: its transcript entry carries
		// latency_ms 0, as every recorded run's does (a replay of a packet
		// recorded on a moving clock compares these entries' hashes).
		// It is recorded only while the run is this runtime's.
		if err := r.holdRefusal(ctx, out); err != nil {
			return out, err
		}
		_, err = r.record(ctx, c, out)
		return out, err
	}
	a := c.approval
	c.approved = &ResultMetadata{Approver: who, ApprovalID: a.ApprovalID, ApprovalGateID: gate, ApprovedAt: a.DecidedAt.UTC().Format(time.RFC3339),
		ApprovalEvidenceSnapshotHash: r.evidenceSnapshot()}
	return nil, nil
}

// executeOnce executes a call that passed every check, once per
// idempotency key for a write.
func (r *Run) executeOnce(ctx context.Context, c *callRecord) (*result, error) {
	if c.write {
		prior, claimed, err := r.g.opts.Idempotency.Claim(ctx, c.key)
		if err != nil {
			err = fmt.Errorf("gateway: idempotency claim: %w", err)
			if r.storeFailed != nil {
				if herr := r.storeFailed(ctx, storefail.StoreFailure{ToolCallID: c.env.ToolCallID, Store: storefail.Idempotency, Op: storefail.OpClaim, IdempotencyKey: c.key}); herr != nil {
					err = errors.Join(err, herr)
				}
			}
			return r.refuse(c, StatusFailed, NewToolError(CodeExecutionFailed, true, "idempotency store unavailable", nil), c.env.PolicyDecisionID), err
		}
		if !claimed {
			// The store may keep the prior result it returned: the
			// duplicate's is the run's own copy.
			dup := &result{env: *prior.Clone()}
			dup.env.Metadata.Duplicate = true
			return dup, nil
		}
	}
	out, err := r.execute(ctx, c)
	if c.write && !out.recorded && !out.abandoned && !out.notRun {
		// A refusal execute made before any attempt (the run's budget ran
		// out while the key was being claimed) is recorded by Call, after
		// its claim check: ask it here, before the key is completed, so a
		// refusal the runtime no longer may record gives the key up
		// (below) instead of being kept as the key's result, which the
		// runtime that has the run would meet as a duplicate for ever.
		if herr := r.holdRefusal(ctx, out); herr != nil {
			err = joinErr(err, herr)
		}
	}
	if c.write && (out.abandoned && !out.ran || out.notRun) {
		// The call was given up between its attempts (the run is another
		// runtime's): the key is given up too, as a dead runtime's claim
		// lapses, so the runtime that has the run makes the same write
		// under it (its tool sees the key again) instead of waiting for
		// it forever. A call whose call entry could not be recorded was
		// not run: its key is given up too, so the run's resume (or its
		// takeover) makes the write, rather than meeting the refusal as
		// the key's result forever.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), detachedTimeout)
		defer cancel()
		if rerr := r.g.opts.Idempotency.Release(rctx, c.key); rerr != nil {
			err = errors.Join(err, fmt.Errorf("gateway: idempotency release: %w", rerr))
		}
		return out, err
	}
	if c.write {
		// Writes keep their result whatever it is (a panicked adapter's
		// too): a retry with the same key never runs the effect twice. The
		// store gets its own copy: this call goes on to set its latency
		// while duplicates read theirs. A store may keep what it is given
		// and edit it later: it gets a deep copy, unless it is the
		// in-memory store, which takes a deep copy of its own before
		// Complete returns (it is given the result itself).
		kept := &out.env
		if _, own := r.g.opts.Idempotency.(*MemoryIdempotency); !own {
			kept = out.env.Clone()
		}
		cctx := ctx
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), detachedTimeout)
			defer cancel()
		}
		if cerr := r.g.opts.Idempotency.Complete(cctx, c.key, kept); cerr != nil {
			cerr = fmt.Errorf("gateway: idempotency complete: %w", cerr)
			if r.storeFailed != nil {
				if herr := r.storeFailed(cctx, storefail.StoreFailure{ToolCallID: c.env.ToolCallID, Store: storefail.Idempotency, Op: storefail.OpComplete, IdempotencyKey: c.key}); herr != nil {
					cerr = errors.Join(cerr, herr)
				}
			}
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
// the run's tenant and run: from the caller's key when it gives one, and
// the capability and the canonical arguments. Two tenants (run ids can be
// host-chosen) or two runs that pick the same caller key never share a
// result; the same inputs always give the same key, so a retry, a resume
// and a replay use it again.
func (r *Run) idempotencyKey(c *callRecord) (string, error) {
	var out [64]byte
	b, err := r.appendIdempotencyKey(out[:0], c.callerKey, c.env.CapabilityID, c.argsJSON())
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// appendIdempotencyKey appends to dst the key a write of capabilityID
// with the canonical arguments args and the plan's key callerKey ("" for
// none) is executed under (see idempotencyKey).
func (r *Run) appendIdempotencyKey(dst []byte, callerKey, capabilityID string, args []byte) ([]byte, error) {
	// The arguments are part of every key: a caller key reused with other
	// arguments names another action (it never answers with the first
	// action's result), and the same write proposed again in a later turn
	// of the run is the same action (it never runs twice).
	if callerKey != "" {
		return canon.AppendIDOf(dst, canon.PrefixIdem, canon.StringPart(r.rc.TenantID), canon.StringPart(r.rc.RunID), canon.StringPart(callerKey), canon.StringPart(capabilityID), canon.RawPart(args))
	}
	return canon.AppendIDOf(dst, canon.PrefixIdem, canon.StringPart(r.rc.TenantID), canon.StringPart(r.rc.RunID), canon.StringPart(capabilityID), canon.RawPart(args))
}

// bindPolicy picks the policy decision the call is bound to and says why
// policy blocks it, if it does: a refusal blocks every call; a deny or an
// escalation blocks write-class calls. A call an approval gate holds is
// bound to the rule decision that requires that gate, when one does.
func (r *Run) bindPolicy(env *ToolCallEnvelope, res *policy.Evaluation, c *callRecord) (*string, string) {
	write := c.write
	switch {
	case res.Verdict == policy.VerdictRefuse:
		return r.callDecisionID(c, res), fmt.Sprintf("must_refuse guardrail %v fired; no tool calls are allowed", res.Raised.MustRefuse)
	case write && res.Verdict == policy.VerdictEscalate:
		return r.callDecisionID(c, res), fmt.Sprintf("must_escalate guardrail %v fired; write-class calls are blocked", res.Raised.MustEscalate)
	}
	if write {
		for _, d := range res.Decisions {
			if d.Outcome == policy.Deny {
				id := d.PolicyDecisionID
				return &id, fmt.Sprintf("policy rule %s denied: %s", d.RuleID, d.Reason)
			}
		}
	}
	held, heldKnown := "", false // the gate that holds the call, worked out when a decision names another
	for _, d := range res.Decisions {
		if d.RequiresApprovalGate == "" {
			continue
		}
		if d.RequiresApprovalGate != c.s.perm.RequiresApprovalGate && !heldKnown {
			held, _ = r.holdingGates(c)
			heldKnown = true
		}
		if d.RequiresApprovalGate == c.s.perm.RequiresApprovalGate || d.RequiresApprovalGate == held {
			id := d.PolicyDecisionID
			return &id, ""
		}
	}
	return r.callDecisionID(c, res), ""
}

// callDecisionID names the evaluation a call is bound to when no rule
// decision of its own applies: the run's (one id per run, from the run and
// its decision ids) when the policy does not read the tool, else the
// call's own (from the run, the call and the decisions that applied).
func (r *Run) callDecisionID(c *callRecord, res *policy.Evaluation) *string {
	env := &c.env
	if res == r.base {
		c.polID = r.runDecisionID // each call its own copy
		return &c.polID
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

func decisionIDsDigest(res *policy.Evaluation) (string, error) {
	ids := make([]string, len(res.Decisions))
	for i, d := range res.Decisions {
		ids[i] = d.PolicyDecisionID
	}
	return canon.Digest(ids)
}

// requestExpired reports a resumed call whose approval request (the pause
// it answers, on gateID) is ttl old or older at now.
func (c *callRecord) requestExpired(gateID string, ttl time.Duration, now time.Time) bool {
	p := c.request
	return p != nil && p.GateID == gateID && p.ToolCallID == c.env.ToolCallID && !now.Before(p.RequestedAt.Add(ttl))
}

// checkApproval checks the call's approval for gateID: it returns the
// result that pauses or refuses the call, or the approver.
func (r *Run) checkApproval(ctx context.Context, c *callRecord, gateID string) (*result, string, error) {
	env, a := &c.env, c.approval
	var gate pack.ApprovalGate
	for _, g := range r.pack.PolicyLayer.ApprovalGates {
		if g.GateID == gateID {
			gate = g
		}
	}
	digest, err := actionDigest(action{capabilityID: env.CapabilityID, args: env.Args, compiledContextHash: r.cc.Hash(), gateID: gateID})
	if err != nil {
		return r.refuse(c, StatusRejected, NewToolError(CodeInvalidInput, false, "args have no canonical JSON form", nil), env.PolicyDecisionID), "", nil
	}
	now := r.now()
	if a == nil {
		res := r.refuse(c, StatusPaused, NewToolError(CodeApprovalPending, false, fmt.Sprintf("awaiting approval on %s by a %s", gateID, gate.RequiredApproverRole), nil), env.PolicyDecisionID)
		res.env.Approval = &ApprovalRequest{GateID: gateID, ApproverRole: gate.RequiredApproverRole, TTLSeconds: gate.TTLSeconds, ActionDigest: digest,
			EvidenceSnapshotHash: r.evidenceSnapshot(), ToolCallID: env.ToolCallID, IdempotencyKey: c.key, RequestedAt: now.UTC(), AllowSelfApproval: gate.AllowSelfApproval}
		return res, "", nil
	}
	deny := func(code, msg string) (*result, string, error) {
		return r.refuse(c, StatusBlocked, NewToolError(code, false, msg, map[string]any{"gate_id": gateID}), env.PolicyDecisionID), "", nil
	}
	switch {
	case strings.TrimSpace(a.ApprovalID) == "":
		return deny(CodeApprovalDenied, "the approval has no approval_id (each approval is identified, and used once)")
	case principal.Canonical(a.Approver) == "":
		return deny(CodeApprovalDenied, "the approval names no approver")
	case a.GateID != gateID:
		return deny(CodeApprovalDenied, fmt.Sprintf("the approval is for gate %s, not %s", clip(a.GateID, maxQuoted), gateID))
	case a.ActionDigest != digest:
		return deny(CodeApprovalDenied, "the approval names another action (capability, arguments, compiled context or gate differ)")
	case a.Denied:
		return deny(CodeApprovalDenied, "the approver denied the action")
	case a.ApproverRole != gate.RequiredApproverRole:
		return deny(CodeApprovalDenied, fmt.Sprintf("the approver's role %q is not %s", clip(a.ApproverRole, maxQuoted), gate.RequiredApproverRole))
	case principal.Same(a.Approver, r.rc.User.UserID) && !gate.AllowSelfApproval:
		return deny(CodeApprovalDenied, fmt.Sprintf("the approver is the run's requesting user; gate %s needs someone else", gateID))
	case c.requestExpired(gateID, time.Duration(gate.TTLSeconds)*time.Second, now):
		return deny(CodeApprovalTimeout, fmt.Sprintf("the approval request is older than the gate's %ds TTL; the call must be proposed again", gate.TTLSeconds))
	case a.DecidedAt.After(now) || !now.Before(a.DecidedAt.Add(time.Duration(gate.TTLSeconds)*time.Second)):
		return deny(CodeApprovalTimeout, fmt.Sprintf("the approval is outside its %ds TTL", gate.TTLSeconds))
	}
	// Approval ids are used once per tenant: another tenant's id never
	// spends this one.
	if err := consumeApproval(ctx, r.g.opts.Approvals, r.rc.TenantID+"/"+a.ApprovalID, c.key); err != nil {
		if errors.Is(err, ErrApprovalUsed) {
			return deny(CodeApprovalDenied, "the approval was already used")
		}
		return r.refuse(c, StatusFailed, NewToolError(CodeExecutionFailed, true, "approval log unavailable", nil), env.PolicyDecisionID), "", fmt.Errorf("gateway: approval log: %w", err)
	}
	return nil, a.Approver, nil
}
