package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"

	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/decisionhook"
	"github.com/contextos/contextos/internal/decisionspec"
	"github.com/contextos/contextos/internal/gatewayhook"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/internal/playback"
	"github.com/contextos/contextos/internal/sensitive"
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
		r.recorder.Forget(r.rc.RunID)
		failSpan(r.span, "run failed: "+errorType(err))
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
		r.observeGuardrailRefusal(ctx)
		return r.finish(ctx, decision.Rejected, nil, "must_refuse guardrail fired: "+strings.Join(r.cc.ContextLedger.GuardrailsRaised.MustRefuse, ", "))
	case policy.VerdictEscalate:
		return r.finish(ctx, decision.Escalated, nil, "must_escalate guardrail fired: "+strings.Join(r.cc.ContextLedger.GuardrailsRaised.MustEscalate, ", "))
	}
	reason := ""
	maxReplans := r.rc.RunBudget.MaxReplanAttempts
	// replan counts a replan; past the budget the run escalates.
	replan := func(why string) bool {
		cp.Replans++
		reason = why
		return cp.Replans <= maxReplans
	}
	for {
		if s := r.interrupted(ctx); !s.none() {
			return r.hardStop(ctx, s)
		}
		now := r.clock.Now()
		if err := r.meter.CheckWallClock(now); err != nil {
			return r.hardStop(ctx, stop{kind: stopBudget, why: err.Error()})
		}
		if err := r.meter.Exceeded(); err != nil {
			// A run over a budget (resumed without a larger one) asks the
			// planner nothing more, calls nothing more and is not judged
			// DECIDED: its last step may have been the one that spent it.
			return r.hardStop(ctx, stopped(stopBudget, err.Error()))
		}
		if r.long {
			// A long_running run past its session stops before it plans
			// or calls anything more.
			if s := r.sessionOver(now); !s.none() {
				return r.hardStop(ctx, s)
			}
		}
		// A takeover point: a long_running run checkpoints (and
		// heartbeats) before each planner turn; any run renews its claim.
		if err := r.point(ctx, pointTop, now, ""); err != nil {
			return nil, err
		}
		plan := cp.Plan
		if plan == nil || cp.StepIndex == 0 && resume == nil {
			if cp.Turn >= r.rt.opts.MaxTurns {
				return r.hardStop(ctx, stopped(stopLoopGuard, fmt.Sprintf("%d planner turns without a decision", cp.Turn)))
			}
			var err error
			if plan, err = r.plan(ctx, reason); err != nil {
				// A failed turn's usage is charged (r.plan): it is made
				// durable before the run stops, as a plan's is.
				if serr := r.saveSpent(ctx); serr != nil {
					return nil, serr
				}
				if werr := r.meter.CheckWallClock(r.clock.Now()); werr != nil {
					return r.hardStop(ctx, stop{kind: stopBudget, why: werr.Error()})
				}
				return r.hardStop(ctx, stopOf(err, stopPlanner))
			}
			s := r.charge(plan.Usage)
			// The turn's spend is made durable before anything else runs
			// (a critic, a tool call, the next turn): a takeover charges
			// it if this runtime dies from here on.
			if err := r.saveSpent(ctx); err != nil {
				return nil, err
			}
			if !s.none() {
				return r.hardStop(ctx, s)
			}
			j, _, err := r.judge(ctx, true, plan)
			if err != nil {
				// The plan was not verified: a resume plans again.
				return r.hardStop(ctx, stopOf(err, stopCritic))
			}
			switch j.Verdict {
			case VerdictOK, VerdictAccept:
			case VerdictReject:
				return r.finish(ctx, decision.Rejected, plan.Decision, "critic rejected the plan: "+j.Reason)
			case VerdictEscalate:
				return r.finish(ctx, decision.Escalated, nil, "critic escalated the plan: "+j.Reason)
			default: // replan, retry, or a verdict the runtime does not know
				if !replan(j.Reason) {
					return r.finish(ctx, decision.Escalated, nil, fmt.Sprintf("replans exhausted (%d): %s", maxReplans, j.Reason))
				}
				continue
			}
			// Only a verified plan is the run's plan (and a checkpoint's).
			cp.Plan, cp.StepIndex = plan, 0
		}
		// Execute the plan's steps through the gateway.
		var approvals []gateway.Approval
		var awaited *gateway.ApprovalRequest
		if resume != nil {
			approvals, awaited, resume = resume.Approvals, r.awaiting, nil
		}
		for cp.StepIndex < len(plan.Steps) {
			i := cp.StepIndex
			step := plan.Steps[i]
			call := gateway.CallRequest{CapabilityID: step.CapabilityID, Args: step.Args, EvidenceRefs: step.EvidenceRefs, IdempotencyKey: step.IdempotencyKey,
				Step: gateway.StepID{Turn: cp.planTurn(), Index: i}, ApprovalMode: step.ApprovalMode, Attachments: step.Attachments}
			if r.emit != nil {
				// A copy of the step, made only for a consumer (r.event):
				// step itself stays off the heap.
				s := step
				r.event(Event{Kind: EventToolCall, Step: &s})
			}
			if len(approvals) > 0 {
				call.Approval, call.ApprovalRequest = &approvals[0], awaited
			}
			// A caller that went away stops the run before the next call
			// (resumable: the call runs on resume).
			if s := r.interrupted(ctx); !s.none() {
				return r.hardStop(ctx, s)
			}
			// No tool call starts once a long_running session is over.
			if r.long {
				if s := r.sessionOver(r.clock.Now()); !s.none() {
					return r.hardStop(ctx, s)
				}
			}
			if err := r.point(ctx, pointCall, time.Time{}, ""); err != nil {
				return nil, err
			}
			res, err := r.gwRun.Call(r.withProgress(ctx), call)
			// The call's spend is in its result (or the run stops here):
			// no later spend save holds its attempts.
			r.call = nil
			if errors.Is(err, ErrRunInProgress) || errors.Is(err, errClaimNotRenewed) {
				// A save of the call's spend between its attempts found the
				// run taken over, or the claim could not be renewed: this
				// runtime stops, recording nothing more.
				return nil, err
			}
			if errors.Is(err, gateway.ErrPositionTaken) {
				// Another runtime recorded at this run's transcript position:
				// the run was taken over from this runtime, or this runtime
				// (a takeover) lost the race with the runtime it took the run
				// from, whose entries are past what it read. Either way it
				// stops here, recording nothing more: a stop's checkpoint
				// would hold a chain behind the transcript's, which no resume
				// continues, while a takeover once the claim lapses goes on
				// from the transcript's end.
				r.rt.opts.Logger.Error("another runtime recorded at the run's transcript position; this one stops", "run_id", r.rc.RunID)
				return nil, fmt.Errorf("%w: run %s: another runtime recorded at its transcript position: %w", ErrRunInProgress, r.rc.RunID, err)
			}
			r.noteDenial(&step, &call)
			r.observeCall(ctx, res)
			r.notePrior(res)
			if err != nil {
				// The call may have run: its result joins the run's, and
				// the run stops with a record and a resumable checkpoint.
				// A read's result the transcript does not hold (its entry,
				// or the call's, could not be recorded:
				// gateway.ErrTranscript) is not the run's: nothing may
				// rest on a tool result the transcript does not show, so
				// the step stays to be made and the resume reads again. So
				// is the refusal of a call that was not run (no attempt
				// was made: the resume makes it). A write that ran
				// (its result carries its idempotency key) is kept
				// whatever was recorded: its effect may have happened,
				// and the run's record must say so.
				if res != nil && res.Status != gateway.StatusPaused && (!errors.Is(err, gateway.ErrTranscript) || res.Metadata.IdempotencyKey != "") {
					cp.Results = append(cp.Results, StepResult{Turn: cp.planTurn(), Index: i, Step: step, Result: res, PolicyDecisions: r.gwRun.CallDecisions(res.ToolCallID)})
					cp.StepIndex++
				}
				return r.hardStop(ctx, r.gatewayFailure(step.CapabilityID, err))
			}
			r.event(Event{Kind: EventToolResult, Result: res})
			if res.Status == gateway.StatusPaused {
				return r.pause(ctx, res)
			}
			if dim := budgetDimension(res); dim != "" {
				// A spent budget is a hard stop, not a reason to replan; the
				// refused step runs again if the run is resumed with more.
				return r.hardStop(ctx, stopped(stopBudget, fmt.Sprintf("%s (%s)", dim, res.Error.Message)))
			}
			approvals, awaited = nil, nil
			cp.Results = append(cp.Results, StepResult{Turn: cp.planTurn(), Index: i, Step: step, Result: res, PolicyDecisions: r.gwRun.CallDecisions(res.ToolCallID)})
			cp.StepIndex++
			if err := r.meter.Exceeded(); err != nil {
				// The call ran and cost more than was left.
				return r.hardStop(ctx, stopped(stopBudget, err.Error()))
			}
			if r.long {
				if err := r.point(ctx, pointStep, r.clock.Now(), fmt.Sprintf("step %d of %d done", cp.StepIndex, len(plan.Steps))); err != nil {
					return nil, err
				}
			}
			// A caller that went away stops the run after the step that
			// ran (resumable), not after the rest of the plan.
			if s := r.interrupted(ctx); !s.none() {
				return r.hardStop(ctx, s)
			}
			if fired, status := r.guardrailFired(res); fired != "" {
				if status == decision.Rejected {
					r.observeGuardrailRefusal(ctx)
				}
				return r.finish(ctx, status, nil, fired)
			}
		}
		j, cont, err := r.judge(ctx, false, plan)
		if err != nil {
			return r.hardStop(ctx, stopOf(err, stopCritic))
		}
		cp.Plan, cp.StepIndex = nil, 0
		switch j.Verdict {
		case VerdictAccept:
			// The record must validate before the run is decided: the
			// planner may fix what it cited within the replan budget. The
			// record built here is the one stored.
			rec, err := r.record(ctx, decision.Decided, plan.Decision, "")
			if err != nil {
				return nil, err
			}
			if rec.Status != decision.Decided {
				if replan("violates_decision_spec: " + problemList(rec.Problems)) {
					continue
				}
				rec.Rationale.Summary = strings.TrimSpace(rec.Rationale.Summary + fmt.Sprintf(" replans exhausted (%d)", maxReplans))
			} else {
				r.consolidate(ctx, plan)
			}
			return r.store(ctx, rec)
		case VerdictEscalate:
			return r.finish(ctx, decision.Escalated, plan.Decision, j.Reason)
		case VerdictReject:
			return r.finish(ctx, decision.Rejected, plan.Decision, j.Reason)
		case VerdictRetry, VerdictReplan:
			if cont {
				reason = j.Reason
			} else if !replan(j.Reason) {
				return r.finish(ctx, decision.Escalated, nil, fmt.Sprintf("replans exhausted (%d): %s", maxReplans, j.Reason))
			}
		}
	}
}

