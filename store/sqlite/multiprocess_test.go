package sqlite_test

// Two runtime processes sharing one SQLite database file: this test
// binary re-executed (-test.run=^TestMultiProcessChild$) with a job in the
// environment. Each child builds a runtime on the support pack with every
// store the file's, tells the parent it is ready, waits for its go line,
// runs the refund (Invoke or Resume) and reports its outcome
// (internal/storekit's child protocol). The payments service is the
// parent's (storekit.Payments: Tool Contract v1 on loopback); it counts
// raw requests and performs one effect per idempotency key. store/postgres
// runs more roles on the same harness.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/store/sqlite"
)

// Child roles.
const (
	roleInvoke = "invoke"
	roleResume = "resume"
)

// mpJob is what one child does.
type mpJob struct {
	Role      string             `json:"role"`
	DB        string             `json:"db"`
	Payments  string             `json:"payments"`
	RunID     string             `json:"run_id"`
	Amount    int                `json:"amount"`
	Approvals []gateway.Approval `json:"approvals,omitempty"`
	Takeover  bool               `json:"takeover,omitempty"`
	// ClaimTTL is the store's idempotency claim TTL and the runtime's
	// HeartbeatTTL, the lease of its claim of a run (0: the defaults).
	ClaimTTL time.Duration `json:"claim_ttl,omitempty"`
	// TurnTokens is the tokens each planner turn reports (0: the plans'
	// own).
	TurnTokens int `json:"turn_tokens,omitempty"`
}

// mpOutcome is what the child's Invoke or Resume got.
type mpOutcome struct {
	Err     string                   `json:"err,omitempty"`
	Status  string                   `json:"status,omitempty"`
	Pending *gateway.ApprovalRequest `json:"pending,omitempty"`
	// Txn and Key are the refund's transaction id and idempotency key.
	Txn string `json:"txn,omitempty"`
	Key string `json:"key,omitempty"`
}

// TestMultiProcessChild is the entry point of a re-executed child; run
// directly (no job in the environment) it has nothing to do.
func TestMultiProcessChild(t *testing.T) {
	var job mpJob
	storekit.ChildJob(t, &job)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := sqlite.Open(ctx, job.DB, &sqlite.Options{ClaimTTL: job.ClaimTTL})
	if err != nil {
		t.Fatalf("child: open store: %v", err)
	}
	defer st.Close()
	opts := contextos.Options{Adapters: storekit.Adapters(t, job.Payments), Evidence: storekit.Evidence(t), ReplaySampleRate: 1, HeartbeatTTL: job.ClaimTTL}
	st.Configure(&opts)
	lookup, refund := storekit.LookupPlan(), storekit.RefundPlan(job.Amount)
	if job.TurnTokens > 0 {
		lookup.Usage, refund.Usage = contextos.PlanUsage{Tokens: job.TurnTokens}, contextos.PlanUsage{Tokens: job.TurnTokens}
	}
	h := contextostest.New(t, contextostest.NewPlanner(lookup, refund), [][]byte{fixture.SupportPack()}, &contextostest.Options{Runtime: opts})
	req, rc := storekit.RefundRequest(t, job.RunID, job.Amount)
	storekit.ChildReady(t)
	var res *contextos.Result
	if job.Role == roleInvoke {
		res, err = h.Runtime.Invoke(ctx, req, rc)
	} else {
		res, err = h.Runtime.Resume(ctx, job.RunID, contextos.ResumeInput{Approvals: job.Approvals, Takeover: job.Takeover})
	}
	var o mpOutcome
	if err != nil {
		o.Err = err.Error()
		if errors.Is(err, contextos.ErrNotResumable) {
			o.Err = "not_resumable: " + o.Err
		}
	} else {
		o.Status, o.Pending = string(res.Status), res.Pending
		for _, r := range res.ToolResults {
			if r.CapabilityID == "adp_payments.issue_refund" && r.Status.Succeeded() {
				o.Txn, _ = r.Output["transaction_id"].(string)
				o.Key = r.Metadata.IdempotencyKey
			}
		}
	}
	storekit.ChildResult(t, o)
}

// runChild runs one child to its end and returns its outcome.
func runChild(t *testing.T, ctx context.Context, name string, job mpJob) mpOutcome {
	t.Helper()
	c := storekit.StartChild(t, name, job)
	storekit.Release(t, ctx, c)
	var o mpOutcome
	c.Result(t, ctx, &o)
	return o
}

