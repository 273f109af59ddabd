package temporalrun

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/engine"
	"github.com/contextos/contextos/runcontext"
)

// Input starts a run: the invokeAgent request and the host's RunContext,
// as Runtime.Invoke takes them.
type Input struct {
	Request *runcontext.InvokeRequest `json:"request"`
	Run     *runcontext.RunContext    `json:"run_context"`
}

// Output is how a run ended.
type Output struct {
	RunID  string          `json:"run_id"`
	Status decision.Status `json:"status"`
	// Record is the run's last DecisionRecord, as the host's store keeps it.
	Record *decision.Record `json:"decision_record"`
	// ToolResults are every tool result of the run, in order.
	ToolResults []*gateway.ToolResultEnvelope `json:"tool_results"`
	// ReplayPacketID names the run's packet in the host's packet store,
	// when one was captured.
	ReplayPacketID string `json:"replay_packet_id,omitempty"`
}

// state is what the workflow's update and query handlers see.
type state struct {
	tenant string
	// requesters are the users who asked for the run: its requesting
	// user and the users of its principal chain. None of them decides on
	// a gate that does not allow self-approval.
	requesters []string
	pending    *gateway.ApprovalRequest
	// answer is the accepted approval of the pending request.
	answer *gateway.Approval
	// used are the approval ids the run accepted: each is used once.
	used []string
}

// Workflow runs one governed run: Invoke, then, while the run pauses on
// an approval gate, the wait for UpdateApprove (or the gate's TTL) and
// Resume. Register registers it as WorkflowName.
func (h *Host) Workflow(ctx workflow.Context, in Input) (*Output, error) {
	if in.Request == nil {
		return nil, temporal.NewNonRetryableApplicationError("temporalrun: the input has no request", "invalid_input", nil)
	}
	st := &state{}
	if in.Run != nil {
		st.tenant = in.Run.TenantID
		st.requesters = append(st.requesters, in.Run.User.UserID)
	}
	st.requesters = append(st.requesters, in.Request.User.UserID)
	if err := workflow.SetQueryHandler(ctx, QueryPending, func() (*gateway.ApprovalRequest, error) { return st.pending, nil }); err != nil {
		return nil, err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateApprove, st.accept, workflow.UpdateHandlerOptions{Validator: st.validate}); err != nil {
		return nil, err
	}
	rt, err := h.runtime(ctx)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), "config", nil)
	}
	rctx := runContext{w: ctx}
	// The engine's Invoke takes the request as the run's own, as the
	// facade's hands it over (a copy): the gateway keeps it uncopied.
	res, err := rt.Invoke(rctx, in.Request.Clone(), in.Run)
	if err != nil {
		return nil, runError(err)
	}
	if res.Record != nil {
		st.tenant = res.Record.TenantID
		for _, link := range res.Record.AgentIdentity.PrincipalChain {
			if link.Kind == runcontext.PrincipalUser {
				st.requesters = append(st.requesters, link.ID)
			}
		}
	}
	for res.Status == decision.Deferred && res.Pending != nil {
		st.pending, st.answer = res.Pending, nil
		approval, err := st.await(ctx)
		if err != nil {
			return nil, err
		}
		st.pending = nil
		if res, err = rt.Resume(rctx, res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{approval}}); err != nil {
			return nil, runError(err)
		}
	}
	return &Output{RunID: res.RunID, Status: res.Status, Record: res.Record, ToolResults: res.ToolResults, ReplayPacketID: res.ReplayPacketID}, nil
}

// await waits for the answer to st.pending on a durable timer: the
// accepted approval, or, once the gate's TTL has passed or the workflow
// is cancelled, the timer's answer (timerAnswer).
func (st *state) await(ctx workflow.Context) (gateway.Approval, error) {
	p := st.pending
	deadline := p.RequestedAt.Add(time.Duration(p.TTLSeconds) * time.Second)
	for {
		left := deadline.Sub(workflow.Now(ctx))
		if left <= 0 {
			return timerAnswer(ctx, p), nil
		}
		ok, err := workflow.AwaitWithTimeout(ctx, left, func() bool { return st.answer != nil })
		switch {
		case ok:
			return *st.answer, nil
		case temporal.IsCanceledError(err):
			// The run is resumed under the cancelled context with a
			// denial: it stops at its first interruption check, before
			// the call, and ends ESCALATED with its record (were it to
			// reach the call, the denial refuses it).
			a := timerAnswer(ctx, p)
			a.Denied = true
			return a, nil
		case err != nil:
			return gateway.Approval{}, err
		}
		// The timer fired: the loop checks the deadline on workflow time.
	}
}