// invalidPlan says why a plan cannot be taken, or "".
func invalidPlan(p *Plan) stop {
	if why := invalidUsage(p.Usage); why != "" {
		return stop{kind: stopInvalidUsage, why: why}
	}
	if d := p.Decision; d != nil && (d.Confidence < 0 || d.Confidence > 1) {
		return stopped(stopInvalidPlan, "the decision's confidence is outside 0 to 1")
	}
	if p.Replan != "" && (len(p.Steps) > 0 || p.Decision != nil) {
		return stopped(stopInvalidPlan, "a plan that asks to be replanned (replan) carries steps or a decision")
	}
	if !finitePlan(p) {
		return stopped(stopInvalidPlan, "the plan carries a NaN or infinite number, which has no JSON form")
	}
	return stop{}
}

// finitePlan reports whether every number of a plan is finite (JSON has no
// NaN or infinity, so nothing could record the plan otherwise).
func finitePlan(p *Plan) bool {
	for _, s := range p.Steps {
		if !jsonv.Finite(s.Args) {
			return false
		}
	}
	if d := p.Decision; d != nil && (!jsonv.Finite(d.Outputs) || !jsonv.Finite(d.Confidence)) {
		return false
	}
	for _, m := range p.Memory {
		if !jsonv.Finite(m.Confidence) {
			return false
		}
	}
	return true
}

// charge charges a planner turn's (valid) usage to the run budget: it was
// spent, so all of it is charged, and the run stops when it is over.
func (r *run) charge(u PlanUsage) stop {
	errT, errC := r.meter.ChargeIncurredTokens(u.charged()), r.meter.ChargeIncurredCost(u.CostCents)
	if t, c := u.charged(), u.CostCents; t > 0 || c > 0 {
		r.spent.Tokens = min(r.spent.Tokens+max(t, 0), canon.MaxSafeInteger)
		r.spent.CostCents = min(r.spent.CostCents+max(c, 0), canon.MaxSafeInteger)
		r.spentUnsaved = true
	}
	for _, err := range []error{errT, errC} {
		if errors.Is(err, runcontext.ErrBudgetExceeded) {
			return stopped(stopBudget, "the planner's usage exceeds the run budget: "+err.Error())
		}
		if err != nil {
			return stopped(stopInvalidUsage, err.Error())
		}
	}
	return stop{}
}

// gatewayFailure says why a gateway call that failed as a whole stops the
// run, without the store's or the adapter's own words (which may carry
// secrets; they go to the log).
func (r *run) gatewayFailure(capability string, err error) stop {
	r.rt.opts.Logger.Error("tool call failed", "run_id", r.rc.RunID, "capability", capability, "error", logWords(err))
	switch {
	case errors.Is(err, gateway.ErrAdapterPanic):
		return stopped(stopAdapterPanic, "the adapter of "+capability+" panicked")
	case errors.Is(err, gateway.ErrTranscript):
		return stopped(stopTranscript, "the result of "+capability+" could not be recorded")
	}
	return stopped(stopGatewayStore, "a store the call of "+capability+" needs failed")
}

// problemList says a record's problems in one line.
func problemList(probs []decision.Problem) string {
	parts := make([]string, len(probs))
	for i, p := range probs {
		parts[i] = string(p.Code) + " at " + p.Path + ": " + p.Message
	}
	return strings.Join(parts, "; ")
}

