package postgres_test

// Multi-replica correctness and crash safety on PostgreSQL: every test
// here runs two or more runtime processes (this test binary re-executed,
// see mp_harness_test.go) against one database, and a payments service
// in the parent that counts raw requests and effects per idempotency key.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/pgtest"
	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/store/postgres"
)

// openParent opens the test's database in the parent, to check what the
// children left in it.
func openParent(t *testing.T, ctx context.Context, url string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(ctx, url, nil)
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
	out := runChildren(t, ctx, mpJob{Role: roleInvoke, DB: url, Payments: p.URL(), RunID: runID, Amount: 4200, Goroutines: 1})[0][0]
	if out.Err != "" || out.Status != string(decision.Deferred) || out.Pending == nil || out.Pending.GateID != "GATE_FINANCE_APPROVAL" {
		t.Fatalf("invoke = %+v, want DEFERRED awaiting GATE_FINANCE_APPROVAL", out)
	}
	if keys, _ := p.Counts(); len(keys) != 0 {
		t.Fatalf("the paused run called payments %d times before its approval", len(keys))
	}
	return out.Pending
}

// TestMPPausedInOneProcessResumedInAnother: a run paused in process A and
// resumed in process B calls payments exactly once, under the key the
// paused call was given.
func TestMPPausedInOneProcessResumedInAnother(t *testing.T) {
	url := pgtest.URL(t)
	ctx := storekit.Context(t)
	p := storekit.NewPayments(t)
	pending := pause(t, ctx, url, p, "run_mp_a")
	approval := contextostest.Approval(pending, storekit.FinanceLead, contextostest.FixedTime())
	out := runChildren(t, ctx, mpJob{Role: roleResume, DB: url, Payments: p.URL(), RunID: "run_mp_a", Amount: 4200, Goroutines: 1,
		Approvals: []gateway.Approval{approval}})[0][0]
	if out.Err != "" || out.Status != string(decision.Decided) || out.Txn != "txn_1" {
		t.Fatalf("resume in the second process = %+v, want DECIDED with txn_1", out)
	}
	if key := p.AssertOneEffect(t, 1); key != pending.IdempotencyKey {
		t.Errorf("payments key = %s, want the paused call's %s", key, pending.IdempotencyKey)
	}
	storekit.AssertRecords(t, ctx, openParent(t, ctx, url).Records(), "run_mp_a", decision.Deferred, decision.Decided, decision.Closed)
}

// TestMPConcurrentResumesContinueOnce: resumes of one paused run from
// three processes at once (four goroutines each) continue it once: one
// succeeds, every other gets ErrNotResumable or ErrCheckpointConflict,
// and payments runs once.
func TestMPConcurrentResumesContinueOnce(t *testing.T) {
	url := pgtest.URL(t)
	ctx := storekit.Context(t)
	p := storekit.NewPayments(t)
	pending := pause(t, ctx, url, p, "run_mp_b")
	approval := contextostest.Approval(pending, storekit.FinanceLead, contextostest.FixedTime())
	job := mpJob{Role: roleResume, DB: url, Payments: p.URL(), RunID: "run_mp_b", Amount: 4200, Goroutines: 4, Approvals: []gateway.Approval{approval}}
	all := runChildren(t, ctx, job, job, job)
	n := tally(all)
	t.Logf("resume outcomes: %v", n)
	if n[""] != 1 || n[""]+n[errNotResumable]+n[errConflict] != 12 {
		t.Errorf("resume outcomes = %v, want 1 success and 11 ErrNotResumable or ErrCheckpointConflict", n)
	}
	for _, outs := range all {
		for _, o := range outs {
			if o.Err == "" && (o.Status != string(decision.Decided) || o.Txn != "txn_1") {
				t.Errorf("the resume that continued the run = %+v, want DECIDED with txn_1", o)
			}
		}
	}
	p.AssertOneEffect(t, 1)
	storekit.AssertRecords(t, ctx, openParent(t, ctx, url).Records(), "run_mp_b", decision.Deferred, decision.Decided, decision.Closed)
}