// timerApprover names the answer the workflow gives a pause nobody
// answered in time.
const timerApprover = "system:temporalrun-approval-timer"

// timerAnswer is what a run resumes with when its gate's TTL has passed
// (or the workflow was cancelled) without an accepted approval: an
// answer bound to the pending action, decided now, which the gateway
// refuses approval_timeout because the request is older than the gate's
// TTL. It is only ever given at or after that point (await), so it can
// never let the action run.
func timerAnswer(ctx workflow.Context, p *gateway.ApprovalRequest) gateway.Approval {
	info := workflow.GetInfo(ctx)
	return gateway.Approval{ApprovalID: "timer/" + info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + p.ToolCallID,
		GateID: p.GateID, ActionDigest: p.ActionDigest, Approver: timerApprover, ApproverRole: p.ApproverRole, DecidedAt: workflow.Now(ctx)}
}

// runError is an error of Invoke or Resume as the workflow returns it: a
// run that cannot be run is not retried.
func runError(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), "run_error", nil)
}

// runtime builds the run's runtime for workflow code: the workflow's
// clock, planner and adapters backed by activities, in-memory stores
// whose writes go to the host's stores through activities, and the
// engine marked inline (no goroutine, no deadline of its own).
func (h *Host) runtime(ctx workflow.Context) (*engine.Runtime, error) {
	o := h.cfg.Runtime
	o.Now = func() time.Time { return workflow.Now(ctx) }
	a := &acts{ctx: ctx, retries: h.cfg.ActivityRetries}
	o.Adapters = make([]gateway.Registration, len(h.cfg.Adapters))
	for i, reg := range h.cfg.Adapters {
		caps := make(map[string]gateway.Capability, len(reg.Capabilities))
		for name, c := range reg.Capabilities {
			c.HonorsContext = true // called on the workflow's goroutine
			caps[name] = c
		}
		o.Adapters[i] = gateway.Registration{AdapterID: reg.AdapterID, Adapter: &wfAdapter{a: a, adapterID: reg.AdapterID, caps: reg.Capabilities}, Capabilities: caps}
	}
	o.Gateway.Sleep = func(_ context.Context, d time.Duration) error { return workflow.Sleep(ctx, d) }
	o.Decisions = &wfRecords{a: a}
	o.Transcripts = &wfTranscript{a: a, mem: gateway.NewMemoryTranscript()}
	o.Replays = &wfPackets{a: a, mem: contextos.NewInMemoryPackets()}
	cps := contextos.NewInMemoryCheckpoints()
	cps.Now = o.Now
	o.Checkpoints = wfCheckpoints{cps}
	if o.Evidence != nil {
		o.Evidence = uncancelledEvidence{o.Evidence}
	}
	if o.Identity.Keys != nil {
		o.Identity.Keys = uncancelledKeys{o.Identity.Keys}
	}
	eo := engine.Options(o)
	rt, err := engine.New(&wfPlanner{a: a}, uncancelled(h.cfg.Registry), uncancelledKeys{h.cfg.Keys}, &eo)
	if err != nil {
		return nil, err
	}
	rt.SetInline()
	return rt, nil
}

// runContext is the context.Context the run sees in workflow code: it
// is cancelled when the workflow is, and has no deadline and no Done
// channel (workflow code selects on nothing).
type runContext struct{ w workflow.Context }

func (runContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (runContext) Done() <-chan struct{}       { return nil }
func (runContext) Value(any) any               { return nil }
func (c runContext) Err() error {
	if c.w.Err() != nil {
		return context.Canceled
	}
	return nil
}

// errTimeout is an activity that timed out, as the runtime classifies it.
type errTimeout struct{ err error }

func (e errTimeout) Error() string { return e.err.Error() }
func (e errTimeout) Unwrap() error { return e.err }
func (errTimeout) Timeout() bool   { return true }

// activityError maps the error of an activity that did not answer to
// what the runtime understands: cancelled, timed out, or failed.
func activityError(err error) error {
	var te *temporal.TimeoutError
	switch {
	case temporal.IsCanceledError(err):
		return fmt.Errorf("temporalrun: %w", context.Canceled)
	case errors.As(err, &te):
		return errTimeout{err}
	}
	return err
}