// plan asks the planner, under plan_timeout_ms.
func (r *run) plan(ctx context.Context, reason string) (*Plan, error) {
	cp := r.cp
	ctx, span := r.rt.tracer.Start(ctx, "plan", trace.WithAttributes(attribute.Int("contextos.turn", cp.Turn)))
	defer span.End()
	timeout := time.Duration(r.rc.RunBudget.PlanTimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = time.Duration(runcontext.DefaultRunBudget().PlanTimeoutMS) * time.Millisecond
	}
	if left := r.meter.Remaining(r.clock.Now()); left < timeout {
		timeout = left
	}
	pctx, cancel := ctx, context.CancelFunc(func() {})
	if !r.rt.inline { // an inline runtime's host bounds the turn
		pctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	call := cp.PlannerCalls
	cp.PlannerCalls++
	preq := &PlanRequest{Compiled: r.pluginCC(), Request: r.pluginReq(), Run: r.pluginRC(), Results: r.pluginResults(), Turn: cp.Turn, ReplanReason: reason, call: call, schemas: r.rt.schemas, decisions: r.decisionOptions()}
	if r.emit != nil {
		preq.deltas = newDeltaSink()
	}
	cctx, chat := r.startChat(pctx)
	plan, err := r.askPlanner(cctx, preq)
	chat.end(ctx, r, plan, err)
	if err != nil {
		var rp *replayedPlanError
		var st stop
		switch {
		case errors.As(err, &rp):
			// A packet keeps the reason only.
			st = stop{kind: stopKindOf(rp.reason), why: rp.reason}
		case errors.Is(err, ErrPanic):
			st = stopped(stopPlannerPanic, err.Error())
		case errors.Is(err, ErrUsageUnknown):
			r.rt.opts.Logger.Error("planner failed", "run_id", r.rc.RunID, "error", logWords(err))
			st = stopped(stopPlanner, "usage_unknown: the provider did not report the turn's usage")
		case ctx.Err() != nil:
			st = stopped(stopCanceled, ctx.Err().Error())
		case pctx.Err() != nil:
			st = stopped(stopPlanTimeout, fmt.Sprintf("the planner did not answer within %d ms", timeout.Milliseconds()))
		default:
			// The planner's own words may carry a secret (an upstream
			// error with a key in it): they go to the log, not the record.
			r.rt.opts.Logger.Error("planner failed", "run_id", r.rc.RunID, "error", logWords(err))
			st = stopped(stopPlanner, "the planner returned an error")
			var te interface{ Timeout() bool }
			if errors.As(err, &te) && te.Timeout() {
				st = stopped(stopPlanner, "the planner timed out")
			}
		}
		// A failed turn's reported usage is charged (and recorded with
		// the failure, for replay).
		st.why = failedTurnReason(st.why, err)
		pe := replay.PlannerError{Call: call, Reason: st.why}
		if u, ok := failedTurnUsage(err); ok {
			st = r.chargeFailedTurn(&pe, u, st.kind)
		}
		cp.PlannerErrors = append(cp.PlannerErrors, pe)
		return nil, &stopError{st}
	}
	// The run takes its own copy of the plan before anything checks,
	// verifies, executes or records it: a planner that keeps the plan it
	// returned and edits it later (at its next turn, from a goroutine, or
	// a critic that shares it) changes neither the calls the run makes
	// nor its record, checkpoint or replay packet.
	plan = clonePlan(plan)
	if plan == nil {
		plan = &Plan{}
	}
	// A plan is checked at the boundary: usage must be a finite amount
	// that is not negative, and the plan must have a JSON form (no NaN or
	// infinity in arguments, outputs or confidence), or nothing could
	// record it. Such a plan is a planner failure, recorded as one.
	if st := invalidPlan(plan); !st.none() {
		pe := replay.PlannerError{Call: call, Reason: st.why}
		if invalidUsage(plan.Usage) == "" {
			st = r.chargeFailedTurn(&pe, plan.Usage, st.kind) // the model answered
		}
		cp.PlannerErrors = append(cp.PlannerErrors, pe)
		return nil, &stopError{st}
	}
	plan = redactPlan(plan) // secrets.go: before anything sees or stores it
	if plan.Decision != nil {
		r.redactedDecision = plan.Decision
	}
	plan.Replan = boundReason(plan.Replan)
	cp.Plans = append(cp.Plans, plan)
	cp.Turn++
	r.event(Event{Kind: EventPlan, Plan: plan})
	return plan, nil
}

// pluginReq and pluginRC are the copies of the run's request and run
// context its planner and critic are given, made once per run: what a
// plugin does to them changes neither the run, its facts, its checkpoint
// (which keeps their JSON from the first save) nor the caller's.
func (r *run) pluginReq() *runcontext.InvokeRequest {
	if r.plugin.req == nil {
		r.plugin.req = r.req.Clone()
	}
	return r.plugin.req
}

func (r *run) pluginRC() *runcontext.RunContext {
	if r.plugin.rc == nil {
		r.plugin.rc = r.rc.Clone()
	}
	return r.plugin.rc
}

// pluginCC is the copy of the run's compiled context its planner and
// critic are given, made once per compile: what a plugin does to it
// changes neither what the gateway enforces (the active gates, the tool
// manifest), the run's records, checkpoint and replay packet, nor the
// compiled context the run's result carries.
func (r *run) pluginCC() *compiler.CompiledContext {
	if r.plugin.of != r.cc {
		r.plugin.cc, r.plugin.of = r.cc.Clone(), r.cc
	}
	return r.plugin.cc
}

// pluginPack is the copy of the run's pack its host critic is given,
// made once per run: the run's pack is the runtime's, which every run of
// it compiles and is governed by, so a critic's edit to it would reach
// them all.
func (r *run) pluginPack() (*pack.Pack, error) {
	if p := r.prepared.Pack(); r.plugin.packOf != p {
		c, err := p.Clone()
		if err != nil {
			return nil, err
		}
		r.plugin.pack, r.plugin.packOf = c, p
	}
	return r.plugin.pack, nil
}

// pluginResults is the list of the run's step results its planner and
// critic are given: a new list each time, whose results are copies
// (cloneStepResult) made once per run, the first time a plug-in is given
// them. What a plug-in does to them changes neither the run's results,
// its facts, record and checkpoint, nor the results it returns.
func (r *run) pluginResults() []StepResult {
	rs := r.cp.Results
	if len(r.plugin.results) > len(rs) {
		r.plugin.results = nil // not the run's results any more
	}
	for _, s := range rs[len(r.plugin.results):] {
		r.plugin.results = append(r.plugin.results, cloneStepResult(s))
	}
	return slices.Clone(r.plugin.results)
}

// cloneStepResult returns a copy of s that shares no memory with it.
func cloneStepResult(s StepResult) StepResult {
	s.Step = cloneStep(s.Step)
	s.Result = s.Result.Clone()
	s.PolicyDecisions = slices.Clone(s.PolicyDecisions)
	for i, d := range s.PolicyDecisions {
		s.PolicyDecisions[i] = d.Clone()
	}
	return s
}

// cloneStep returns a copy of s that shares no memory with it.
func cloneStep(s Step) Step {
	s.Args = jsonv.CloneObject(s.Args)
	s.EvidenceRefs, s.Attachments = slices.Clone(s.EvidenceRefs), slices.Clone(s.Attachments)
	return s
}

// clonePlan returns a copy of p that shares no memory with it.
func clonePlan(p *Plan) *Plan {
	if p == nil {
		return nil
	}
	c := *p
	c.Steps = slices.Clone(c.Steps)
	for i, s := range c.Steps {
		c.Steps[i] = cloneStep(s)
	}
	if d := c.Decision; d != nil {
		dc := *d
		dc.Outputs = jsonv.CloneObject(dc.Outputs)
		dc.SubjectIDs, dc.EvidenceRefs = slices.Clone(dc.SubjectIDs), slices.Clone(dc.EvidenceRefs)
		c.Decision = &dc
	}
	c.Memory = slices.Clone(c.Memory)
	for i := range c.Memory {
		m := &c.Memory[i]
		m.SubjectIDs, m.EvidenceRefs = slices.Clone(m.SubjectIDs), slices.Clone(m.EvidenceRefs)
	}
	return &c
}

// askPlanner calls the planner on its own goroutine and waits for its plan
// or ctx, whichever comes first: a planner that ignores its context is cut
// off at its deadline and its late plan discarded. A panic is a
// *PanicError.
func (r *run) askPlanner(ctx context.Context, req *PlanRequest) (*Plan, error) {
	if r.rt.inline {
		return r.askInline(ctx, req)
	}
	done := make(chan planAnswer, 1)
	var deltas chan PlanDelta // nil (never ready) when the run is not streamed
	if req.deltas != nil {
		deltas = req.deltas.ch
		defer req.deltas.close()
	}
	r.handoff(func() {
		var a planAnswer
		defer func() {
			if p := recover(); p != nil {
				a = planAnswer{err: r.rt.recovered(p, "planner", r.rc.RunID)}
			}
			done <- a
		}()
		a.plan, a.err = r.rt.planner.Plan(ctx, req)
	})
	for {
		select {
		case d := <-deltas:
			// Deltas are emitted on the run's goroutine, in order, while
			// the turn lasts.
			if r.emit != nil {
				// A delta belongs to the turn being planned (the plan
				// event that follows carries the same turn).
				r.emit(Event{Kind: EventPlanDelta, RunID: r.rc.RunID, Turn: r.cp.Turn, Delta: &d})
			}
		case a := <-done:
			if a.err == nil && ctx.Err() != nil {
				// Answered, but after its deadline: the plan is not used
				// (its usage is charged).
				return nil, lateAnswer(ctx, a)
			}
			return a.plan, a.err
		case <-ctx.Done():
			if req.deltas != nil {
				req.deltas.close() // a late Emit must not hold the planner
			}
			r.abandonWorker()
			return nil, awaitAbandoned(ctx, done)
		}
	}
}

// boundReason keeps at most MaxReplanBytes of a planner's replan reason,
// as valid UTF-8.
func boundReason(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxReplanBytes {
		return s
	}
	s = s[:MaxReplanBytes]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// judge runs the built-in critic, then the host critic, which can only make
// the verdict stricter.
//
// cont reports the built-in critic's judgement that the plan ran its
// steps and proposed no decision yet, kept (no stricter host verdict):
// the planner is asked again without counting a replan.
func (r *run) judge(ctx context.Context, verify bool, plan *Plan) (j Judgement, cont bool, err error) {
	name := "score"
	if verify {
		name = "verify"
	}
	ctx, span := r.rt.tracer.Start(ctx, name)
	defer span.End()
	// The built-in critic judges by the run's own compiled context, run
	// context, request and step results (it only reads them:
	// TestBuiltinCriticEditsNothing), clipped so that even an append
	// could not write into the run's list; the host critic is given the
	// plug-ins' copies, which the planner may have edited.
	in := &CriticInput{Compiled: r.cc, Pack: r.prepared.Pack(), Run: r.rc, Request: r.req, Plan: plan, Results: slices.Clip(r.cp.Results), Turn: r.cp.planTurn(), Replans: r.cp.Replans}
	if verify {
		j = r.rt.builtin.verify(in, r.cp)
	} else {
		j, cont = r.rt.builtin.score(in, r.runPolicy(), r.facts())
	}
	if c := r.rt.opts.Critic; c != nil {
		host := *in
		host.Compiled, host.Run, host.Request, host.Results = r.pluginCC(), r.pluginRC(), r.pluginReq(), r.pluginResults()
		if host.Pack, err = r.pluginPack(); err != nil {
			r.rt.opts.Logger.Error("host critic: the pack could not be copied", "run_id", r.rc.RunID, "error", logWords(err))
			return Judgement{}, false, &stopError{stopped(stopCritic, "the pack could not be copied for the host critic")}
		}
		// The plan is the run's, which it goes on to execute and records:
		// the critic judges a copy.
		host.Plan = clonePlan(plan)
		hj, err := r.hostCritic(ctx, c, verify, &host)
		if err != nil {
			// The critic's own words go to the log, not the record.
			r.rt.opts.Logger.Error("host critic failed", "run_id", r.rc.RunID, "error", logWords(err))
			if errors.Is(err, ErrPanic) {
				return Judgement{}, false, &stopError{stopped(stopCritic, "the host critic panicked")}
			}
			return Judgement{}, false, &stopError{stopped(stopCritic, "the host critic returned an error")}
		}
		hs, known := hj.Verdict.severity()
		if !known {
			// A verdict the runtime does not know ("REJECT", "deny",
			// none) is not a pass: it fails closed, as a replan (its
			// text, the host's, is not quoted).
			hj = Judgement{Verdict: VerdictReplan, Reason: "the host critic returned a verdict the runtime does not know"}
			hs, _ = hj.Verdict.severity()
		}
		if js, _ := j.Verdict.severity(); hs > js {
			// The host critic's reason is free text from outside the run,
			// as an approver's is (denialReason): it reaches the verdict
			// event, the next turn's replan reason and the record with
			// every built-in rule applied, personal data as well as
			// secrets.
			hj.Reason, _ = sensitive.Redact(hj.Reason, sensitive.All)
			j, cont = hj, false
		}
	}
	if span.IsRecording() { // a span that does not record ignores attributes
		span.SetAttributes(attribute.String("contextos.verdict", string(j.Verdict)))
	}
	if r.emit != nil {
		// A copy of the verdict, made only for a consumer (r.event): j
		// itself stays off the heap.
		v := j
		r.event(Event{Kind: EventVerdict, Verdict: &v})
	}
	return j, cont, nil
}

// runPolicy is the run-level policy evaluation the gateway enforces, as
// the run holds it (gatewayhook.RunPolicy), not the copy Run.Policy hands
// out: only the built-in critic reads it, and it changes nothing it reads
// (TestBuiltinCriticEditsNothing).
func (r *run) runPolicy() *policy.Evaluation {
	pol, _ := gatewayhook.RunPolicy(r.gwRun).(*policy.Evaluation)
	return pol
}

// hostCritic asks the host critic, turning a panic into a *PanicError.
func (r *run) hostCritic(ctx context.Context, c Critic, verify bool, in *CriticInput) (j Judgement, err error) {
	defer func() {
		if p := recover(); p != nil {
			j, err = Judgement{}, r.rt.recovered(p, "critic", r.rc.RunID)
		}
	}()
	if verify {
		return c.Verify(ctx, in)
	}
	return c.Score(ctx, in)
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
func (r *run) interrupted(ctx context.Context) stop {
	n := r.cp.Checks
	r.cp.Checks++
	if r.rt.mode == ModeReplay {
		for _, in := range r.rt.replayed.interrupts {
			if in.Check == n {
				return stop{kind: stopCanceled, why: in.Reason}
			}
		}
		return stop{}
	}
	if err := ctx.Err(); err != nil {
		s := stopped(stopCanceled, err.Error())
		r.cp.Interrupts = append(r.cp.Interrupts, replay.Interrupt{Check: n, Reason: s.why})
		return s
	}
	return stop{}
}

// guardrailFired reports a tool result that raises a guardrail label: why
// (the record's reason) and the status it ends the run with, REJECTED for
// a must_refuse label and ESCALATED for a must_escalate one; "" if none.
func (r *run) guardrailFired(res *gateway.ToolResultEnvelope) (why string, status decision.Status) {
	g := r.prepared.Pack().PolicyLayer.Guardrails
	for _, l := range slices.Concat(res.RiskTags, res.Metadata.Signals) {
		if slices.Contains(g.MustRefuse, l) {
			return "must_refuse guardrail " + l + " raised by " + res.CapabilityID, decision.Rejected
		}
	}
	for _, l := range slices.Concat(res.RiskTags, res.Metadata.Signals) {
		if slices.Contains(g.MustEscalate, l) {
			return "must_escalate guardrail " + l + " raised by " + res.CapabilityID, decision.Escalated
		}
	}
	return "", ""
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
		if !slices.Contains(mp.WriteClassesAllowed, pack.WriteClass(p.WriteClass)) || !mp.ConsentGating.PIIWriteBackAllowed && holdsPII(p) {
			continue
		}
		p.RunID = r.rc.RunID
		keep = append(keep, p)
	}
	if len(keep) > 0 {
		if err := r.propose(ctx, keep); err != nil {
			r.rt.opts.Logger.Warn("memory proposals not accepted", "run_id", r.rc.RunID, "error", logWords(err))
		}
	}
}

// holdsPII reports a memory proposal that is personal data: the planner
// says so (PII), or the PII detectors find some in its content or its
// subject ids, whatever the planner says.
func holdsPII(p MemoryProposal) bool {
	if p.PII {
		return true
	}
	if _, found := sensitive.Detect(p.Content, sensitive.PII); found {
		return true
	}
	return slices.ContainsFunc(p.SubjectIDs, func(s string) bool {
		_, found := sensitive.Detect(s, sensitive.PII)
		return found
	})
}

// propose hands proposals to the memory store, turning a panic into a
// *PanicError.
func (r *run) propose(ctx context.Context, keep []MemoryProposal) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = r.rt.recovered(p, "memory store", r.rc.RunID)
		}
	}()
	return r.rt.opts.Memory.Propose(ctx, keep)
}

