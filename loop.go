package contextos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// run runs the loop; when it fails without a result (a store failed), the
// adapter outcomes recorded for the run are dropped, so nothing leaks.
func (r *run) run(ctx context.Context, resume *ResumeInput) (*Result, error) {
	res, err := r.loop(ctx, resume)
	if err != nil {
		r.rt.recorder.Forget(r.rc.RunID)
	}
	return res, err
}

// loop runs planner → verify → execute → score → consolidate until a
// terminal verdict, a pause or a limit. resume carries the approvals of a
// resumed run.
func (r *run) loop(ctx context.Context, resume *ResumeInput) (*Result, error) {
	cp := r.cp
	// Guardrails fired at compile time end the run before any planning.
	switch r.cc.ContextLedger.PolicyVerdict {
	case policy.VerdictRefuse:
		return r.finish(ctx, decision.Rejected, nil, "must_refuse guardrail fired: "+strings.Join(r.cc.ContextLedger.GuardrailsRaised.MustRefuse, ", "))
	case policy.VerdictEscalate:
		return r.finish(ctx, decision.Escalated, nil, "must_escalate guardrail fired: "+strings.Join(r.cc.ContextLedger.GuardrailsRaised.MustEscalate, ", "))
	}
	reason := ""
	maxReplans := r.rc.RunBudget.MaxReplanAttempts
	for {
		if why := r.interrupted(ctx); why != "" {
			return r.hardStop(ctx, why)
		}
		if err := r.meter.CheckWallClock(r.clock.Now()); err != nil {
			return r.hardStop(ctx, err.Error())
		}
		plan := cp.Plan
		if plan == nil || cp.StepIndex == 0 && resume == nil {
			if cp.Turn >= r.rt.opts.MaxTurns {
				return r.hardStop(ctx, fmt.Sprintf("loop_guard: %d planner turns without a decision", cp.Turn))
			}
			var err error
			if plan, err = r.plan(ctx, reason); err != nil {
				if werr := r.meter.CheckWallClock(r.clock.Now()); werr != nil {
					return r.hardStop(ctx, werr.Error())
				}
				return r.hardStop(ctx, err.Error())
			}
			if errors.Is(r.meter.ChargeTokens("", plan.Usage.Tokens), runcontext.ErrBudgetExceeded) || errors.Is(r.meter.ChargeCost(plan.Usage.CostCents), runcontext.ErrBudgetExceeded) {
				return r.hardStop(ctx, "budget_exceeded: the planner's usage exceeds the run budget")
			}
			cp.Plan, cp.StepIndex = plan, 0
			j, err := r.judge(ctx, true, plan)
			if err != nil {
				return nil, err
			}
			switch j.Verdict {
			case VerdictReject:
				return r.finish(ctx, decision.Rejected, plan.Decision, "critic rejected the plan: "+j.Reason)
			case VerdictReplan:
				cp.Replans++
				if cp.Replans > maxReplans {
					return r.finish(ctx, decision.Escalated, nil, fmt.Sprintf("replans exhausted (%d): %s", maxReplans, j.Reason))
				}
				cp.Plan, reason = nil, j.Reason
				continue
			}
		}
		// Execute the plan's steps through the gateway.
		var approvals []gateway.Approval
		if resume != nil {
			approvals, resume = resume.Approvals, nil
		}
		for cp.StepIndex < len(plan.Steps) {
			i := cp.StepIndex
			step := plan.Steps[i]
			call := gateway.CallRequest{CapabilityID: step.CapabilityID, Args: step.Args, EvidenceRefs: step.EvidenceRefs, IdempotencyKey: step.IdempotencyKey,
				Step: cp.Turn*1000 + i, ApprovalMode: step.ApprovalMode, Attachments: step.Attachments}
			r.event(Event{Kind: EventToolCall, Step: &step})
			if len(approvals) > 0 {
				call.Approval = &approvals[0]
			}
			res, err := r.gwRun.Call(ctx, call)
			if err != nil {
				return nil, fmt.Errorf("contextos: tool call %s: %w", step.CapabilityID, err)
			}
			r.event(Event{Kind: EventToolResult, Result: res})
			if res.Status == gateway.StatusPaused {
				return r.pause(ctx, res)
			}
			if dim := budgetDimension(res); dim != "" {
				// A spent budget is a hard stop, not a reason to replan; the
				// refused step runs again if the run is resumed with more.
				return r.hardStop(ctx, fmt.Sprintf("budget_exceeded: %s (%s)", dim, res.Error.Message))
			}
			approvals = nil
			cp.Results = append(cp.Results, StepResult{Turn: cp.Turn, Index: i, Step: step, Result: res})
			cp.StepIndex++
			if r.long {
				if err := r.rt.opts.Checkpoints.Save(ctx, cp); err != nil {
					return nil, fmt.Errorf("contextos: checkpoint: %w", err)
				}
				r.event(Event{Kind: EventProgress, Message: fmt.Sprintf("step %d of %d done", cp.StepIndex, len(plan.Steps))})
				r.event(Event{Kind: EventHeartbeat})
			}
			if fired := r.guardrailFired(res); fired != "" {
				status := decision.Escalated
				if strings.HasPrefix(fired, "must_refuse") {
					status = decision.Rejected
				}
				return r.finish(ctx, status, nil, fired)
			}
		}
		j, err := r.judge(ctx, false, plan)
		if err != nil {
			return nil, err
		}
		cp.Plan, cp.StepIndex = nil, 0
		switch j.Verdict {
		case VerdictAccept:
			r.consolidate(ctx, plan)
			return r.finish(ctx, decision.Decided, plan.Decision, "")
		case VerdictEscalate:
			return r.finish(ctx, decision.Escalated, plan.Decision, j.Reason)
		case VerdictReject:
			return r.finish(ctx, decision.Rejected, plan.Decision, j.Reason)
		case VerdictRetry, VerdictReplan:
			if j.Reason != reasonContinue {
				cp.Replans++
				if cp.Replans > maxReplans {
					return r.finish(ctx, decision.Escalated, nil, fmt.Sprintf("replans exhausted (%d): %s", maxReplans, j.Reason))
				}
			}
			reason = j.Reason
		}
	}
}