// TestMPIdenticalWritesExecuteOnce: 100 identical writes at once, spread
// over three processes, execute once: the payments service gets one raw
// request.
func TestMPIdenticalWritesExecuteOnce(t *testing.T) {
	split := []int{34, 33, 33}
	t.Run("gateway calls under one idempotency key", func(t *testing.T) {
		url := pgtest.URL(t)
		ctx := storekit.Context(t)
		p := storekit.NewPayments(t)
		var jobs []mpJob
		for _, n := range split {
			jobs = append(jobs, mpJob{Role: roleWrite, DB: url, Payments: p.URL(), RunID: "run_mp_c", Amount: 1200, Goroutines: n})
		}
		all := runChildren(t, ctx, jobs...)
		key := p.AssertOneEffect(t, 1)
		executed := 0
		for i, outs := range all {
			for _, o := range outs {
				if o.Err != "" || o.Status != string(gateway.StatusCompleted) || o.Key != key || o.Txn != "txn_1" {
					t.Errorf("child %d: call = %+v, want completed with txn_1 under %s", i, o, key)
				}
				if !o.Duplicate {
					executed++
				}
			}
		}
		if executed != 1 {
			t.Errorf("%d calls executed, want 1 (the others answered from the idempotency store)", executed)
		}
	})
	t.Run("invokes of one request", func(t *testing.T) {
		url := pgtest.URL(t)
		ctx := storekit.Context(t)
		p := storekit.NewPayments(t)
		var jobs []mpJob
		for _, n := range split {
			jobs = append(jobs, mpJob{Role: roleInvoke, DB: url, Payments: p.URL(), RunID: "run_mp_c", Amount: 1200, Goroutines: n})
		}
		all := runChildren(t, ctx, jobs...)
		p.AssertOneEffect(t, 1)
		n := tally(all)
		t.Logf("invoke outcomes: %v", n)
		if n[""] < 1 || n[""]+n[errInProgress] != 100 {
			t.Errorf("invoke outcomes = %v, want results (the run's, or its stored one) and ErrRunInProgress only", n)
		}
		for _, outs := range all {
			for _, o := range outs {
				if o.Err == "" && (o.Status != string(decision.Decided) || o.Txn != "txn_1") {
					t.Errorf("invoke = %+v, want DECIDED with txn_1", o)
				}
			}
		}
		storekit.AssertRecords(t, ctx, openParent(t, ctx, url).Records(), "run_mp_c", decision.Decided)
	})
}