// pause persists the checkpoint before the pause is reported, then records
// a DEFERRED decision that says what is awaited.
func (r *run) pause(ctx context.Context, res *gateway.ToolResultEnvelope) (*Result, error) {
	cp := r.cp
	ctx, cancel := detached(ctx)
	defer cancel()
	if res.Approval == nil {
		// Only approval gates pause today; a pause on anything else (an
		// external dependency) fails closed until a transport brings one.
		return r.hardStop(ctx, stop{kind: stopPause, why: "paused on " + res.CapabilityID + " without an approval request; external-dependency pauses are not supported"})
	}
	cp.Pending, cp.Active = res.Approval, false
	// The record reads the clock before the snapshot, so the packet keeps
	// that reading (a replay serves it to the same record).
	rec, err := r.record(ctx, decision.Deferred, nil, "awaiting approval on "+res.Approval.GateID)
	if err != nil {
		return nil, err
	}
	r.snapshotInto(cp)
	cp.Deferred = rec.RecordID
	cp.Open = append(cp.Open, rec.RecordID)
	// The checkpoint is saved first, holding the record as unconfirmed
	// and counting it in the sequence: if the append fails, or the
	// process dies before its answer, the store may hold the record or
	// not, and the resume (or Invoke again) stores it or adopts the
	// store's copy before it goes on (Runtime.confirmPause). The run's
	// later record ids are those of a run whose pause was stored.
	cp.Seq++
	cp.Unconfirmed = &unconfirmedRecord{Record: rec}
	if err := r.rt.saveOwnCheckpoint(ctx, cp); err != nil {
		return nil, fmt.Errorf("contextos: checkpoint before pause: %w", err)
	}
	stored, err := r.append(ctx, rec)
	if err != nil {
		return nil, fmt.Errorf("contextos: store record: %w", err)
	}
	cp.Unconfirmed = nil
	if err := r.rt.saveOwnCheckpoint(ctx, cp); err != nil {
		return nil, fmt.Errorf("contextos: checkpoint: %w", err)
	}
	r.observeRecord(ctx, stored)
	r.rt.notifyPause(ctx, cp)
	r.event(Event{Kind: EventPause, Pause: res.Approval})
	r.event(Event{Kind: EventDecision, Record: stored})
	return &Result{RunID: r.rc.RunID, Status: decision.Deferred, Record: stored, Compiled: r.cc, ToolResults: r.toolResults(res), Pending: res.Approval, Notices: r.notices()}, nil
}

