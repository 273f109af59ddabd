package temporaltest_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/internal/temporaltest"
)

func TestMain(m *testing.M) { temporaltest.Main(m) }

// The smoke workflow runs one activity, greet, and returns its reply.
const (
	smokeWorkflow = "smoke.workflow"
	greetActivity = "smoke.greet"
)

// reply is what greet returns: its text, and the process and attempt
// that produced it.
type reply struct {
	Text    string
	PID     int
	Attempt int32
}

func greetWorkflow(ctx workflow.Context, name string) (reply, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		// A worker that died with the attempt is noticed in two seconds.
		HeartbeatTimeout: 2 * time.Second,
		RetryPolicy:      &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 3},
	})
	var r reply
	err := workflow.ExecuteActivity(ctx, greetActivity, name).Get(ctx, &r)
	return r, err
}

// greeter is the activity; with holdFirst its first attempt heartbeats
// until it is cancelled (or its process killed) and never replies.
type greeter struct{ holdFirst bool }

func (g greeter) greet(ctx context.Context, name string) (reply, error) {
	attempt := activity.GetInfo(ctx).Attempt
	for g.holdFirst && attempt == 1 {
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return reply{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return reply{Text: "hello " + name, PID: os.Getpid(), Attempt: attempt}, nil
}

func newWorker(c client.Client, queue string, g greeter) worker.Worker {
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(greetWorkflow, workflow.RegisterOptions{Name: smokeWorkflow})
	w.RegisterActivityWithOptions(g.greet, activity.RegisterOptions{Name: greetActivity})
	return w
}

var ids atomic.Int64

// uniqueName names a task queue or workflow of this test binary's run on
// the shared server (tests may run more than once, -count).
func uniqueName(t *testing.T) string {
	return fmt.Sprintf("%s-%d-%d", t.Name(), os.Getpid(), ids.Add(1))
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A workflow calling one activity completes on the real server, its
// worker in this process.
func TestWorkflowCompletes(t *testing.T) {
	t.Parallel()
	srv := temporaltest.Shared(t)
	ctx := testContext(t)
	c := srv.Dial(t)
	queue := uniqueName(t)
	w := newWorker(c, queue, greeter{})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, smokeWorkflow, "world")
	if err != nil {
		t.Fatal(err)
	}
	var got reply
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(reply{Text: "hello world", PID: os.Getpid(), Attempt: 1}, got); diff != "" {
		t.Errorf("workflow result (-want +got):\n%s", diff)
	}
}

// childJob is what a worker process of TestSecondWorkerProcess does: run
// a worker on Queue until workflow WorkflowID completes.
type childJob struct {
	HostPort, Namespace, Queue, WorkflowID string
}

// childResult is what a worker process reports once the workflow completed.
type childResult struct{ PID int }

// TestMultiProcessChild is a worker process of TestSecondWorkerProcess:
// the test binary re-executed (storekit's child protocol).
func TestMultiProcessChild(t *testing.T) {
	var job childJob
	storekit.ChildJob(t, &job)
	c, err := client.Dial(client.Options{HostPort: job.HostPort, Namespace: job.Namespace, Logger: temporaltest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := newWorker(c, job.Queue, greeter{holdFirst: true})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	storekit.ChildReady(t)
	ctx := testContext(t)
	if err := c.GetWorkflow(ctx, job.WorkflowID, "").Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	storekit.ChildResult(t, childResult{PID: os.Getpid()})
}

// A workflow whose only worker process is SIGKILLed inside the activity
// is finished by a second worker process: the server retries the
// activity there once the first attempt's heartbeat times out, and the
// second process replays the workflow's history to complete it. This
// process runs no worker.
func TestSecondWorkerProcess(t *testing.T) {
	t.Parallel()
	srv := temporaltest.Shared(t)
	ctx := testContext(t)
	c := srv.Dial(t)
	job := childJob{HostPort: srv.HostPort, Namespace: srv.Namespace, Queue: uniqueName(t)}
	job.WorkflowID = job.Queue

	first := storekit.StartChild(t, "worker 1", job)
	storekit.Release(t, ctx, first)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: job.WorkflowID, TaskQueue: job.Queue}, smokeWorkflow, "world")
	if err != nil {
		t.Fatal(err)
	}

	// Worker 1 holds the activity's first attempt and heartbeats it.
	for {
		desc, err := c.DescribeWorkflow(ctx, job.WorkflowID, "")
		if err != nil {
			t.Fatal(err)
		}
		if pa := desc.RawResponse.GetPendingActivities(); len(pa) == 1 && pa[0].GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED &&
			pa[0].GetAttempt() == 1 && pa[0].GetLastHeartbeatTime() != nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("worker 1 did not start the activity: %v\n%s", ctx.Err(), first.Output())
		case <-time.After(100 * time.Millisecond):
		}
	}
	first.Kill()

	second := storekit.StartChild(t, "worker 2", job)
	storekit.Release(t, ctx, second)
	var got reply
	if err := run.Get(ctx, &got); err != nil {
		t.Fatalf("workflow: %v\nworker 2:\n%s", err, second.Output())
	}
	var res childResult
	second.Result(t, ctx, &res)
	if diff := cmp.Diff(reply{Text: "hello world", PID: res.PID, Attempt: 2}, got); diff != "" {
		t.Errorf("workflow result (-want +got):\n%s", diff)
	}
	if res.PID == os.Getpid() {
		t.Errorf("worker 2 reported this process's pid %d", res.PID)
	}
}
