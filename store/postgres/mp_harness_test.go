package postgres_test

// The multi-process harness: the parent test re-executes its own binary
// (os.Args[0], -test.run=^TestMultiProcessChild$) with a job in the
// environment; each child opens the one database, builds what its role
// needs (a runtime on the support pack, a gateway, or the bare store),
// tells the parent it is ready, waits for its go line on stdin (so every
// child starts its work together), does the job and reports its outcomes
// (internal/storekit's child protocol). The payments service the refund
// tool reaches is the parent's storekit.Payments: an httptest server
// speaking Tool Contract v1 on loopback.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/decision/decisiontest"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

const (
	// tenant is the support fixture's tenant.
	tenant = "tenant_acme_prod"
)

// Child roles.
const (
	roleInvoke  = "invoke"  // Invoke the refund (Goroutines at once)
	roleResume  = "resume"  // Resume the run (Goroutines at once)
	roleWrite   = "write"   // issue the same refund through the gateway (Goroutines at once)
	roleAppend  = "append"  // append decision records (Goroutines at once, PerGoroutine each)
	roleConsume = "consume" // consume one approval id (Goroutines at once)
)

// mpJob is what one child does.
type mpJob struct {
	Role       string             `json:"role"`
	DB         string             `json:"db"`
	Payments   string             `json:"payments,omitempty"`
	RunID      string             `json:"run_id,omitempty"`
	Amount     int                `json:"amount,omitempty"`
	Approvals  []gateway.Approval `json:"approvals,omitempty"`
	Takeover   bool               `json:"takeover,omitempty"`
	Goroutines int                `json:"goroutines"`
	// PerGoroutine is how many records each goroutine appends.
	PerGoroutine int `json:"per_goroutine,omitempty"`
	// Proc numbers the child among its siblings.
	Proc int `json:"proc"`
	// ApprovalID is the id roleConsume consumes.
	ApprovalID string `json:"approval_id,omitempty"`
	// ClaimTTL is the store's idempotency claim TTL and the runtime's
	// HeartbeatTTL, the lease of its claim of a run (0: the defaults).
	ClaimTTL time.Duration `json:"claim_ttl,omitempty"`
}

// mpOutcome is what one goroutine of a child got.
type mpOutcome struct {
	// Err classifies the error: "" (none), or one of the err* names.
	Err     string                   `json:"err,omitempty"`
	Status  string                   `json:"status,omitempty"`
	RunID   string                   `json:"run_id,omitempty"`
	Pending *gateway.ApprovalRequest `json:"pending,omitempty"`
	// Txn is the payments transaction id the run's (or call's) refund got.
	Txn string `json:"txn,omitempty"`
	// Key is the idempotency key of the refund call.
	Key string `json:"key,omitempty"`
	// Duplicate marks a gateway result answered from the idempotency store.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Error classes of mpOutcome.Err.
const (
	errNotResumable = "not_resumable"
	errConflict     = "checkpoint_conflict"
	errInProgress   = "run_in_progress"
	errApprovalUsed = "approval_used"
	errDuplicate    = "duplicate_record"
)

// sharedAppended is the Status of the append goroutine whose append of
// the record every process tries to append was stored.
const sharedAppended = "shared_appended"

func classify(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, contextos.ErrCheckpointConflict):
		return errConflict
	case errors.Is(err, contextos.ErrNotResumable):
		return errNotResumable
	case errors.Is(err, contextos.ErrRunInProgress):
		return errInProgress
	case errors.Is(err, gateway.ErrApprovalUsed):
		return errApprovalUsed
	case errors.Is(err, decision.ErrDuplicate):
		return errDuplicate
	default:
		return "other: " + err.Error()
	}
}

// TestMultiProcessChild is the entry point of a re-executed child; run
// directly (no job in the environment) it has nothing to do.
func TestMultiProcessChild(t *testing.T) {
	var job mpJob
	storekit.ChildJob(t, &job)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := openMPStore(ctx, job)
	if err != nil {
		t.Fatalf("child: open store: %v", err)
	}
	defer st.Close()
	work := childWork(t, ctx, job, st)
	storekit.ChildReady(t)
	out := make([]mpOutcome, job.Goroutines)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() { out[i] = work(i) })
	}
	wg.Wait()
	storekit.ChildResult(t, out)
}