// openParent opens the test's database in the parent, to check what the
// children left in it.
func openParent(t *testing.T, ctx context.Context, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// pause invokes the refund of 4200 in a child process: it pauses on the
// finance gate. It returns what the run awaits.
func pause(t *testing.T, ctx context.Context, url string, p *storekit.Payments, runID string) *gateway.ApprovalRequest {
	t.Helper()
	out := runChild(t, ctx, "process A", mpJob{Role: roleInvoke, DB: url, Payments: p.URL(), RunID: runID, Amount: 4200})
	if out.Err != "" || out.Status != string(decision.Deferred) || out.Pending == nil || out.Pending.GateID != "GATE_FINANCE_APPROVAL" {
		t.Fatalf("invoke = %+v, want DEFERRED awaiting GATE_FINANCE_APPROVAL", out)
	}
	if keys, _ := p.Counts(); len(keys) != 0 {
		t.Fatalf("the paused run called payments %d times before its approval", len(keys))
	}
	return out.Pending
}

// TestMPPausedInOneProcessResumedInAnother: a run paused in process A and
// resumed in process B, sharing one database file, calls payments exactly
// once, under the key the paused call was given.
func TestMPPausedInOneProcessResumedInAnother(t *testing.T) {
	db := filepath.Join(t.TempDir(), "contextos.db")
	ctx := storekit.Context(t)
	p := storekit.NewPayments(t)
	pending := pause(t, ctx, db, p, "run_mp_a")
	approval := contextostest.Approval(pending, storekit.FinanceLead, contextostest.FixedTime())
	out := runChild(t, ctx, "process B", mpJob{Role: roleResume, DB: db, Payments: p.URL(), RunID: "run_mp_a", Amount: 4200,
		Approvals: []gateway.Approval{approval}})
	if out.Err != "" || out.Status != string(decision.Decided) || out.Txn != "txn_1" {
		t.Fatalf("resume in the second process = %+v, want DECIDED with txn_1", out)
	}
	if key := p.AssertOneEffect(t, 1); key != pending.IdempotencyKey {
		t.Errorf("payments key = %s, want the paused call's %s", key, pending.IdempotencyKey)
	}
	storekit.AssertRecords(t, ctx, openParent(t, ctx, db).Records(), "run_mp_a", decision.Deferred, decision.Decided, decision.Closed)
}

// TestMPCrashBetweenEffectAndRecord: process A is SIGKILLed after the
// payments service performed the refund and before it answered; process
// B, on the same database file, takes the run over once A's idempotency
// claim lapsed: its call carries the same key, the service answers it from
// its first answer (one effect), and the run ends DECIDED with its record
// stored and the chain verifying.
func TestMPCrashBetweenEffectAndRecord(t *testing.T) {
	db := filepath.Join(t.TempDir(), "contextos.db")
	ctx := storekit.Context(t)
	p := storekit.NewPayments(t)
	const runID, ttl = "run_mp_f", 2 * time.Second
	a := storekit.StartChild(t, "process A", mpJob{Role: roleInvoke, DB: db, Payments: p.URL(), RunID: runID, Amount: 1200, ClaimTTL: ttl})
	var killed sync.Once
	p.OnEffect(func(string) { killed.Do(a.Kill) })
	storekit.Release(t, ctx, a)
	select {
	case <-a.Done():
	case <-ctx.Done():
		t.Fatalf("process A did not stop: %v", ctx.Err())
	}
	result, exit := a.Exit()
	if result != "" || exit == nil {
		t.Fatalf("process A was not killed before it finished (exit %v, result %s):\n%s", exit, result, a.Output())
	}
	first := p.AssertOneEffect(t, 1)
	st := openParent(t, ctx, db)
	storekit.AssertRecords(t, ctx, st.Records(), runID) // A died before storing the record
	time.Sleep(ttl)                                     // A's claim of the run lapses

	out := runChild(t, ctx, "process B", mpJob{Role: roleResume, DB: db, Payments: p.URL(), RunID: runID, Amount: 1200, Takeover: true, ClaimTTL: ttl})
	if out.Err != "" || out.Status != string(decision.Decided) || out.Txn != "txn_1" || out.Key != first {
		t.Fatalf("takeover in process B = %+v, want DECIDED with the first answer txn_1 under key %s", out, first)
	}
	p.AssertOneEffect(t, 2)
	storekit.AssertRecords(t, ctx, st.Records(), runID, decision.Decided)
}

// TestMPCrashChargesTheDeadProcessesPlannerTurns: process A, whose
// planner turns report 5,000 tokens each, is SIGKILLed at the refund's
// effect, after its two turns; process B takes the run over from A's
// claim and plans again. B's budget counts A's two turns (saved to the
// database before A's calls): with B's first turn the run is at 15,000
// tokens, over total_tokens 12,000, and it ends ESCALATED rather than
// DECIDED at B's own 10,000.
func TestMPCrashChargesTheDeadProcessesPlannerTurns(t *testing.T) {
	db := filepath.Join(t.TempDir(), "contextos.db")
	ctx := storekit.Context(t)
	p := storekit.NewPayments(t)
	const runID, ttl, tokens = "run_mp_t", 2 * time.Second, 5000
	a := storekit.StartChild(t, "process A", mpJob{Role: roleInvoke, DB: db, Payments: p.URL(), RunID: runID, Amount: 1200, ClaimTTL: ttl, TurnTokens: tokens})
	var killed sync.Once
	p.OnEffect(func(string) { killed.Do(a.Kill) })
	storekit.Release(t, ctx, a)
	select {
	case <-a.Done():
	case <-ctx.Done():
		t.Fatalf("process A did not stop: %v", ctx.Err())
	}
	if result, exit := a.Exit(); result != "" || exit == nil {
		t.Fatalf("process A was not killed before it finished (exit %v, result %s):\n%s", exit, result, a.Output())
	}
	time.Sleep(ttl) // A's claim of the run lapses
	out := runChild(t, ctx, "process B", mpJob{Role: roleResume, DB: db, Payments: p.URL(), RunID: runID, Amount: 1200, Takeover: true, ClaimTTL: ttl, TurnTokens: tokens})
	if out.Err != "" || out.Status != string(decision.Escalated) {
		t.Fatalf("takeover in process B = %+v, want ESCALATED over total_tokens (A's two turns and B's first)", out)
	}
	st := openParent(t, ctx, db)
	storekit.AssertRecords(t, ctx, st.Records(), runID, decision.Escalated)
	recs, err := st.Records().List(ctx, decision.Filter{RunID: runID})
	if err != nil || len(recs) != 1 || recs[0].BudgetUsage.Tokens != 3*tokens {
		t.Fatalf("records %+v (%v), want one counting %d tokens", recs, err, 3*tokens)
	}
}

// TestMPConcurrentTakeoversContinueOnce: process A is SIGKILLed after the
// payments service performed the refund and before it answered. Once its
// claims lapse, four processes take the run over at once: exactly one
// continues it, every other takeover is refused before doing anything,
// and the run has one decision and one effect.
func TestMPConcurrentTakeoversContinueOnce(t *testing.T) {
	db := filepath.Join(t.TempDir(), "contextos.db")
	ctx := storekit.Context(t)
	p := storekit.NewPayments(t)
	const runID, ttl = "run_mp_h", 2 * time.Second
	a := storekit.StartChild(t, "process A", mpJob{Role: roleInvoke, DB: db, Payments: p.URL(), RunID: runID, Amount: 1200, ClaimTTL: ttl})
	var killed sync.Once
	p.OnEffect(func(string) { killed.Do(a.Kill) })
	storekit.Release(t, ctx, a)
	<-a.Done()
	if result, exit := a.Exit(); result != "" || exit == nil {
		t.Fatalf("process A was not killed before it finished (exit %v, result %s):\n%s", exit, result, a.Output())
	}
	time.Sleep(ttl) // A's claims lapse
	var takers []*storekit.Child
	for i := range 4 {
		takers = append(takers, storekit.StartChild(t, fmt.Sprintf("taker %d", i), mpJob{Role: roleResume, DB: db, Payments: p.URL(), RunID: runID, Amount: 1200, Takeover: true, ClaimTTL: ttl}))
	}
	storekit.Release(t, ctx, takers...)
	won, refused := 0, 0
	for _, c := range takers {
		var o mpOutcome
		c.Result(t, ctx, &o)
		switch {
		case o.Err == "" && o.Status == string(decision.Decided):
			won++
		case strings.HasPrefix(o.Err, "not_resumable: "), strings.Contains(o.Err, "checkpoint was changed by another runtime"):
			refused++
		default:
			t.Errorf("a takeover = %+v", o)
		}
	}
	if won != 1 || refused != 3 {
		t.Errorf("%d takeovers continued the run and %d were refused, want 1 and 3", won, refused)
	}
	p.AssertOneEffect(t, 2)
	storekit.AssertRecords(t, ctx, openParent(t, ctx, db).Records(), runID, decision.Decided)
}
