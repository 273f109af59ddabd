package temporalrun_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/internal/temporaltest"
	"github.com/contextos/contextos/temporalrun"
)

func TestMain(m *testing.M) { temporaltest.Main(m) }

var ids atomic.Int64

// uniqueName names a task queue and workflow of this test binary's run
// on the shared server.
func uniqueName(t *testing.T) string {
	return fmt.Sprintf("%s-%d-%d", strings.ReplaceAll(t.Name(), "/", "_"), os.Getpid(), ids.Add(1))
}

// workerOptions are the options of the tests' workers: compiling a run's
// context is workflow code, which may take more than the default second
// on a loaded machine.
var workerOptions = worker.Options{DeadlockDetectionTimeout: time.Minute}

// startWorker runs a worker of w's host on queue until t ends.
func startWorker(t *testing.T, c client.Client, queue string, w *world) worker.Worker {
	t.Helper()
	wk := worker.New(c, queue, workerOptions)
	w.host(t).Register(wk)
	if err := wk.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wk.Stop)
	return wk
}

// childJob is what a child process of these tests does: approve the
// pending gate of a workflow ("approver"), or run a worker until the
// workflow completes ("worker", its payments fake killing the process
// after it issued a refund when Crash is set).
type childJob struct {
	Role                                   string
	HostPort, Namespace, Queue, WorkflowID string
	Dir, DB                                string
	Crash                                  bool
}

type childResult struct {
	PID        int
	ApprovalID string
}