// TestMPConcurrentAppendsKeepOneChain: records appended at once from
// three processes (eight goroutines each) form one unbroken chain holding
// every record once, and a record id all of them append is stored once.
func TestMPConcurrentAppendsKeepOneChain(t *testing.T) {
	url := pgtest.URL(t)
	ctx := storekit.Context(t)
	const procs, goroutines, each = 3, 8, 5
	job := mpJob{Role: roleAppend, DB: url, Goroutines: goroutines, PerGoroutine: each}
	all := runChildren(t, ctx, job, job, job)
	shared := 0
	for i, outs := range all {
		for _, o := range outs {
			if o.Err != "" {
				t.Errorf("child %d: append: %s", i, o.Err)
			}
			if o.Status == sharedAppended {
				shared++
			}
		}
	}
	if shared != 1 {
		t.Errorf("the record every process appended was stored by %d appends, want 1", shared)
	}
	st := openParent(t, ctx, url)
	recs, err := st.Records().List(ctx, decision.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if want := procs*goroutines*each + 1; len(recs) != want {
		t.Errorf("%d records stored, want %d", len(recs), want)
	}
	ids := map[string]bool{}
	for i, r := range recs {
		if ids[r.RecordID] {
			t.Errorf("record %s stored twice", r.RecordID)
		}
		ids[r.RecordID] = true
		if i > 0 && r.PrevRecordHash != recs[i-1].RecordHash {
			t.Errorf("record %d (%s) links to %s, not to record %d's hash %s", i, r.RecordID, r.PrevRecordHash, i-1, recs[i-1].RecordHash)
		}
	}
	for p := range procs {
		for g := range goroutines {
			for n := range each {
				if id := fmt.Sprintf("rec_p%d_g%d_n%d", p, g, n); !ids[id] {
					t.Errorf("record %s missing", id)
				}
			}
		}
	}
	if err := st.Records().Verify(ctx); err != nil {
		t.Errorf("Verify = %v", err)
	}
}

// TestMPApprovalConsumedOnce: one approval id consumed at once by ten
// goroutines in each of three processes is used once: exactly one Consume
// returns nil, every other ErrApprovalUsed.
func TestMPApprovalConsumedOnce(t *testing.T) {
	url := pgtest.URL(t)
	ctx := storekit.Context(t)
	job := mpJob{Role: roleConsume, DB: url, Goroutines: 10, ApprovalID: tenant + "/apr_mp_once"}
	n := tally(runChildren(t, ctx, job, job, job))
	if n[""] != 1 || n[errApprovalUsed] != 29 {
		t.Errorf("consume outcomes = %v, want 1 nil and 29 ErrApprovalUsed", n)
	}
}

// TestMPCrashBetweenEffectAndRecord: process A is SIGKILLed after the
// payments service performed the refund and before it answered, so A
// stored neither the call's result nor the run's record. Process B takes
// the run over (ResumeInput.Takeover) once A's idempotency claim has
// lapsed: its refund call carries the same idempotency key, the payments
// service answers it from its first answer (the effect stays one), and
// the run ends DECIDED with its record stored and the chain verifying.
func TestMPCrashBetweenEffectAndRecord(t *testing.T) {
	url := pgtest.URL(t)
	ctx := storekit.Context(t)
	p := storekit.NewPayments(t)
	const runID, ttl = "run_mp_f", 2 * time.Second
	a := storekit.StartChild(t, "process A", mpJob{Role: roleInvoke, DB: url, Payments: p.URL(), RunID: runID, Amount: 1200, Goroutines: 1, ClaimTTL: ttl})
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
	st := openParent(t, ctx, url)
	storekit.AssertRecords(t, ctx, st.Records(), runID) // A died before storing the record
	time.Sleep(ttl)                                     // A's claim of the run lapses

	out := runChildren(t, ctx, mpJob{Role: roleResume, DB: url, Payments: p.URL(), RunID: runID, Amount: 1200, Goroutines: 1,
		Takeover: true, ClaimTTL: ttl})[0][0]
	if out.Err != "" || out.Status != string(decision.Decided) || out.Txn != "txn_1" || out.Key != first {
		t.Fatalf("takeover in process B = %+v, want DECIDED with the first answer txn_1 under key %s", out, first)
	}
	// B's call reached payments again (A's claim lapsed uncompleted) with
	// the same key; the service deduplicated it.
	p.AssertOneEffect(t, 2)
	storekit.AssertRecords(t, ctx, st.Records(), runID, decision.Decided)
}

// TestMPCrashDuringApprovedResume: process A resumes the paused refund of
// 4200 with the finance approval and is SIGKILLed after the payments
// service performed the refund and before it answered. Once A's claims
// lapse, process B takes the run over without an approval of its own: it
// goes on with the approval A resumed the run with (used again by the same
// action, which the approval log allows), its call carries the key the
// paused call was given, the payments service answers it from its first
// answer, and the run ends DECIDED with its records chained.
func TestMPCrashDuringApprovedResume(t *testing.T) {
	url := pgtest.URL(t)
	ctx := storekit.Context(t)
	p := storekit.NewPayments(t)
	const runID, ttl = "run_mp_g", 2 * time.Second
	pending := pause(t, ctx, url, p, runID)
	approval := contextostest.Approval(pending, storekit.FinanceLead, contextostest.FixedTime())
	a := storekit.StartChild(t, "process A", mpJob{Role: roleResume, DB: url, Payments: p.URL(), RunID: runID, Amount: 4200, Goroutines: 1,
		ClaimTTL: ttl, Approvals: []gateway.Approval{approval}})
	var killed sync.Once
	p.OnEffect(func(string) { killed.Do(a.Kill) })
	storekit.Release(t, ctx, a)
	select {
	case <-a.Done():
	case <-ctx.Done():
		t.Fatalf("process A did not stop: %v", ctx.Err())
	}
	if key := p.AssertOneEffect(t, 1); key != pending.IdempotencyKey {
		t.Fatalf("payments key = %s, want the paused call's %s", key, pending.IdempotencyKey)
	}
	time.Sleep(ttl) // A's claim of the run lapses
	out := runChildren(t, ctx, mpJob{Role: roleResume, DB: url, Payments: p.URL(), RunID: runID, Amount: 4200, Goroutines: 1,
		Takeover: true, ClaimTTL: ttl})[0][0]
	if out.Err != "" || out.Status != string(decision.Decided) || out.Txn != "txn_1" || out.Key != pending.IdempotencyKey {
		t.Fatalf("takeover in process B = %+v, want DECIDED with the first answer txn_1 under key %s", out, pending.IdempotencyKey)
	}
	p.AssertOneEffect(t, 2)
	storekit.AssertRecords(t, ctx, openParent(t, ctx, url).Records(), runID, decision.Deferred, decision.Decided, decision.Closed)
}

// TestMPConcurrentTakeoversContinueOnce: process A is SIGKILLed after the
// payments service performed the refund and before it answered. Once its
// claims lapse, three processes take the run over at once (four
// goroutines each): exactly one continues it, every other takeover is
// refused before doing anything (the winner's lease, a lost race to
// claim, or the run already ended), and the run has one decision and one
// effect.
func TestMPConcurrentTakeoversContinueOnce(t *testing.T) {
	url := pgtest.URL(t)
	ctx := storekit.Context(t)
	p := storekit.NewPayments(t)
	const runID, ttl = "run_mp_h", 2 * time.Second
	a := storekit.StartChild(t, "process A", mpJob{Role: roleInvoke, DB: url, Payments: p.URL(), RunID: runID, Amount: 1200, Goroutines: 1, ClaimTTL: ttl})
	var killed sync.Once
	p.OnEffect(func(string) { killed.Do(a.Kill) })
	storekit.Release(t, ctx, a)
	<-a.Done()
	if result, exit := a.Exit(); result != "" || exit == nil {
		t.Fatalf("process A was not killed before it finished (exit %v, result %s):\n%s", exit, result, a.Output())
	}
	time.Sleep(ttl) // A's claims lapse
	job := mpJob{Role: roleResume, DB: url, Payments: p.URL(), RunID: runID, Amount: 1200, Goroutines: 4, Takeover: true, ClaimTTL: ttl}
	all := runChildren(t, ctx, job, job, job)
	n := tally(all)
	t.Logf("takeover outcomes: %v", n)
	if n[""] != 1 || n[""]+n[errNotResumable]+n[errConflict] != 12 {
		t.Errorf("takeover outcomes = %v, want 1 success and 11 refused (ErrLeaseHeld, ErrCheckpointConflict or ErrNotResumable)", n)
	}
	p.AssertOneEffect(t, 2)
	storekit.AssertRecords(t, ctx, openParent(t, ctx, url).Records(), runID, decision.Decided)
}