// snapshotInto saves what a resume on another runtime needs: usage, the
// transcript chain, and the replay inputs recorded so far.
func (r *run) snapshotInto(cp *checkpointState) {
	u := r.meter.Usage()
	cp.Usage = PlanUsage{Tokens: u.Tokens, CostCents: u.CostCents}
	cp.MeterUsage = u
	cp.Chain = r.gwRun.ChainState()
	r.takeInputs(cp)
	// The usage holds every charge so far: none is left for a takeover
	// to charge on top of it.
	cp.SpentSincePoint, r.spent, r.spentUnsaved = nil, replay.Spent{}, false
	cp.CallInProgress, r.call = nil, nil
	cp.FailedSincePoint, r.failedSince = nil, nil
}

// hardStop fails closed: an ESCALATED record and a resumable checkpoint
// (store saves the checkpoint, with the record, before the append).
func (r *run) hardStop(ctx context.Context, s stop) (*Result, error) {
	failSpan(r.span, "run stopped: "+string(s.kind))
	r.cp.Stopped, r.cp.Active = s.why, false
	return r.finish(ctx, decision.Escalated, nil, s.why)
}

func (r *run) toolResults(extra ...*gateway.ToolResultEnvelope) []*gateway.ToolResultEnvelope {
	out := make([]*gateway.ToolResultEnvelope, 0, len(r.cp.Results)+len(extra))
	for _, s := range r.cp.Results {
		out = append(out, s.Result)
	}
	return append(out, extra...)
}

// finish records the terminal decision, closes a deferred record, captures
// a replay packet when due and returns the result. Its writes use a context
// detached from the caller's: whatever ran is recorded.
func (r *run) finish(ctx context.Context, status decision.Status, prop *DecisionProposal, why string) (*Result, error) {
	rec, err := r.record(ctx, status, prop, why)
	if err != nil {
		if r.cp.Stopped != "" {
			// A hard stop without its record still leaves the run
			// resumable.
			if serr := r.saveStopped(ctx, "checkpoint at hard stop not saved", ""); serr != nil {
				return nil, serr
			}
		}
		return nil, err
	}
	return r.store(ctx, rec)
}

// append appends rec to the decision store. A store can fail after it
// stored the record (the commit's answer lost, the caller's wait given
// up): an append that fails is looked up by its id, and a stored record
// that is rec sealed after its predecessor is rec stored, so the run is
// not left "not recorded" with its record in the chain (its resume would
// meet its own record as a duplicate id).
func (r *run) append(ctx context.Context, rec *decision.Record) (*decision.Record, error) {
	stored, err := r.rt.opts.Decisions.Append(ctx, rec)
	if err == nil {
		return stored, nil
	}
	// The lookup gets its own time: the append may have failed because
	// ctx ran out, after the store had committed.
	lctx, cancel := detached(ctx)
	defer cancel()
	got, gerr := r.rt.opts.Decisions.Get(lctx, rec.RecordID)
	if gerr != nil || got == nil {
		return nil, err
	}
	// The store's copy is checked, not trusted: it must hash to its own
	// record_hash, and be this record sealed after the predecessor it
	// names. The run goes on with its own sealed copy.
	sealed, ok := sealedAs(rec, got)
	if h, herr := decision.Hash(got); !ok || herr != nil || h != got.RecordHash {
		return nil, err
	}
	r.rt.opts.Logger.Warn("the decision store failed an append it had stored", "run_id", r.rc.RunID, "record_id", rec.RecordID, "error", logWords(err))
	return sealed, nil
}

// sealedAs returns rec sealed after the predecessor stored names, when
// that has stored's record_hash: stored is then rec as a store sealed it.
func sealedAs(rec, stored *decision.Record) (*decision.Record, bool) {
	sealed, _, err := decision.Seal(rec, stored.PrevRecordHash)
	if err != nil || sealed.RecordHash != stored.RecordHash {
		return nil, false
	}
	return sealed, true
}

// store stores the run's terminal record (see finish).
func (r *run) store(ctx context.Context, rec *decision.Record) (*Result, error) {
	ctx, cancel := detached(ctx)
	defer cancel()
	if err := r.nameReplayPacket(rec); err != nil {
		return nil, err
	}
	// A takeover point: a run that still holds its claim renews it if it
	// is due, and a run taken over meanwhile stops here, its record not
	// stored (the takeover's run records).
	if err := r.point(ctx, pointEnd, time.Time{}, ""); err != nil {
		return nil, err
	}
	if r.cp.Stopped != "" {
		// A hard stop's checkpoint is saved first (the run is resumable
		// without waiting for its record), holding the record as
		// unconfirmed: if the append fails, or the process dies before
		// the record's bookkeeping is saved, a Resume or the same Invoke
		// again settles the run with this very record (settle), and a
		// resume cannot go on without it. A checkpoint store that fails
		// here does not keep the record from being stored: what ran is
		// never left without one. A run's final decision is not written
		// ahead (that would be a checkpoint write on every run): if its
		// runtime dies after the append, the run stays claimed and the
		// takeover finds the record in the decision store (reconcile).
		r.cp.Unconfirmed = &unconfirmedRecord{Record: rec, Stopped: r.cp.Stopped}
		if err := r.saveStopped(ctx, "checkpoint at hard stop not saved", rec.RecordID); err != nil {
			return nil, err
		}
	}
	stored, err := r.append(ctx, rec)
	if err != nil {
		return nil, r.unconfirmed(ctx, rec, err)
	}
	return r.recorded(ctx, rec, stored)
}

// stopNotStored is the stop of a run whose terminal record the decision
// store failed to confirm.
const stopNotStored = "record_not_stored: the decision store failed"

// unconfirmed stops a run whose terminal record rec the decision store
// failed with err and could not be found stored: the store may hold it
// or not (its commit's answer lost, the store unreachable for the
// lookup). The checkpoint keeps rec, so the run's decision is made once:
// a resume or a repeated Invoke settles it (settle) by storing that very
// record, never by planning again. It returns the error Invoke reports.
func (r *run) unconfirmed(ctx context.Context, rec *decision.Record, err error) error {
	r.cp.Unconfirmed = &unconfirmedRecord{Record: rec, Stopped: r.cp.Stopped}
	r.cp.Stopped = stopNotStored
	if serr := r.saveStopped(ctx, "checkpoint not saved after the record failed", rec.RecordID); serr != nil {
		return serr
	}
	return fmt.Errorf("contextos: store record: %w", err)
}

// saveStopped saves the checkpoint of a run that stops here (not active,
// with what it recorded so far), on its own time (ctx may be what ran
// out). A save that fails is logged as what: the caller goes on to store
// or report the record, since what ran is never left without one. A save
// refused because the checkpoint moved on is the exception: a takeover
// has the run, and this runtime stops without recording anything more
// (the error, ErrRunInProgress).
func (r *run) saveStopped(ctx context.Context, what, recordID string) error {
	r.cp.Active = false
	r.snapshotInto(r.cp)
	sctx, cancel := detached(ctx)
	defer cancel()
	if err := r.rt.saveOwnCheckpoint(sctx, r.cp); err != nil {
		if errors.Is(err, ErrCheckpointConflict) {
			return r.claimLost(err)
		}
		r.rt.opts.Logger.Error(what, "run_id", r.rc.RunID, "record_id", recordID, "error", logWords(err))
	}
	return nil
}

