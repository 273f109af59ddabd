package temporalrun_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/temporaltest"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/temporalrun"
)

// start is the workflow time the in-process tests start at.
var start = time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)

// skipEnv is a time-skipping test environment running w's host.
func skipEnv(t *testing.T, w *world) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(temporaltest.Logger())
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(start)
	// Compiling a run's context is workflow code; on a loaded machine
	// under the race detector it may take more than the default second.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	env.SetTestTimeout(2 * time.Minute)
	w.host(t).Register(env)
	return env
}

// approveAt sends approve(pending) as an update after d of workflow
// time, and records the validator's answer in *rejected.
func approveAt(t *testing.T, env *testsuite.TestWorkflowEnvironment, d time.Duration, id string, edit func(*temporalrun.Approval), rejected *error) {
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(temporalrun.QueryPending)
		if err != nil {
			t.Errorf("query pending: %v", err)
			return
		}
		var p *gateway.ApprovalRequest
		if err := v.Get(&p); err != nil || p == nil {
			t.Errorf("pending = %v, %v; want the finance gate's request", p, err)
			return
		}
		a := financeApproval(p, id)
		if edit != nil {
			edit(&a)
		}
		env.UpdateWorkflow(temporalrun.UpdateApprove, id, &testsuite.TestUpdateCallback{
			OnAccept:   func() {},
			OnReject:   func(err error) { *rejected = err },
			OnComplete: func(any, error) {},
		}, a)
	}, d)
}

func result(t *testing.T, env *testsuite.TestWorkflowEnvironment) *temporalrun.Output {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	var out temporalrun.Output
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// A run waits three days of workflow time for its approval, holding no
// worker, and finishes DECIDED with the refund issued once; its records
// are in the host's store, the last one DECIDED.
func TestThreeDayApprovalSucceeds(t *testing.T) {
	dir := t.TempDir()
	w := newWorld(t, dir, 4*24*time.Hour)
	env := skipEnv(t, w)
	var rejected error
	approveAt(t, env, 3*24*time.Hour, "apr_3days", nil, &rejected)
	env.ExecuteWorkflow(temporalrun.WorkflowName, input(t, "ts_ok", 4200, start))
	out := result(t, env)
	if rejected != nil {
		t.Fatalf("the approval was rejected: %v", rejected)
	}
	if out.Status != decision.Decided || out.Record.Outcome != "approved" {
		t.Fatalf("run = %s %s, want DECIDED approved", out.Status, out.Record.Outcome)
	}
	if got := env.Now().Sub(start); got < 3*24*time.Hour {
		t.Errorf("workflow time passed = %v, want at least three days", got)
	}
	if n := len(refunds(t, dir)); n != 1 {
		t.Errorf("refunds issued = %d, want 1", n)
	}
	recs, err := w.decisions.List(t.Context(), decision.Filter{RunID: out.RunID})
	if err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, r := range recs {
		statuses = append(statuses, string(r.Status))
	}
	if got := strings.Join(statuses, ","); got != "DEFERRED,CLOSED,DECIDED" && got != "DEFERRED,DECIDED,CLOSED" {
		t.Errorf("the host's records of the run = %s", got)
	}
	t.Logf("records %s, refunds %v", strings.Join(statuses, ","), refunds(t, dir))
	if err := w.decisions.Verify(t.Context()); err != nil {
		t.Errorf("record chain: %v", err)
	}
	assertReplayEqual(t, w, out)
}

// assertReplayEqual replays the run's packet from the host's packet
// store on an in-process runtime: replay_equal.
func assertReplayEqual(t *testing.T, w *world, out *temporalrun.Output) {
	t.Helper()
	if out.ReplayPacketID == "" {
		t.Fatal("the run has no replay packet")
	}
	p, err := w.packets.Get(t.Context(), out.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	before := len(refunds(t, w.payments.dir))
	rep, err := w.runtime(t, time.Now).Replay(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != replay.ReplayEqual {
		for i, e := range p.Transcript {
			b, _ := json.Marshal(e)
			t.Logf("packet transcript %d: %s", i, b)
		}
		b, _ := json.Marshal(p.Clock)
		t.Logf("clock: %s", b)
		b, _ = json.Marshal(p.Resumes)
		t.Logf("resumes: %s", b)
		t.Fatalf("replay = %s, diffs %+v", rep.Status, rep.Diffs)
	}
	if after := len(refunds(t, w.payments.dir)); after != before {
		t.Errorf("the replay issued %d refunds", after-before)
	}
}

// A run whose approval does not come within the gate's TTL goes on when
// the durable timer fires: the refund is refused approval_timeout and
// never issued, and an approval arriving later is refused by the
// validator.
func TestThreeDayApprovalExpires(t *testing.T) {
	dir := t.TempDir()
	w := newWorld(t, dir, 3*24*time.Hour)
	env := skipEnv(t, w)
	out := func() *temporalrun.Output {
		env.ExecuteWorkflow(temporalrun.WorkflowName, input(t, "ts_exp", 4200, start))
		return result(t, env)
	}()
	if got := env.Now().Sub(start); got < 3*24*time.Hour {
		t.Errorf("workflow time passed = %v, want the gate's three days", got)
	}
	refused := false
	for _, r := range out.ToolResults {
		if r.CapabilityID == "adp_payments.issue_refund" && r.Error != nil && r.Error.Code == gateway.CodeApprovalTimeout {
			refused = true
		}
	}
	if !refused {
		t.Fatalf("no refund refused approval_timeout in %+v", out.ToolResults)
	}
	if n := len(refunds(t, dir)); n != 0 {
		t.Errorf("refunds issued = %d, want 0", n)
	}
	if out.Status == decision.Decided && out.Record.Outcome == "approved" {
		t.Errorf("run = DECIDED approved without an approval")
	}
	t.Logf("run %s %s: %s", out.Status, out.Record.Outcome, out.Record.Rationale.Summary)
}
