package contextos_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// approvalsDownThenSlow is an approval log whose first use freezes its
// caller until release1 and then fails (a runtime frozen in the
// approval gate's check, whose log is down when it comes back), and
// whose second use (the takeover's) waits until release2 before it
// reaches the log.
type approvalsDownThenSlow struct {
	*gateway.MemoryApprovalLog
	n                  atomic.Int32
	entered1, entered2 chan struct{}
	release1, release2 chan struct{}
}

func (l *approvalsDownThenSlow) ConsumeAction(ctx context.Context, id, action string) error {
	switch l.n.Add(1) {
	case 1:
		close(l.entered1)
		<-l.release1
		return errors.New("approval log down: secret-dsn")
	case 2:
		close(l.entered2)
		<-l.release2
	}
	return l.MemoryApprovalLog.ConsumeAction(ctx, id, action)
}

// A runtime frozen in a call's checks that end in a refusal (its
// approval log fails once it comes back), whose run was taken over while
// it was frozen, comes back: it records nothing (the run is another's)
// and stops with ErrRunInProgress; the takeover, not yet past the
// position, decides the run without losing a race. Before, the runtime
// recorded the refusal at the position the takeover had not used yet,
// and the takeover lost the race for it.
func TestARuntimeFrozenInACheckRecordsNoRefusalOnceTakenOver(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	approvals := &approvalsDownThenSlow{MemoryApprovalLog: gateway.NewMemoryApprovalLog(),
		entered1: make(chan struct{}), entered2: make(chan struct{}), release1: make(chan struct{}), release2: make(chan struct{})}
	var o contextostest.Options
	o.Now = clock.Now
	o.Runtime.Gateway.Approvals = approvals
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), &o)
	req, rc := refundRequest(t, 4200, true)
	paused := h.Invoke(req, rc)
	a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, clock.Now())
	frozen := make(chan error, 1)
	go func() {
		_, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
		frozen <- err
	}()
	<-approvals.entered1
	clock.Advance(contextos.DefaultHeartbeatTTL)
	type outcome struct {
		res *contextos.Result
		err error
	}
	took := make(chan outcome, 1)
	go func() {
		res, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Takeover: true})
		took <- outcome{res, err}
	}()
	<-approvals.entered2
	before := len(runEntries(t, h, paused.RunID))
	close(approvals.release1)
	if err := <-frozen; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the frozen runtime, back after the takeover = %v, want ErrRunInProgress", err)
	}
	if after := len(runEntries(t, h, paused.RunID)); after != before {
		t.Errorf("the runtime that came back added %d entries to the transcript of the run taken over", after-before)
	}
	close(approvals.release2)
	got := <-took
	if got.err != nil {
		t.Fatalf("takeover: %v (it lost the race for the position the runtime it took the run from recorded at)", got.err)
	}
	contextostest.AssertStatus(t, got.res, decision.Decided)
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	if _, err := gateway.VerifyTranscript(runEntries(t, h, paused.RunID)); err != nil {
		t.Errorf("the transcript does not verify: %v", err)
	}
	contextostest.AssertReplayEqual(t, h.Replay(got.res))
}