// plan asks the planner, under plan_timeout_ms.
func (r *run) plan(ctx context.Context, reason string) (*Plan, error) {
	cp := r.cp
	ctx, span := r.rt.tracer.Start(ctx, "plan", trace.WithAttributes(attribute.Int("contextos.turn", cp.Turn)))
	defer span.End()
	timeout := time.Duration(r.rc.RunBudget.PlanTimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = time.Duration(runcontext.DefaultPlanTimeoutMS) * time.Millisecond
	}
	if left := r.meter.Remaining(r.clock.Now()); left < timeout {
		timeout = left
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	call := cp.PlannerCalls
	cp.PlannerCalls++
	plan, err := r.rt.planner.Plan(pctx, &PlanRequest{Compiled: r.cc, Request: r.req, Run: r.rc, Results: slices.Clone(cp.Results), Turn: cp.Turn, ReplanReason: reason, call: call})
	if err != nil {
		var rp *replayedPlanError
		why := ""
		switch {
		case errors.As(err, &rp):
			why = rp.reason
		case ctx.Err() != nil:
			why = "canceled: " + ctx.Err().Error()
		case pctx.Err() != nil:
			why = fmt.Sprintf("plan_timeout: the planner did not answer within %d ms", timeout.Milliseconds())
		default:
			why = "planner failed: " + err.Error()
		}
		cp.PlannerErrors = append(cp.PlannerErrors, replay.PlannerError{Call: call, Reason: why})
		return nil, errors.New(why)
	}
	if plan == nil {
		plan = &Plan{}
	}
	cp.Plans = append(cp.Plans, plan)
	cp.Turn++
	r.event(Event{Kind: EventPlan, Plan: plan})
	return plan, nil
}

// judge runs the built-in critic, then the host critic, which can only make
// the verdict stricter.
func (r *run) judge(ctx context.Context, verify bool, plan *Plan) (Judgement, error) {
	name := "score"
	if verify {
		name = "verify"
	}
	ctx, span := r.rt.tracer.Start(ctx, name)
	defer span.End()
	in := &CriticInput{Compiled: r.cc, Pack: r.prepared.Pack(), Run: r.rc, Request: r.req, Plan: plan, Results: slices.Clone(r.cp.Results), Turn: r.cp.Turn, Replans: r.cp.Replans}
	var j Judgement
	if verify {
		j = r.rt.builtin.verify(in, r.cp)
	} else {
		j = r.rt.builtin.score(in, r.gwRun.Policy())
	}
	if c := r.rt.opts.Critic; c != nil {
		var hj Judgement
		var err error
		if verify {
			hj, err = c.Verify(ctx, in)
		} else {
			hj, err = c.Score(ctx, in)
		}
		if err != nil {
			return Judgement{}, fmt.Errorf("contextos: host critic: %w", err)
		}
		if hj.Verdict.severity() > j.Verdict.severity() {
			j = hj
		}
	}
	span.SetAttributes(attribute.String("contextos.verdict", string(j.Verdict)))
	r.event(Event{Kind: EventVerdict, Verdict: &j})
	return j, nil
}

// budgetDimension names the budget a refused call ran out of, or "".
func budgetDimension(res *gateway.ToolResultEnvelope) string {
	if res.Status != gateway.StatusBlocked || res.Error == nil {
		return ""
	}
	dim, _ := res.Error.Details["dimension"].(string)
	return dim
}

// interrupted is the run's interruption check: a live run reports (and
// records) a cancelled context; a replay stops at the checks the live run
// stopped at.
func (r *run) interrupted(ctx context.Context) string {
	n := r.cp.Checks
	r.cp.Checks++
	if r.rt.isReplay {
		for _, in := range r.rt.replayInterrupts {
			if in.Check == n {
				return in.Reason
			}
		}
		return ""
	}
	if err := ctx.Err(); err != nil {
		why := "canceled: " + err.Error()
		r.cp.Interrupts = append(r.cp.Interrupts, replay.Interrupt{Check: n, Reason: why})
		return why
	}
	return ""
}

// guardrailFired reports a tool result that raises a guardrail label.
func (r *run) guardrailFired(res *gateway.ToolResultEnvelope) string {
	g := r.prepared.Pack().PolicyLayer.Guardrails
	for _, l := range slices.Concat(res.RiskTags, res.Metadata.Signals) {
		if slices.Contains(g.MustRefuse, l) {
			return "must_refuse guardrail " + l + " raised by " + res.CapabilityID
		}
	}
	for _, l := range slices.Concat(res.RiskTags, res.Metadata.Signals) {
		if slices.Contains(g.MustEscalate, l) {
			return "must_escalate guardrail " + l + " raised by " + res.CapabilityID
		}
	}
	return ""
}

// consolidate filters the plan's memory proposals by the pack's write
// classes and consent gates and hands them to the memory store.
func (r *run) consolidate(ctx context.Context, plan *Plan) {
	if r.rt.opts.Memory == nil || len(plan.Memory) == 0 {
		return
	}
	_, span := r.rt.tracer.Start(ctx, "consolidate")
	defer span.End()
	mp := r.prepared.Pack().MemoryLayer.MemoryPolicy
	var keep []MemoryProposal
	for _, p := range plan.Memory {
		if !slices.Contains(mp.WriteClassesAllowed, pack.WriteClass(p.WriteClass)) || p.PII && !mp.ConsentGating.PIIWriteBackAllowed {
			continue
		}
		p.RunID = r.rc.RunID
		keep = append(keep, p)
	}
	if len(keep) > 0 {
		if err := r.rt.opts.Memory.Propose(ctx, keep); err != nil {
			r.rt.opts.Logger.Warn("memory proposals not accepted", "run_id", r.rc.RunID, "error", err.Error())
		}
	}
}

// pause persists the checkpoint before the pause is reported, then records
// a DEFERRED decision that says what is awaited.
func (r *run) pause(ctx context.Context, res *gateway.ToolResultEnvelope) (*Result, error) {
	cp := r.cp
	if res.Approval == nil {
		// Only approval gates pause today; a pause on anything else (an
		// external dependency) fails closed until a transport brings one.
		return r.hardStop(ctx, "paused on "+res.CapabilityID+" without an approval request; external-dependency pauses are not supported")
	}
	cp.Pending, cp.Active = res.Approval, false
	r.snapshotInto(cp)
	rec, err := r.record(ctx, decision.Deferred, nil, "awaiting approval on "+res.Approval.GateID)
	if err != nil {
		return nil, err
	}
	cp.Deferred = rec.RecordID
	if err := r.rt.opts.Checkpoints.Save(ctx, cp); err != nil {
		return nil, fmt.Errorf("contextos: checkpoint before pause: %w", err)
	}
	stored, err := r.rt.opts.Decisions.Append(ctx, rec)
	if err != nil {
		return nil, fmt.Errorf("contextos: store record: %w", err)
	}
	cp.Seq++
	if err := r.rt.opts.Checkpoints.Save(ctx, cp); err != nil {
		return nil, fmt.Errorf("contextos: checkpoint: %w", err)
	}
	r.event(Event{Kind: EventPause, Pause: res.Approval})
	r.event(Event{Kind: EventDecision, Record: stored})
	return &Result{RunID: r.rc.RunID, Status: decision.Deferred, Record: stored, Compiled: r.cc, ToolResults: r.toolResults(res), Pending: res.Approval}, nil
}

// snapshotInto saves what a resume on another runtime needs: usage, the
// transcript chain, and the replay inputs recorded so far.
func (r *run) snapshotInto(cp *Checkpoint) {
	u := r.meter.Usage()
	cp.Usage = Usage{Tokens: u.Tokens, CostCents: u.CostCents}
	cp.MeterUsage = u
	cp.Chain = r.gwRun.ChainState()
	cp.Outcomes = append(cp.Outcomes, r.rt.recorder.Outcomes(r.rc.RunID)...)
	r.rt.recorder.Forget(r.rc.RunID)
	cp.Clock = append(cp.Clock, r.clock.Readings()...)
	r.clock = replay.RecordingClockFrom(r.clock)
}

// hardStop fails closed: an ESCALATED record and a resumable checkpoint.
func (r *run) hardStop(ctx context.Context, why string) (*Result, error) {
	r.cp.Stopped, r.cp.Active = why, false
	r.snapshotInto(r.cp)
	if err := r.rt.opts.Checkpoints.Save(context.WithoutCancel(ctx), r.cp); err != nil {
		return nil, fmt.Errorf("contextos: checkpoint at hard stop: %w", err)
	}
	return r.finish(context.WithoutCancel(ctx), decision.Escalated, nil, why)
}

func (r *run) toolResults(extra ...*gateway.ToolResultEnvelope) []*gateway.ToolResultEnvelope {
	out := make([]*gateway.ToolResultEnvelope, 0, len(r.cp.Results)+len(extra))
	for _, s := range r.cp.Results {
		out = append(out, s.Result)
	}
	return append(out, extra...)
}

// finish records the terminal decision, closes a deferred record, captures
// a replay packet when due and returns the result.
func (r *run) finish(ctx context.Context, status decision.Status, prop *DecisionProposal, why string) (*Result, error) {
	rec, err := r.record(ctx, status, prop, why)
	if err != nil {
		return nil, err
	}
	stored, err := r.rt.opts.Decisions.Append(ctx, rec)
	if err != nil {
		return nil, fmt.Errorf("contextos: store record: %w", err)
	}
	r.cp.Seq++
	if r.cp.Deferred != "" {
		closed := *rec
		closed.Status, closed.Closes = decision.Closed, r.cp.Deferred
		closed.RecordID, _ = decision.NewRecordID(r.rc.RunID, rec.DecisionKey, decision.Closed, r.cp.Seq)
		if _, err := r.rt.opts.Decisions.Append(ctx, &closed); err != nil {
			return nil, fmt.Errorf("contextos: store closing record: %w", err)
		}
		r.cp.Seq++
	}
	// A hard-stopped run stays resumable; its ESCALATED record is closed
	// by the record its resume ends with.
	r.snapshotInto(r.cp)
	r.cp.Terminal, r.cp.Active = r.cp.Stopped == "", false
	if !r.cp.Terminal {
		r.cp.Deferred = stored.RecordID
	}
	defer r.rt.recorder.Forget(r.rc.RunID)
	if err := r.rt.opts.Checkpoints.Save(ctx, r.cp); err != nil {
		return nil, fmt.Errorf("contextos: checkpoint: %w", err)
	}
	res := &Result{RunID: r.rc.RunID, Status: stored.Status, Record: stored, Compiled: r.cc, ToolResults: r.toolResults()}
	r.span.SetAttributes(attribute.String("contextos.decision_status", string(stored.Status)))
	if r.capture(stored) {
		p, err := r.packet(stored, replay.SourceDecisionRecord)
		if err != nil {
			return nil, err
		}
		if err := r.rt.opts.Replays.Save(ctx, p); err != nil {
			return nil, fmt.Errorf("contextos: store replay packet: %w", err)
		}
		res.ReplayPacketID = p.ReplayPacketID
	}
	r.event(Event{Kind: EventDecision, Record: stored})
	return res, nil
}

// capture decides whether to keep a replay packet: failed runs always;
// others by the sample rate, by run id.
func (r *run) capture(rec *decision.Record) bool {
	if r.rt.isReplay {
		return false
	}
	if rec.Status == decision.Rejected || rec.Status == decision.Escalated {
		return true
	}
	if r.rt.opts.ReplaySampleRate >= 1 {
		return true
	}
	h, _ := canon.Digest(r.rc.RunID)
	x, _ := strconv.ParseUint(h[len("sha256:"):len("sha256:")+8], 16, 32)
	return float64(x)/float64(1<<32) < r.rt.opts.ReplaySampleRate
}

// record builds the run's DecisionRecord.
func (r *run) record(ctx context.Context, status decision.Status, prop *DecisionProposal, why string) (*decision.Record, error) {
	_, span := r.rt.tracer.Start(ctx, "record")
	defer span.End()
	facts := r.facts()
	key := ""
	in := decision.BuildInput{Run: r.rc, RequestID: r.req.RequestID, Seq: r.cp.Seq, Time: r.clock.Now(), Status: status, Facts: facts}
	if prop != nil {
		key = prop.DecisionKey
		in.Outcome, in.Outputs, in.Confidence = prop.Outcome, prop.Outputs, prop.Confidence
		in.SubjectIDs, in.EvidenceRefs = prop.SubjectIDs, prop.EvidenceRefs
		in.Rationale = decision.Rationale{Strategy: "planner_proposal", Summary: prop.Rationale}
	}
	if key == "" {
		key = r.primaryDecision()
	}
	in.DecisionKey = key
	if why != "" {
		in.Rationale.Summary = strings.TrimSpace(in.Rationale.Summary + " " + why)
		if in.Rationale.Strategy == "" {
			in.Rationale.Strategy = "runtime_" + strings.ToLower(string(status))
		}
	}
	for _, d := range r.cc.ContextLedger.PolicyResults {
		in.PolicyDecisions = append(in.PolicyDecisions, decision.PolicyDecisionRef{PolicyDecisionID: d.PolicyDecisionID, RuleIDs: []string{d.RuleID}})
	}
	for _, s := range r.cp.Results {
		res := s.Result
		if res.Metadata.Approver != "" {
			gate := res.Metadata.ApprovalGateID
			mode := runcontext.Destructive
			if s.Step.ApprovalMode != "" {
				mode = s.Step.ApprovalMode
			}
			for _, e := range r.cc.Manifests.ToolManifest {
				for c, md := range e.CapabilityMetadata {
					if e.AdapterID+"."+c == res.CapabilityID {
						mode = md.ApprovalMode
					}
				}
			}
			in.Approvals = append(in.Approvals, decision.Approval{GateID: gate, Approver: res.Metadata.Approver, ApproverRole: facts.ActiveGates[gate],
				ApprovalModeEffective: mode, EvidenceSnapshotHash: res.Metadata.ApprovalEvidenceSnapshotHash,
				DecidedAt: res.Metadata.ApprovedAt, ToolCallID: res.ToolCallID})
		}
	}
	if status == decision.Deferred && r.cp.Pending != nil {
		a := r.cp.Pending
		in.Awaiting = &decision.Awaiting{Kind: "approval", GateID: a.GateID, ApproverRole: a.ApproverRole, ToolCallID: a.ToolCallID,
			ActionDigest: a.ActionDigest, EvidenceSnapshotHash: a.EvidenceSnapshotHash, TTLSeconds: a.TTLSeconds}
	}
	u := r.meter.Usage()
	in.Budget = decision.BudgetUsage{Tokens: u.Tokens, ToolCalls: u.ToolCalls, CostUSDCents: u.CostCents, WallClockMS: u.WallClockMS}
	in.Lineage = decision.Lineage{PackVersion: r.inputs[0].Ref.String(), PackContentHash: r.inputs[0].ContentHash,
		SnapshotVersion: r.rt.opts.KnowledgeSnapshot, CompiledContextHash: r.cc.Hash(), ToolTranscriptChainHash: r.gwRun.ChainHash()}
	rec, err := decision.Build(in)
	if rec == nil {
		return nil, err
	}
	// A record that does not validate is still kept (never dropped); its
	// problems are in the log, and a DECIDED one was already lowered.
	if err != nil {
		r.rt.opts.Logger.Warn("decision record has problems", "run_id", r.rc.RunID, "record_id", rec.RecordID, "error", err.Error())
	}
	return rec, nil
}

// primaryDecision is the decision the run's intent is bound to.
func (r *run) primaryDecision() string {
	for _, d := range r.cc.ContextLedger.PolicyResults {
		if d.DecisionBinding != "" {
			return d.DecisionBinding
		}
	}
	return r.prepared.Pack().DecisionLayer.DecisionSpecs[0].DecisionKey
}

// facts are what the run established, for the decision record.
func (r *run) facts() *decision.Facts {
	return runFacts(r.prepared.Pack(), r.cc, r.req, r.cp.Results)
}

// runFacts are what a run established: the admitted evidence, the
// succeeded tool results, the policy outcomes and attachments, the active
// gates and controls. The record is validated against them, and the
// critic checks required evidence with them.
func runFacts(p *pack.Pack, cc *compiler.CompiledContext, req *runcontext.InvokeRequest, results []StepResult) *decision.Facts {
	f := &decision.Facts{Pack: p, Admitted: map[string]string{}, RequestContext: req.Input.Context, ActiveGates: map[string]string{}, PolicyEvaluated: true}
	for _, e := range cc.Manifests.EvidenceManifest {
		f.Admitted[e.EvidenceRef] = ""
	}
	for _, s := range results {
		if s.Result.Status.Succeeded() {
			f.ToolResults = append(f.ToolResults, decision.ToolFact{CapabilityID: s.Result.CapabilityID, ToolCallID: s.Result.ToolCallID})
		}
	}
	for _, d := range cc.ContextLedger.PolicyResults {
		f.PolicyRefs = append(f.PolicyRefs, "policy:"+d.BundleID+"#"+d.RuleID)
	}
	for _, a := range req.Attachments {
		f.Artifacts = append(f.Artifacts, "artifact:"+a.ArtifactID+"#"+strings.TrimPrefix(a.SHA256, "sha256:"))
	}
	for _, g := range cc.ContextLedger.ApprovalGates {
		if g.Active {
			f.ActiveGates[g.GateID] = g.ApproverRole
		}
	}
	rcs := cc.RuntimeControls
	f.Controls = decision.Controls{MustRefuse: rcs.MustRefuse, MustEscalate: rcs.MustEscalate, ApprovalGatesActive: rcs.ApprovalGatesActive, RedactionRulesActive: rcs.RedactionRulesActive}
	return f
}

// packet captures the run for replay.
func (r *run) packet(rec *decision.Record, kind replay.SourceKind) (*replay.Packet, error) {
	id, err := canon.ID(canon.PrefixReplay, r.rc.RunID, rec.RecordID, string(kind))
	if err != nil {
		return nil, err
	}
	invoke, err := canon.JSON(r.req)
	if err != nil {
		return nil, err
	}
	origin := r.rc
	if r.cp.Origin != nil {
		origin = r.cp.Origin
	}
	rcJSON, err := json.Marshal(origin)
	if err != nil {
		return nil, err
	}
	ih := canon.DigestBytes(invoke)
	content := *rec
	content.PrevRecordHash, content.RecordHash = "", ""
	rh, err := decision.Hash(&content)
	if err != nil {
		return nil, err
	}
	recJSON, _ := json.Marshal(&content)
	p := &replay.Packet{
		ReplayPacketID: id, TraceID: r.rc.TraceID, SessionID: r.rc.SessionID, SourceKind: kind, SourceRef: rec.RecordID,
		ContextPackRef: r.inputs[0].Ref.String(), RunContextRef: r.rc.RunID, KnowledgeSnapshotRef: r.rt.opts.KnowledgeSnapshot,
		CompiledContextHash: r.cc.Hash(), ToolTranscriptChainHash: r.gwRun.ChainHash(), SideEffectPolicy: replay.TranscriptOnly,
		Expected:     replay.Expected{Status: string(rec.Status), DecisionRecordHash: rh},
		LatestResult: &replay.LatestResult{Status: replay.NotRun},
		PackHashes:   map[string]string{}, Invoke: invoke, InvokeHash: ih, RunContext: rcJSON,
		Outcomes: append(slices.Clone(r.cp.Outcomes), r.rt.recorder.Outcomes(r.rc.RunID)...), Clock: append(slices.Clone(r.cp.Clock), r.clock.Readings()...),
		Record: recJSON, Resumes: r.cp.Resumes, PlannerErrors: r.cp.PlannerErrors, Interrupts: r.cp.Interrupts,
	}
	for _, in := range r.inputs {
		p.PackRefs = append(p.PackRefs, in.Ref.String())
		p.PackHashes[in.Ref.String()] = in.ContentHash
	}
	for _, pl := range r.cp.Plans {
		b, _ := json.Marshal(pl)
		p.PlannerOutput = append(p.PlannerOutput, b)
	}
	ctx := context.Background()
	if src := r.rt.opts.Evidence; src != nil {
		items, err := src.Evidence(ctx, compiler.EvidenceQuery{TenantID: r.rc.TenantID, Intent: r.cc.ContextLedger.Intent,
			SnapshotPinRule: r.prepared.Pack().IntelligenceRefs.KnowledgeGraph.SnapshotPinRule, Context: r.req.Input.Context})
		if err != nil {
			return nil, fmt.Errorf("contextos: pin evidence for replay: %w", err)
		}
		p.Evidence = items
	}
	if m := r.rt.opts.Memory; m != nil {
		items, err := m.Recall(ctx, compiler.MemoryQuery{TenantID: r.rc.TenantID, UserID: r.rc.User.UserID, Intent: r.cc.ContextLedger.Intent})
		if err != nil {
			return nil, fmt.Errorf("contextos: pin memory for replay: %w", err)
		}
		p.Memory = items
	}
	tr, ok := r.rt.gw.Transcript().(gateway.TranscriptReader)
	if !ok {
		return nil, fmt.Errorf("%w: the transcript sink cannot be read back (gateway.TranscriptReader), so the run cannot be captured for replay", ErrConfig)
	}
	entries, err := tr.RunEntries(ctx, r.rc.RunID)
	if err != nil {
		return nil, fmt.Errorf("contextos: read transcript: %w", err)
	}
	p.Transcript = entries
	return p, nil
}