// recorded finishes a run whose terminal record rec the decision store
// holds as stored: it closes the run's open records, saves the final
// checkpoint, captures the replay packet when due and returns the result.
func (r *run) recorded(ctx context.Context, rec, stored *decision.Record) (*Result, error) {
	seq := r.cp.Seq
	r.cp.Seq++
	// Every IN_FLIGHT, DEFERRED (and earlier hard stop's ESCALATED) record
	// of the run is closed, in order, by a CLOSED record naming it.
	for _, open := range r.cp.openRecords() {
		closed := *rec
		closed.Status, closed.Closes = decision.Closed, open
		closed.SetReplayPacketID("") // the run's packet pins rec, not this copy
		closed.RecordID, _ = decisionspec.RecordID(r.rc.RunID, rec.DecisionKey, string(decision.Closed), r.cp.Seq)
		if _, err := r.append(ctx, &closed); err != nil {
			// The run's record is stored and a closing one failed: the
			// run is settled as one whose record is unconfirmed, from the
			// same sequence number, so the settle derives the same ids and
			// adopts what is already stored (rec, earlier closings).
			r.cp.Seq = seq
			return nil, r.unconfirmed(ctx, rec, fmt.Errorf("closing record of %s: %w", open, err))
		}
		r.cp.Seq++
	}
	r.cp.Open, r.cp.Deferred, r.cp.Unconfirmed = nil, "", nil
	// A hard-stopped run stays resumable; its ESCALATED record is closed
	// by the record its resume ends with.
	r.snapshotInto(r.cp)
	r.cp.Terminal, r.cp.Active = r.cp.Stopped == "", false
	if !r.cp.Terminal {
		r.cp.Deferred, r.cp.Open = stored.RecordID, []string{stored.RecordID}
	}
	defer r.recorder.Forget(r.rc.RunID)
	if err := r.rt.saveOwnCheckpoint(ctx, r.cp); err != nil {
		return nil, fmt.Errorf("contextos: checkpoint: %w", err)
	}
	res := &Result{RunID: r.rc.RunID, Status: stored.Status, Record: stored, Compiled: r.cc, ToolResults: r.toolResults(), Notices: r.notices()}
	if r.span.IsRecording() {
		r.span.SetAttributes(attribute.String("contextos.decision_status", string(stored.Status)))
	}
	r.observeRecord(ctx, stored)
	if capture := r.capture(stored); capture && r.inputsLost {
		r.rt.opts.Logger.Error("replay packet not captured: the run's runtime died before it saved the run's replay inputs", "run_id", r.rc.RunID, "record_id", stored.RecordID)
	} else if capture {
		// The record is stored: a packet that cannot be captured is logged
		// and the result says none was (ReplayPacketID empty).
		p, err := r.packet(stored, replay.SourceDecisionRecord)
		if err == nil {
			err = r.rt.savePacket(ctx, p)
		}
		if err != nil {
			r.rt.opts.Logger.Error("replay packet not captured", "run_id", r.rc.RunID, "record_id", stored.RecordID, "error", logWords(err))
		} else {
			res.ReplayPacketID = p.ReplayPacketID
		}
	}
	r.event(Event{Kind: EventDecision, Record: stored})
	return res, nil
}

// capture decides whether to keep a replay packet: failed runs always;
// others by the sample rate, by run id.
func (r *run) capture(rec *decision.Record) bool {
	if r.rt.mode == ModeReplay {
		return false
	}
	if rec.Status == decision.Rejected || rec.Status == decision.Escalated {
		return true
	}
	if r.rt.opts.ReplaySampleRate >= 1 {
		return true
	}
	// Asked when the record is named (nameReplayPacket) and again when it
	// is stored: the run id is digested once.
	if !r.sample.known {
		h, _ := canon.Digest(r.rc.RunID)
		x, _ := strconv.ParseUint(h[len("sha256:"):len("sha256:")+8], 16, 32)
		r.sample.known, r.sample.in = true, float64(x)/float64(1<<32) < r.rt.opts.ReplaySampleRate
	}
	return r.sample.in
}

// record builds the run's DecisionRecord.
func (r *run) record(ctx context.Context, status decision.Status, prop *DecisionProposal, why string) (*decision.Record, error) {
	_, span := r.rt.tracer.Start(ctx, "record")
	defer span.End()
	rec, err := r.build(r.clock.Now(), status, prop, why)
	if rec == nil {
		return nil, err
	}
	// A record that does not validate is still kept (never dropped): a
	// DECIDED one was lowered to ESCALATED, and every such record names
	// its problems.
	if err != nil {
		r.rt.opts.Logger.Warn("decision record has problems", "run_id", r.rc.RunID, "record_id", rec.RecordID, "error", logWords(err))
	}
	return rec, nil
}

