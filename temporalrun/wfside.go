package temporalrun

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/engine"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// acts calls the activities from workflow code.
type acts struct {
	ctx     workflow.Context
	retries int32
}

// call runs activity name with timeout; store writes run on a context
// the workflow's cancellation does not reach, so a cancelled run still
// records how it ended. A cancelled workflow waits for a gateway
// attempt's answer: the adapter is not told of the cancellation (the
// activity does not heartbeat), so the attempt may still make its
// effect, and the run records what the attempt answered rather than a
// cancelled call whose effect happened.
func (a *acts) call(name string, timeout time.Duration, detached bool, out any, args ...any) error {
	ctx := a.ctx
	if detached {
		ctx, _ = workflow.NewDisconnectedContext(ctx)
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: a.retries},
		WaitForCancellation: name == activityAttempt,
	})
	f := workflow.ExecuteActivity(ctx, name, args...)
	if out == nil {
		return f.Get(ctx, nil)
	}
	return f.Get(ctx, out)
}

// wfPlanner asks the host's planner in an activity, one per turn.
type wfPlanner struct{ a *acts }

func (p *wfPlanner) Plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := engine.EncodePlanRequest(req)
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(req.Run.RunBudget.PlanTimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = time.Duration(runcontext.DefaultRunBudget().PlanTimeoutMS) * time.Millisecond
	}
	var ans planAnswer
	if err := p.a.call(activityPlan, timeout, false, &ans, b); err != nil {
		return nil, activityError(err)
	}
	if ans.Error != "" {
		err := error(errors.New(ans.Error))
		if ans.Timeout {
			err = errTimeout{err}
		}
		if ans.Usage != nil {
			return nil, &contextos.PlanUsageError{Usage: *ans.Usage, Err: err}
		}
		return nil, err
	}
	return ans.Plan, nil
}

// wfAdapter makes each attempt of its adapter's calls an activity.
type wfAdapter struct {
	a         *acts
	adapterID string
	caps      map[string]gateway.Capability
	// redacted are the calls whose last attempt's answer had its tool
	// error redacted in the activity (attemptAnswer.Redacted), until the
	// gateway asks (RedactedAttempt).
	redacted map[*gateway.Call]bool
}

// RedactedAttempt tells the gateway that the activity redacted the
// secrets of call's last attempt's tool error, so the result's
// redaction_applied is what the gateway's own redaction of the adapter's
// text would have made it.
func (w *wfAdapter) RedactedAttempt(call *gateway.Call) bool {
	r := w.redacted[call]
	delete(w.redacted, call)
	return r
}

func (w *wfAdapter) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timeout := w.caps[call.Capability].Timeout
	if timeout <= 0 {
		timeout = gateway.DefaultTimeout
	}
	var ans attemptAnswer
	if err := w.a.call(activityAttempt, timeout, false, &ans, attemptCall{AdapterID: w.adapterID, Call: call}); err != nil {
		err = activityError(err)
		var te errTimeout
		if errors.As(err, &te) {
			return nil, gateway.NewToolError(gateway.CodeTimeout, true, "the attempt's activity timed out", nil)
		}
		return nil, err
	}
	switch {
	case ans.Panicked:
		panic("temporalrun: the adapter panicked in its activity")
	case ans.ToolError != nil:
		if ans.Redacted {
			if w.redacted == nil {
				w.redacted = map[*gateway.Call]bool{}
			}
			w.redacted[call] = true
		}
		return ans.Outcome, ans.ToolError
	case ans.Error != "":
		return ans.Outcome, errors.New(ans.Error)
	}
	return ans.Outcome, nil
}

// wfRecords keeps the run's records: each append is an activity on the
// host's store, and the stored copies are read back from workflow state.
type wfRecords struct {
	a    *acts
	recs []*decision.Record
}

func (s *wfRecords) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	var stored decision.Record
	if err := s.a.call(activityRecord, storeTimeout, true, &stored, r); err != nil {
		return nil, err
	}
	s.recs = append(s.recs, &stored)
	return clone(&stored)
}

func (s *wfRecords) Get(ctx context.Context, id string) (*decision.Record, error) {
	for _, r := range s.recs {
		if r.RecordID == id {
			return clone(r)
		}
	}
	return nil, decision.ErrNotFound
}

func (s *wfRecords) List(ctx context.Context, f decision.Filter) ([]*decision.Record, error) {
	var out []*decision.Record
	for _, r := range s.recs {
		if f.Match(r) {
			c, err := clone(r)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// Verify verifies the host's store, in an activity.
func (s *wfRecords) Verify(ctx context.Context) error {
	return s.a.call(activityVerify, storeTimeout, true, nil)
}

func clone(r *decision.Record) (*decision.Record, error) {
	c := *r
	return &c, nil
}

// wfTranscript keeps the run's transcript in workflow state and appends
// each entry to the host's transcript in an activity.
type wfTranscript struct {
	a   *acts
	mem *gateway.MemoryTranscript
}

func (t *wfTranscript) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	if err := t.a.call(activityTranscript, storeTimeout, true, nil, e); err != nil {
		return err
	}
	return t.mem.Append(context.WithoutCancel(ctx), e)
}

func (t *wfTranscript) RunEntries(ctx context.Context, runID string) ([]gateway.TranscriptEntry, error) {
	return t.mem.RunEntries(context.WithoutCancel(ctx), runID)
}

// wfPackets saves the run's packet to the host's store in an activity
// and keeps it in workflow state.
type wfPackets struct {
	a   *acts
	mem *contextos.InMemoryPackets
}

func (s *wfPackets) Save(ctx context.Context, p *replay.Packet) error {
	if err := s.a.call(activityPacket, storeTimeout, true, nil, p); err != nil {
		return err
	}
	return s.mem.Save(context.WithoutCancel(ctx), p)
}

func (s *wfPackets) Get(ctx context.Context, id string) (*replay.Packet, error) {
	return s.mem.Get(context.WithoutCancel(ctx), id)
}

// wfCheckpoints keeps the run's checkpoints in workflow state; a
// cancelled workflow still reads and saves them, so its run ends with a
// record.
type wfCheckpoints struct {
	mem *contextos.InMemoryCheckpoints
}

func (s wfCheckpoints) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	return s.mem.Save(context.WithoutCancel(ctx), cp)
}

func (s wfCheckpoints) Load(ctx context.Context, runID string) (*contextos.Checkpoint, error) {
	return s.mem.Load(context.WithoutCancel(ctx), runID)
}