// childWork prepares the job's role and returns what goroutine i does.
func childWork(t *testing.T, ctx context.Context, job mpJob, st mpStore) func(i int) mpOutcome {
	switch job.Role {
	case roleInvoke, roleResume:
		rt := childRuntime(t, job, st)
		req, rc := storekit.RefundRequest(t, job.RunID, job.Amount)
		return func(int) mpOutcome {
			var res *contextos.Result
			var err error
			if job.Role == roleInvoke {
				res, err = rt.Invoke(ctx, req.Clone(), rc.Clone())
			} else {
				res, err = rt.Resume(ctx, job.RunID, contextos.ResumeInput{Approvals: job.Approvals, Takeover: job.Takeover})
			}
			if err != nil {
				return mpOutcome{Err: classify(err)}
			}
			o := mpOutcome{Status: string(res.Status), RunID: res.RunID, Pending: res.Pending}
			for _, r := range res.ToolResults {
				if r.CapabilityID == "adp_payments.issue_refund" && r.Status.Succeeded() {
					o.Txn, _ = r.Output["transaction_id"].(string)
					o.Key = r.Metadata.IdempotencyKey
				}
			}
			return o
		}
	case roleWrite:
		newRun := childGateway(t, ctx, job, st)
		args := map[string]any{"order_id": "ord_881", "amount_inr": job.Amount, "currency": "INR"}
		return func(int) mpOutcome {
			run, err := newRun()
			if err != nil {
				return mpOutcome{Err: classify(err)}
			}
			res, err := run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_payments.issue_refund", Args: args})
			if err != nil {
				return mpOutcome{Err: classify(err)}
			}
			o := mpOutcome{Status: string(res.Status), Key: res.Metadata.IdempotencyKey, Duplicate: res.Metadata.Duplicate}
			o.Txn, _ = res.Output["transaction_id"].(string)
			return o
		}
	case roleAppend:
		recs := st.Records()
		return func(i int) mpOutcome {
			// Each goroutine appends its own records, and every
			// goroutine 0 the one record all processes try to append.
			// Status says whether the shared one was this goroutine's.
			var o mpOutcome
			if i == 0 {
				switch _, err := recs.Append(ctx, recordOf(job, "rec_shared")); {
				case err == nil:
					o.Status = sharedAppended
				case classify(err) != errDuplicate:
					return mpOutcome{Err: classify(err)}
				}
			}
			for n := range job.PerGoroutine {
				if _, err := recs.Append(ctx, recordOf(job, fmt.Sprintf("rec_p%d_g%d_n%d", job.Proc, i, n))); err != nil {
					return mpOutcome{Err: classify(err)}
				}
			}
			return o
		}
	case roleConsume:
		log := st.Approvals()
		return func(int) mpOutcome { return mpOutcome{Err: classify(log.Consume(ctx, job.ApprovalID))} }
	}
	t.Fatalf("child: unknown role %q", job.Role)
	return nil
}

// recordOf is a well-formed record of the child's run with id id.
func recordOf(job mpJob, id string) *decision.Record {
	r := decisiontest.Sample(id, decision.Decided)
	r.RunID = fmt.Sprintf("run_p%d", job.Proc)
	return r
}

// childRuntime is a runtime on the support pack (signed with the
// harness's fixed key, so every process pins the same pack hash), every
// store the database's, a scripted planner (look up, then refund and
// propose approval) and the payments tool at the parent's service.
func childRuntime(t *testing.T, job mpJob, st mpStore) *contextos.Runtime {
	opts := contextos.Options{Adapters: storekit.Adapters(t, job.Payments), Evidence: storekit.Evidence(t), ReplaySampleRate: 1, HeartbeatTTL: job.ClaimTTL}
	st.Configure(&opts)
	planner := contextostest.NewPlanner(storekit.LookupPlan(), storekit.RefundPlan(job.Amount))
	h := contextostest.New(t, planner, [][]byte{fixture.SupportPack()}, &contextostest.Options{Runtime: opts})
	return h.Runtime
}

// childGateway returns a constructor of gateway runs of the refund request
// (each with its own budget meter) on a gateway whose idempotency store
// and approval log are the database's.
func childGateway(t *testing.T, ctx context.Context, job mpJob, st mpStore) func() (*gateway.Run, error) {
	p, err := pack.Decode(fixture.SupportPack())
	if err != nil {
		t.Fatal(err)
	}
	req, rc := storekit.RefundRequest(t, job.RunID, job.Amount)
	prepared, err := compiler.Prepare([]compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: p}},
		&compiler.Options{Ontologies: []string{"ont.support@1.0.0"}, Evidence: storekit.Evidence(t)})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := prepared.Compile(ctx, req, rc)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(storekit.Adapters(t, job.Payments), &gateway.Options{Idempotency: st.Idempotency(), Approvals: st.Approvals(),
		Transcript: gateway.NewMemoryTranscript(), Now: contextostest.FixedTime})
	if err != nil {
		t.Fatal(err)
	}
	return func() (*gateway.Run, error) {
		return gw.NewRun(gateway.RunConfig{Prepared: prepared, Compiled: cc, Request: req, RunContext: rc,
			Meter: runcontext.NewMeter(rc.RunBudget, contextostest.FixedTime())}, nil)
	}
}

// runChildren starts one child per job, lets them go together and
// returns every goroutine's outcome, child by child.
func runChildren(t *testing.T, ctx context.Context, jobs ...mpJob) [][]mpOutcome {
	t.Helper()
	children := make([]*storekit.Child, len(jobs))
	for i, j := range jobs {
		j.Proc = i
		children[i] = storekit.StartChild(t, fmt.Sprintf("child %d (%s)", i, j.Role), j)
	}
	storekit.Release(t, ctx, children...)
	out := make([][]mpOutcome, len(children))
	for i, c := range children {
		c.Result(t, ctx, &out[i])
	}
	return out
}

// tally counts the outcomes by error class ("" for success).
func tally(all [][]mpOutcome) map[string]int {
	n := map[string]int{}
	for _, outs := range all {
		for _, o := range outs {
			n[o.Err]++
		}
	}
	return n
}