// build builds the record of the run at t.
func (r *run) build(t time.Time, status decision.Status, prop *DecisionProposal, why string) (*decision.Record, error) {
	facts := r.facts()
	key := ""
	if prop != nil {
		if _, ok := decisionspec.For(facts.Pack, prop.DecisionKey); !ok {
			// A proposal for a decision the pack does not have (a host
			// critic may end the run on one) is named, not recorded.
			why = strings.TrimSpace(fmt.Sprintf("%s (the plan proposed decision %.80q, which is not in the pack)", why, prop.DecisionKey))
			prop = nil
		}
	}
	in := decision.BuildInput{Run: r.rc, RequestID: r.req.RequestID, Seq: r.cp.Seq, Time: t, Status: status, Facts: facts, ClaimVerification: r.identity}
	if prop != nil {
		key = prop.DecisionKey
		in.Outcome, in.Outputs, in.Confidence = prop.Outcome, prop.Outputs, prop.Confidence
		if prop == r.redactedDecision {
			// redactPlan redacted these very outputs, in the run's own
			// copy of the plan: Build does not redact them again.
			decisionhook.OutputsRedacted(&in)
		}
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
	in.PolicyDecisions = r.policyDecisions()
	for _, s := range r.cp.Results {
		res := s.Result
		if res.Metadata.Approver != "" {
			gate := res.Metadata.ApprovalGateID
			mode, ok := capabilityMode(r.cc, res.CapabilityID)
			if !ok {
				mode = runcontext.Destructive
			}
			in.Approvals = append(in.Approvals, decision.Approval{GateID: gate, Approver: res.Metadata.Approver, ApproverRole: facts.ActiveGates[gate],
				ApprovalModeEffective: mode, EvidenceSnapshotHash: res.Metadata.ApprovalEvidenceSnapshotHash,
				DecidedAt: res.Metadata.ApprovedAt, ToolCallID: res.ToolCallID, ApprovalID: res.Metadata.ApprovalID})
		}
	}
	in.Approvals = append(in.Approvals, r.cp.Denials...)
	if status == decision.Deferred && r.cp.Pending != nil {
		a := r.cp.Pending
		in.Awaiting = &decision.Awaiting{Kind: "approval", GateID: a.GateID, ApproverRole: a.ApproverRole, ToolCallID: a.ToolCallID,
			ActionDigest: a.ActionDigest, EvidenceSnapshotHash: a.EvidenceSnapshotHash, TTLSeconds: a.TTLSeconds}
	}
	u := r.meter.Usage()
	in.Budget = decision.BudgetUsage{Tokens: u.Tokens, ToolCalls: u.ToolCalls, CostUSDCents: u.CostCents, WallClockMS: u.WallClockMS}
	in.Lineage = decision.Lineage{PackVersion: r.inputs[0].Ref.String(), PackContentHash: r.inputs[0].ContentHash,
		SnapshotVersion: r.rt.opts.KnowledgeSnapshot, CompiledContextHash: r.cc.Hash(), ToolTranscriptChainHash: r.gwRun.ChainState().Hash,
		DataClassification: string(r.cc.ContextLedger.DataClassification)}
	in.LedgerHash = r.cc.ContextLedger.LedgerHash
	return decision.Build(in)
}

// policyDecisions are the record's policy decisions: the run's rule
// decisions, then every other decision a tool call was bound to. A call
// bound to the run's evaluation lists the run's rules; a call with its own
// evaluation (the policy reads tool data) lists the rules that applied to
// that call, or the one rule whose decision it is bound to.
func (r *run) policyDecisions() []decision.PolicyDecisionRef {
	ledger := r.cc.ContextLedger.PolicyResults
	out := make([]decision.PolicyDecisionRef, 0, len(ledger))
	rules := make([]string, 0, len(ledger))
	// Each run decision's one rule id is its own list, cut from one array
	// and capped at one: appending to one cannot write into another.
	ids := make([]string, len(ledger))
	for i, d := range ledger {
		ids[i] = d.RuleID
		out = append(out, decision.PolicyDecisionRef{PolicyDecisionID: d.PolicyDecisionID, RuleIDs: ids[i : i+1 : i+1]})
		if !slices.Contains(rules, d.RuleID) {
			rules = append(rules, d.RuleID)
		}
	}
	for _, s := range r.cp.Results {
		id := s.Result.PolicyDecisionID
		if id == nil || slices.ContainsFunc(out, func(p decision.PolicyDecisionRef) bool { return p.PolicyDecisionID == *id }) {
			continue
		}
		out = append(out, decision.PolicyDecisionRef{PolicyDecisionID: *id, RuleIDs: callRules(s, *id, rules)})
	}
	return out
}

// callRules are the rule ids of the decision a call's result is bound to
// (id): the one rule when id is a decision of the call's own evaluation,
// else every rule of that evaluation, or the run's rules when the call has
// no evaluation of its own.
func callRules(s StepResult, id string, runRules []string) []string {
	if len(s.PolicyDecisions) == 0 {
		return slices.Clone(runRules)
	}
	for _, d := range s.PolicyDecisions {
		if d.PolicyDecisionID == id {
			return []string{d.RuleID}
		}
	}
	out := make([]string, 0, len(s.PolicyDecisions))
	for _, d := range s.PolicyDecisions {
		if !slices.Contains(out, d.RuleID) {
			out = append(out, d.RuleID)
		}
	}
	return out
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

// facts are what the run established, for the decision record and the
// built-in critic.
//
// The facts are shared by the calls made with the same inputs (see
// factsMemo): a caller must not change them.
func (r *run) facts() *decision.Facts {
	var fetched []compiler.EvidenceItem
	if r.pins != nil {
		fetched = r.pins.fetched() // runFacts only reads it
	}
	key := factsKey{pack: r.prepared.Pack(), cc: r.cc, req: r.req, results: first(r.cp.Results), nResults: len(r.cp.Results), fetched: first(fetched), nFetched: len(fetched), pending: r.cp.Pending}
	if m := &r.factsMemo; m.f != nil && m.key == key {
		return m.f
	}
	m := &r.factsMemo
	if m.refsOf != r.cc {
		m.refs, m.refsOf = ledgerPolicyRefs(r.cc), r.cc
	}
	f := runFactsWith(key.pack, r.cc, r.req, r.cp.Results, fetched, m.refs)
	if p := r.cp.Pending; p != nil {
		// The gate the run is paused on holds a call: a DEFERRED record
		// lists it among its controls.
		addHeldGate(f, p.GateID, p.ApproverRole, false)
	}
	m.key, m.f = key, f
	return f
}

// factsMemo is a run's latest facts and the inputs they were built from.
type factsMemo struct {
	key factsKey
	f   *decision.Facts
	// refs are the policy refs of refsOf's run decisions
	// (ledgerPolicyRefs), made once per compiled context: strings, which
	// every facts built from it lists (each in a list of its own).
	refsOf *compiler.CompiledContext
	refs   []string
}

// factsKey is what a run's facts are built from: the pack, compiled
// context, request and pending call (none of which the run changes in
// place: each is replaced when it changes), and the run's results and
// fetched evidence, which only grow by append (never edited in place), so
// the same first element and length are the same list.
type factsKey struct {
	pack     *pack.Pack
	cc       *compiler.CompiledContext
	req      *runcontext.InvokeRequest
	pending  *gateway.ApprovalRequest
	results  *StepResult // the first, nil when none
	nResults int
	fetched  *compiler.EvidenceItem // the first, nil when none
	nFetched int
}

// first is the address of l's first element, nil when l is empty.
func first[T any](l []T) *T {
	if len(l) == 0 {
		return nil
	}
	return &l[0]
}

// isPolicyRef reports whether ref is "policy:" + bundle + "#" + rule,
// without making that string.
func isPolicyRef(ref, bundle, rule string) bool {
	const prefix = "policy:"
	return len(ref) == len(prefix)+len(bundle)+1+len(rule) && ref[:len(prefix)] == prefix &&
		ref[len(prefix):len(prefix)+len(bundle)] == bundle && ref[len(prefix)+len(bundle)] == '#' && ref[len(prefix)+len(bundle)+1:] == rule
}

// runFacts are what a run established: the admitted evidence with its
// kind, the succeeded tool results, the policy outcomes (with the rules
// that applied and what they require) and attachments, the active gates
// and controls. The record is validated against them, and the critic
// checks required evidence with them.
//
// The compiled evidence manifest carries each admitted item's ref, not its
// kind (the manifest is hashed into compiled_context_hash, so its shape
// stays), so the kind is taken from the items the run's evidence source
// returned to the compile (fetched, what a replay packet pins): the
// compiler admits only the first item of a ref, so that item is the
// admitted one when its source and hash agree with the manifest entry.
// An entry no fetched item agrees with keeps the kind "", which satisfies
// no name (fail closed).
func runFacts(p *pack.Pack, cc *compiler.CompiledContext, req *runcontext.InvokeRequest, results []StepResult, fetched []compiler.EvidenceItem) *decision.Facts {
	return runFactsWith(p, cc, req, results, fetched, ledgerPolicyRefs(cc))
}

// ledgerPolicyRefs are the policy refs of cc's run decisions, in order:
// "policy:" + bundle + "#" + rule.
func ledgerPolicyRefs(cc *compiler.CompiledContext) []string {
	ds := cc.ContextLedger.PolicyResults
	if len(ds) == 0 {
		return nil
	}
	refs := make([]string, len(ds))
	for i, d := range ds {
		refs[i] = "policy:" + d.BundleID + "#" + d.RuleID
	}
	return refs
}

// runFactsWith is runFacts with the policy refs of cc's run decisions
// (ledgerPolicyRefs(cc)) already made.
func runFactsWith(p *pack.Pack, cc *compiler.CompiledContext, req *runcontext.InvokeRequest, results []StepResult, fetched []compiler.EvidenceItem, ledgerRefs []string) *decision.Facts {
	// The maps are sized once: a run's facts are built at every turn's
	// judgement, write check and record, and a map grown entry by entry
	// copies its table at each growth.
	active := 0
	for _, g := range cc.ContextLedger.ApprovalGates {
		if g.Active {
			active++
		}
	}
	f := &decision.Facts{Pack: p, Admitted: make(map[string]string, len(cc.Manifests.EvidenceManifest)), RequestContext: req.Input.Context,
		ActiveGates: make(map[string]string, active), PolicyEvaluated: true}
	for _, e := range cc.Manifests.EvidenceManifest {
		f.Admitted[e.EvidenceRef] = admittedKind(e, fetched)
	}
	// The rules that applied: the run's evaluation's, then each call's
	// own (a rule that reads tool data applies per call, whatever the
	// call's status; the same rule taking the same branch counts once).
	// (On the stack for a run of a few calls: appliedRules keeps none.)
	var listBuf [8][]policy.Decision
	lists := append(listBuf[:0], cc.ContextLedger.PolicyResults)
	for _, s := range results {
		lists = append(lists, s.PolicyDecisions)
	}
	f.AppliedRules = appliedRules(lists...)
	// The lists are sized once (a run's facts are built at every turn's
	// judgement, write check and record); one left empty stays nil.
	succeeded, bound, refs := 0, 0, len(cc.ContextLedger.PolicyResults)
	for _, s := range results {
		if s.Result.Status.Succeeded() {
			succeeded++
		}
		if s.Result.PolicyDecisionID != nil {
			bound++
		}
		refs += len(s.PolicyDecisions)
	}
	if succeeded > 0 {
		f.ToolResults = make([]decision.ToolFact, 0, succeeded)
	}
	if bound > 0 {
		f.BoundPolicyIDs = make([]string, 0, bound)
	}
	if refs > 0 {
		f.PolicyRefs = make([]string, 0, refs)
	}
	for _, s := range results {
		if s.Result.Status.Succeeded() {
			f.ToolResults = append(f.ToolResults, decision.ToolFact{CapabilityID: s.Result.CapabilityID, ToolCallID: s.Result.ToolCallID})
		}
		if id := s.Result.PolicyDecisionID; id != nil && !slices.Contains(f.BoundPolicyIDs, *id) {
			f.BoundPolicyIDs = append(f.BoundPolicyIDs, *id)
		}
	}
	f.PolicyRefs = append(f.PolicyRefs, ledgerRefs...)
	for _, s := range results {
		for _, d := range s.PolicyDecisions {
			// A ref already listed is not made again to be looked for.
			if !slices.ContainsFunc(f.PolicyRefs, func(ref string) bool { return isPolicyRef(ref, d.BundleID, d.RuleID) }) {
				f.PolicyRefs = append(f.PolicyRefs, "policy:"+d.BundleID+"#"+d.RuleID)
			}
		}
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
	// A gate that held a call of the run is active for the run, whether it
	// was active at compile time or for that call only (its when or a rule
	// over tool.*): the controls list it, and a call it let run needs its
	// approval in the record.
	for _, s := range results {
		gates, ran := heldBy(s.Result)
		for _, gate := range gates {
			addHeldGate(f, gate, gateRole(p, cc, gate), ran)
		}
	}
	return f
}

// heldBy returns the approval gates that held a call (its approval let
// the call run, the call is paused on it, an approval on it was refused,
// or two gates held it and it was blocked), and whether a gate let the
// call run.
func heldBy(res *gateway.ToolResultEnvelope) (gates []string, ran bool) {
	switch {
	case res.Metadata.ApprovalGateID != "":
		return []string{res.Metadata.ApprovalGateID}, true
	case res.Approval != nil:
		return []string{res.Approval.GateID}, false
	case res.Error == nil:
		return nil, false
	case res.Error.Code == gateway.CodeApprovalDenied || res.Error.Code == gateway.CodeApprovalTimeout:
		if g, _ := res.Error.Details["gate_id"].(string); g != "" {
			return []string{g}, false
		}
	case res.Error.Code == gateway.CodePermissionDenied:
		// A checkpoint's results are decoded JSON: a list is []any there.
		switch ids := res.Error.Details["gate_ids"].(type) {
		case []string:
			return ids, false
		case []any:
			for _, id := range ids {
				if s, ok := id.(string); ok {
					gates = append(gates, s)
				}
			}
			return gates, false
		}
	}
	return nil, false
}

// addHeldGate adds a gate that held a call to f's controls (in the pack's
// gate order) and, when its approval let the call run, to the gates whose
// approval a DECIDED record needs.
func addHeldGate(f *decision.Facts, gate, role string, ran bool) {
	if ran {
		if _, ok := f.ActiveGates[gate]; !ok {
			f.ActiveGates[gate] = role
		}
	}
	if slices.Contains(f.Controls.ApprovalGatesActive, gate) {
		return
	}
	gates := slices.Clone(f.Controls.ApprovalGatesActive)
	at := len(gates)
	if f.Pack != nil {
		order := func(id string) int {
			return slices.IndexFunc(f.Pack.PolicyLayer.ApprovalGates, func(g pack.ApprovalGate) bool { return g.GateID == id })
		}
		if i := slices.IndexFunc(gates, func(id string) bool { return order(id) > order(gate) }); i >= 0 {
			at = i
		}
	}
	f.Controls.ApprovalGatesActive = slices.Insert(gates, at, gate)
}

// gateRole is the approver role of gate: the compiled ledger's, or the
// pack's.
func gateRole(p *pack.Pack, cc *compiler.CompiledContext, gate string) string {
	for _, g := range cc.ContextLedger.ApprovalGates {
		if g.GateID == gate {
			return g.ApproverRole
		}
	}
	for _, g := range p.PolicyLayer.ApprovalGates {
		if g.GateID == gate {
			return g.RequiredApproverRole
		}
	}
	return ""
}

// appliedRules are the rules of the decision lists that applied with
// evidence to require, each rule taking one branch once.
func appliedRules(lists ...[]policy.Decision) []decision.AppliedRule {
	// The list is sized for every rule that requires evidence, and each
	// rule's requirements are a copy cut from one array, capped at their
	// length: appending to one cannot write into another.
	rules, requires := 0, 0
	for _, ds := range lists {
		for _, d := range ds {
			if len(d.Requires) > 0 {
				rules++
				requires += len(d.Requires)
			}
		}
	}
	if rules == 0 {
		return nil
	}
	out := make([]decision.AppliedRule, 0, rules)
	room := make([]string, 0, requires)
	for _, ds := range lists {
		for _, d := range ds {
			if len(d.Requires) == 0 || slices.ContainsFunc(out, func(b decision.AppliedRule) bool {
				return b.BundleID == d.BundleID && b.RuleID == d.RuleID && b.DecisionBinding == d.DecisionBinding && slices.Equal(b.Requires, d.Requires)
			}) {
				continue
			}
			at := len(room)
			room = append(room, d.Requires...)
			out = append(out, decision.AppliedRule{BundleID: d.BundleID, RuleID: d.RuleID, DecisionBinding: d.DecisionBinding, Requires: room[at:len(room):len(room)]})
		}
	}
	return out
}

// admittedKind is the kind of the fetched item the compiler admitted as
// manifest entry e: the first fetched item with e's ref (the compiler
// drops later ones as duplicates), when its source and hash are e's; else
// "".
func admittedKind(e compiler.EvidenceManifestEntry, fetched []compiler.EvidenceItem) string {
	i := slices.IndexFunc(fetched, func(it compiler.EvidenceItem) bool { return it.EvidenceRef == e.EvidenceRef })
	if i < 0 || fetched[i].SourceID != e.SourceID || fetched[i].Hash != e.Hash {
		return ""
	}
	return fetched[i].Kind
}

// packet captures the run for replay.
func (r *run) packet(rec *decision.Record, kind replay.SourceKind) (*replay.Packet, error) {
	id, err := playback.PacketID(r.rc.RunID, rec.RecordID, kind)
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
	rh, recJSON, err := pinnedRecord(rec)
	if err != nil {
		return nil, err
	}
	p := &replay.Packet{
		ReplayPacketID: id, TraceID: r.rc.TraceID, SessionID: r.rc.SessionID, SourceKind: kind, SourceRef: rec.RecordID,
		ContextPackRef: r.inputs[0].Ref.String(), RunContextRef: r.rc.RunID, KnowledgeSnapshotRef: r.rt.opts.KnowledgeSnapshot,
		CompiledContextHash: r.cc.Hash(), ToolTranscriptChainHash: r.gwRun.ChainState().Hash, SideEffectPolicy: replay.TranscriptOnly,
		Expected:     replay.Expected{Status: string(rec.Status), DecisionRecordHash: rh},
		LatestResult: &replay.LatestResult{Status: replay.NotRun},
		PackHashes:   map[string]string{}, Invoke: invoke, InvokeHash: ih, RunContext: rcJSON,
		Outcomes: append(slices.Clone(r.cp.Outcomes), r.recorder.Outcomes(r.rc.RunID)...), Clock: append(slices.Clone(r.cp.Clock), r.untakenReadings()...),
		Record: recJSON, Resumes: r.cp.Resumes, PriorResults: r.cp.Priors, PlannerErrors: r.cp.PlannerErrors, Interrupts: r.cp.Interrupts,
		StoreFailures: r.cp.StoreFailures,
	}
	for _, in := range r.inputs {
		p.PackRefs = append(p.PackRefs, in.Ref.String())
		p.PackHashes[in.Ref.String()] = in.ContentHash
	}
	for _, pl := range r.cp.Plans {
		b, _ := json.Marshal(pl)
		p.PlannerOutput = append(p.PlannerOutput, b)
	}
	p.Evidence, p.Memory = r.pins.pinned()
	if p.Ledger, err = pinLedger(r.cc); err != nil {
		return nil, err
	}
	ctx, cancel := detached(context.Background())
	defer cancel()
	entries, err := r.rt.transcripts.RunEntries(ctx, r.rc.RunID)
	if err != nil {
		return nil, fmt.Errorf("contextos: read transcript: %w", err)
	}
	p.Transcript = entries
	if err := p.Seal(); err != nil {
		return nil, err
	}
	return p, nil
}

// withProgress makes the progress reports of a call's adapter (an MCP
// server's progress notifications) progress events of a Stream. The
// gateway relays them on the goroutine of the adapter's Call, while the
// loop waits for the call, so they are emitted in order with the rest.
func (r *run) withProgress(ctx context.Context) context.Context {
	if r.emit == nil {
		return ctx
	}
	return gateway.WithProgress(ctx, func(p gateway.Progress) {
		r.event(Event{Kind: EventProgress, Progress: &p, Message: p.Message})
	})
}

// decisionOptions returns the run's pack decisions for its planner
// (PlanRequest.Decisions), listed once per pack: the runtime keeps the
// list of the pack its runs last compiled, which nothing writes to.
func (r *run) decisionOptions() []DecisionOption {
	if r.decisions == nil && r.prepared != nil {
		p := r.prepared.Pack()
		if m := r.rt.decisions.Load(); m != nil && m.pack == p {
			r.decisions = m.options
		} else {
			r.decisions = decisionOptions(p)
			r.rt.decisions.Store(&packDecisions{pack: p, options: r.decisions})
		}
	}
	return r.decisions
}

// packDecisions are a pack's decision options (Runtime.decisions).
type packDecisions struct {
	pack    *pack.Pack
	options []DecisionOption
}