// TestMultiProcessChild is a child process of the tests below: the test
// binary re-executed (storekit's child protocol).
func TestMultiProcessChild(t *testing.T) {
	var job childJob
	storekit.ChildJob(t, &job)
	c, err := client.Dial(client.Options{HostPort: job.HostPort, Namespace: job.Namespace, Logger: temporaltest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := storekit.Context(t)
	switch job.Role {
	case "approver":
		storekit.ChildReady(t)
		p := awaitPending(t, ctx, c, job.WorkflowID)
		a := financeApproval(p, fmt.Sprintf("apr_pid_%d", os.Getpid()))
		if err := temporalrun.Approve(ctx, c, job.WorkflowID, a); err != nil {
			t.Fatal(err)
		}
		storekit.ChildResult(t, childResult{PID: os.Getpid(), ApprovalID: a.ApprovalID})
	case "worker":
		w := newWorldDB(t, job.Dir, job.DB, 0)
		w.payments.crashAfterEffect = job.Crash
		wk := worker.New(c, job.Queue, workerOptions)
		w.host(t).Register(wk)
		if err := wk.Start(); err != nil {
			t.Fatal(err)
		}
		defer wk.Stop()
		storekit.ChildReady(t)
		// The parent starts the workflow after it releases this worker:
		// until it has, the workflow is not found (under load this worker
		// asked first, and exited).
		for {
			err := c.GetWorkflow(ctx, job.WorkflowID, "").Get(ctx, nil)
			if _, notYet := errors.AsType[*serviceerror.NotFound](err); !notYet {
				if err != nil {
					t.Fatal(err)
				}
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("workflow %s never started: %v", job.WorkflowID, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
		storekit.ChildResult(t, childResult{PID: os.Getpid()})
	default:
		t.Fatalf("unknown role %q", job.Role)
	}
}

// awaitPending polls the workflow until its run awaits an approval.
func awaitPending(t *testing.T, ctx context.Context, c client.Client, workflowID string, workers ...*storekit.Child) *gateway.ApprovalRequest {
	t.Helper()
	for {
		p, err := temporalrun.Pending(ctx, c, workflowID)
		if err == nil && p != nil {
			return p
		}
		select {
		case <-ctx.Done():
			// What the worker processes said: a run that never pauses is
			// most often a worker that never polled or died early.
			var out strings.Builder
			for i, w := range workers {
				state := "running"
				select {
				case <-w.Done():
					res, werr := w.Exit()
					state = fmt.Sprintf("exited (%s, %v)", res, werr)
				default:
				}
				fmt.Fprintf(&out, "\nworker %d, %s:\n%s", i+1, state, w.Output())
			}
			t.Fatalf("the run of %s never paused: %v (last error %v)%s", workflowID, ctx.Err(), err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// The refund on a real server: the run starts, pauses at the finance
// gate, is approved with an Update from another process and finishes
// DECIDED, its records in the host's store; the workflow's exported
// history replays clean, with no activity run again and no record
// written again; the run's packet replays replay_equal; and the run
// matches what the in-process runtime does with the same inputs.
func TestRefundOnServer(t *testing.T) {
	t.Parallel()
	srv := temporaltest.Shared(t)
	ctx := storekit.Context(t)
	c := srv.Dial(t)
	dir := t.TempDir()
	w := newWorldDB(t, dir, filepath.Join(dir, "host.db"), 0)
	queue := uniqueName(t)
	startWorker(t, c, queue, w)

	approver := storekit.StartChild(t, "approver", childJob{Role: "approver", HostPort: srv.HostPort, Namespace: srv.Namespace, WorkflowID: queue})
	storekit.Release(t, ctx, approver)
	in := input(t, "srv_refund", 4200, time.Now())
	run, err := temporalrun.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, in)
	if err != nil {
		t.Fatal(err)
	}
	var out temporalrun.Output
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("workflow: %v\napprover:\n%s", err, approver.Output())
	}
	var ar childResult
	approver.Result(t, ctx, &ar)
	if ar.PID == os.Getpid() {
		t.Fatal("the approver ran in this process")
	}
	if out.Status != decision.Decided || out.Record.Outcome != "approved" {
		t.Fatalf("run = %s %s (%s), want DECIDED approved", out.Status, out.Record.Outcome, out.Record.Rationale.Summary)
	}
	if got := approvalIDs(out.Record); got != ar.ApprovalID {
		t.Errorf("record approvals = %q, want the other process's %q", got, ar.ApprovalID)
	}
	if n := len(refunds(t, dir)); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}
	storekit.AssertRecords(t, ctx, w.decisions, out.RunID, decision.Deferred, decision.Decided, decision.Closed)

	// Temporal's replay of the exported history: clean, nothing run or
	// recorded again.
	hist := exportHistory(t, ctx, c, queue, run.GetRunID())
	before := recordCount(t, ctx, w.decisions)
	beforeCalls := len(calls(t, dir))
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(w.host(t).Workflow, workflow.RegisterOptions{Name: temporalrun.WorkflowName})
	if err := replayer.ReplayWorkflowHistoryFromJSONFile(temporaltest.Logger(), hist); err != nil {
		t.Fatalf("WorkflowReplayer: %v", err)
	}
	if after := recordCount(t, ctx, w.decisions); after != before {
		t.Errorf("the history replay wrote %d records", after-before)
	}
	if n := len(calls(t, dir)); n != beforeCalls {
		t.Errorf("the history replay called payments %d times", n-beforeCalls)
	}

	// The runtime's replay of the packet.
	assertReplayEqual(t, w, &out)

	// The in-process runtime with the same inputs.
	local := newWorld(t, t.TempDir(), 0)
	rt := local.runtime(t, time.Now)
	lin := input(t, "srv_refund", 4200, time.Now())
	res, err := rt.Invoke(ctx, lin.Request, lin.Run)
	if err != nil {
		t.Fatal(err)
	}
	if res.Pending == nil {
		t.Fatalf("the in-process run did not pause: %s", res.Status)
	}
	a := financeApproval(res.Pending, ar.ApprovalID)
	res, err = rt.Resume(ctx, res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{{ApprovalID: a.ApprovalID, GateID: a.GateID,
		ActionDigest: a.ActionDigest, Approver: a.Approver, ApproverRole: a.ApproverRole, DecidedAt: time.Now()}}})
	if err != nil {
		t.Fatal(err)
	}
	assertSameRun(t, res, &out)
	local.packets = rt.Packets()
	assertReplayEqual(t, local, &temporalrun.Output{ReplayPacketID: res.ReplayPacketID})
}

// assertSameRun compares a Temporal run with the in-process run of the
// same inputs: status, outcome, controls, approvals, evidence refs and
// the tools' statuses.
func assertSameRun(t *testing.T, local *contextos.Result, out *temporalrun.Output) {
	t.Helper()
	l, r := local.Record, out.Record
	type view struct {
		Status, Outcome, Controls, Approvals, Evidence, Tools string
	}
	see := func(rec *decision.Record, results []*gateway.ToolResultEnvelope) view {
		var tools []string
		for _, x := range results {
			tools = append(tools, x.CapabilityID+":"+string(x.Status))
		}
		var apr []string
		for _, a := range rec.Approvals {
			apr = append(apr, a.ApprovalID+"/"+a.GateID+"/"+a.ApproverRole)
		}
		refs := slices.Clone(rec.EvidenceRefs)
		slices.Sort(refs)
		return view{Status: string(rec.Status), Outcome: rec.Outcome, Controls: fmt.Sprintf("%+v", rec.ControlsActive), Approvals: strings.Join(apr, ","),
			Evidence: strings.Join(refs, ","), Tools: strings.Join(tools, ",")}
	}
	if a, b := see(l, local.ToolResults), see(r, out.ToolResults); a != b {
		t.Errorf("the Temporal run differs from the in-process run:\n in-process %+v\n temporal   %+v", a, b)
	}
}

// exportHistory writes the workflow's history as JSON (what `temporal
// workflow show --output json` exports) and returns the file.
func exportHistory(t *testing.T, ctx context.Context, c client.Client, id, runID string) string {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h historypb.History
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	b, err := protojson.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "history.json")
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

func recordCount(t *testing.T, ctx context.Context, s decision.Store) int {
	t.Helper()
	recs, err := s.List(ctx, decision.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// The crash: the only worker process is SIGKILLed inside the refund
// activity after the payments fake issued the refund, before it
// answered. Another worker (this process) finishes the run: Temporal
// retries the attempt's activity with the same call, so the refund is
// asked again under the same idempotency key and issued once; the run
// has one terminal record and the host's record chain verifies.
func TestCrashInsideRefund(t *testing.T) {
	t.Parallel()
	srv := temporaltest.Shared(t)
	ctx := storekit.Context(t)
	c := srv.Dial(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "host.db")
	queue := uniqueName(t)
	job := childJob{Role: "worker", HostPort: srv.HostPort, Namespace: srv.Namespace, Queue: queue, WorkflowID: queue, Dir: dir, DB: db, Crash: true}
	first := storekit.StartChild(t, "worker 1", job)
	storekit.Release(t, ctx, first)

	in := input(t, "srv_crash", 4200, time.Now())
	run, err := temporalrun.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, in)
	if err != nil {
		t.Fatal(err)
	}
	p := awaitPending(t, ctx, c, queue, first)
	// On the server too, the validator refuses an approval of another
	// action before it enters the history.
	other := financeApproval(p, "apr_other")
	other.ActionDigest = "sha256:" + strings.Repeat("1", 64)
	if err := temporalrun.Approve(ctx, c, queue, other); err == nil || !strings.Contains(err.Error(), "approval refused: action_digest:") {
		t.Fatalf("Approve(another digest) = %v, want the validator's refusal", err)
	}
	if err := temporalrun.Approve(ctx, c, queue, financeApproval(p, "apr_crash")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.Done():
	case <-ctx.Done():
		t.Fatalf("worker 1 did not die in the refund:\n%s", first.Output())
	}
	if n := len(refunds(t, dir)); n != 1 {
		t.Fatalf("refunds when worker 1 died = %d, want 1", n)
	}
	w := newWorldDB(t, dir, db, 0)
	startWorker(t, c, queue, w)
	var out temporalrun.Output
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("workflow: %v\nworker 1:\n%s", err, first.Output())
	}
	if out.Status != decision.Decided || out.Record.Outcome != "approved" {
		t.Fatalf("run = %s %s (%s), want DECIDED approved", out.Status, out.Record.Outcome, out.Record.Rationale.Summary)
	}
	if n := len(refunds(t, dir)); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}
	// Payments was asked twice, once by each worker, under one key.
	cl := calls(t, dir)
	if len(cl) != 2 {
		t.Fatalf("payments calls = %q, want 2", cl)
	}
	pid1, key1, _ := strings.Cut(cl[0], " ")
	pid2, key2, _ := strings.Cut(cl[1], " ")
	if key1 != key2 || pid1 == pid2 || pid2 != fmt.Sprint(os.Getpid()) {
		t.Errorf("payments calls = %q, want one key from worker 1 then this process", cl)
	}
	storekit.AssertRecords(t, ctx, w.decisions, out.RunID, decision.Deferred, decision.Decided, decision.Closed)
	assertReplayEqual(t, w, &out)

	// The refused approval never entered the history; the accepted one did.
	var accepted []string
	it := c.GetWorkflowHistory(ctx, queue, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil {
			for _, p := range a.GetAcceptedRequest().GetInput().GetArgs().GetPayloads() {
				accepted = append(accepted, string(p.GetData()))
			}
		}
	}
	if len(accepted) != 1 || !strings.Contains(accepted[0], `"approval_id":"apr_crash"`) {
		t.Errorf("approvals accepted into the history = %q, want apr_crash alone", accepted)
	}
}

// Cancelling the workflow while the approved refund's attempt runs, on a
// real server: the payments service issued the refund, and the run's
// results say so. The attempt's activity is not told of the
// cancellation (it does not heartbeat), so the workflow waits for its
// answer instead of recording a cancelled call whose refund went through.
func TestCancelDuringRefundOnServer(t *testing.T) {
	t.Parallel()
	srv := temporaltest.Shared(t)
	ctx := storekit.Context(t)
	c := srv.Dial(t)
	dir := t.TempDir()
	w := newWorld(t, dir, 0)
	queue := uniqueName(t)
	w.payments.afterEffect = func() {
		if err := c.CancelWorkflow(ctx, queue, ""); err != nil {
			t.Errorf("cancel: %v", err)
		}
		time.Sleep(2 * time.Second) // the cancellation reaches the workflow while the attempt runs
	}
	startWorker(t, c, queue, w)
	run, err := temporalrun.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, input(t, "srv_cancel_refund", 4200, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	p := awaitPending(t, ctx, c, queue)
	if err := temporalrun.Approve(ctx, c, queue, financeApproval(p, "apr_cancel_refund")); err != nil {
		t.Fatal(err)
	}
	var out temporalrun.Output
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	if n := len(refunds(t, dir)); n != 1 {
		t.Fatalf("refunds = %d, want 1", n)
	}
	var got []string
	for _, r := range out.ToolResults {
		if r.CapabilityID == "adp_payments.issue_refund" {
			got = append(got, string(r.Status))
		}
	}
	if !slices.Contains(got, string(gateway.StatusCompleted)) {
		t.Errorf("the refund was issued, the run's refund results are %v (run %s: %q)", got, out.Status, out.Record.Rationale.Summary)
	}
	if out.Status != decision.Escalated {
		t.Errorf("run = %s, want ESCALATED (cancelled)", out.Status)
	}
}
