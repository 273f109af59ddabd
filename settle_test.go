package contextos_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

// downDecisions is a decision store that goes down: while down, an
// append fails (after storing the record, when keeps is set, as a store
// whose commit's answer was lost does) and a lookup fails, so the run
// cannot tell whether its record is stored.
type downDecisions struct {
	*decision.MemoryStore
	keeps bool
	only  decision.Status // when set, only appends of this status fail
	down  atomic.Bool
}

func (s *downDecisions) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	if !s.down.Load() || s.only != "" && r.Status != s.only {
		return s.MemoryStore.Append(ctx, r)
	}
	if s.keeps {
		if _, err := s.MemoryStore.Append(ctx, r); err != nil {
			return nil, err
		}
	}
	return nil, errors.New("connection reset")
}

func (s *downDecisions) Get(ctx context.Context, id string) (*decision.Record, error) {
	if s.down.Load() {
		return nil, errors.New("db down")
	}
	return s.MemoryStore.Get(ctx, id)
}

// A run whose terminal record the decision store failed without saying
// whether it kept it decides once: the resume (or the Invoke repeated)
// stores the very record the run built, and never plans or calls again.
// Before, the resume planned again: with the same decision it met its own
// record id and could never end; with another it stored a second
// terminal record for the run. The invariant is checked over every
// combination: the store kept the record or not, the run paused for an
// approval first or not, the first settle failed too or not, the settle
// came from Resume or from Invoke. After an approval, the failing append
// is either the run's record or the CLOSED record that closes its
// DEFERRED one, stored after it.
func TestUnconfirmedRecordIsSettledNotDecidedAgain(t *testing.T) {
	for _, keeps := range []bool{false, true} {
		for _, failing := range []decision.Status{"", decision.Closed} {
			for _, failsAgain := range []bool{false, true} {
				for _, via := range []string{"Resume", "Invoke"} {
					for _, approval := range []bool{false, true} {
						if failing == decision.Closed && !approval {
							continue // nothing to close
						}
						name := fmt.Sprintf("keeps=%t/approval=%t/failing=%q/fails_again=%t/%s", keeps, approval, failing, failsAgain, via)
						t.Run(name, func(t *testing.T) {
							testSettle(t, keeps, approval, failing, failsAgain, via)
						})
					}
				}
			}
		}
	}
}

func testSettle(t *testing.T, keeps, approval bool, failing decision.Status, failsAgain bool, via string) {
	ctx := context.Background()
	amount := 1200
	if approval {
		amount = 4200 // above the finance gate's threshold
	}
	store := &downDecisions{MemoryStore: decision.NewMemoryStore(), keeps: keeps, only: failing}
	// Asked again, the planner would refuse: a run that plans again
	// records a second, different decision.
	planner := contextostest.NewPlanner(lookupPlan(), refundPlan(amount)).Then(deniedPlan()).RepeatLast()
	h := harness(t, planner, &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
	req, rc := refundRequest(t, amount, true)
	if approval {
		paused := h.Invoke(req, rc)
		contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
		a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
		store.down.Store(true)
		if _, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}}); err == nil {
			t.Fatal("the failed append was not reported")
		}
	} else {
		store.down.Store(true)
		if _, err := h.Runtime.Invoke(ctx, req, rc); err == nil {
			t.Fatal("the failed append was not reported")
		}
	}
	asked := len(planner.Requests())
	raw, err := h.Checkpoints.Load(ctx, rc.RunID)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := contextos.DecodeCheckpoint(raw)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Unconfirmed == nil || cp.Unconfirmed.Record.Status != decision.Decided || cp.Terminal || cp.Active || raw.Version != 3 {
		t.Fatalf("checkpoint v%d unconfirmed=%v terminal=%t active=%t; want the record kept at version 3", raw.Version, cp.Unconfirmed != nil, cp.Terminal, cp.Active)
	}
	built := cp.Unconfirmed.Record
	settle := func() (*contextos.Result, error) {
		if via == "Invoke" {
			return h.Runtime.Invoke(ctx, req, rc)
		}
		return h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{})
	}
	if failsAgain {
		if _, err := settle(); err == nil {
			t.Fatal("a settle against a store still down succeeded")
		}
		again, err := loadState(ctx, h.Checkpoints, rc.RunID)
		if err != nil || again.Unconfirmed == nil || again.Active || again.Unconfirmed.Record.RecordID != built.RecordID {
			t.Fatalf("after a failed settle: %+v (%v); want the same record still unconfirmed", again, err)
		}
	}
	store.down.Store(false)
	res, err := settle()
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	if res.Record.RecordID != built.RecordID || res.Record.Outcome != "approved" {
		t.Errorf("settled with %s %s; want the run's own record %s", res.Record.RecordID, res.Record.Outcome, built.RecordID)
	}
	if got := len(planner.Requests()); got != asked {
		t.Errorf("the settle asked the planner %d more times", got-asked)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	recs := listRecords(t, store, rc.RunID)
	terminal := 0
	for _, r := range recs {
		if r.Status != decision.Closed && r.Status != decision.Deferred {
			terminal++
		}
	}
	if terminal != 1 {
		t.Errorf("the run has %d terminal records; want 1", terminal)
	}
	assertClosedRecords(t, recs, res.Record.RecordID)
	if err := store.Verify(ctx); err != nil {
		t.Error(err)
	}
	end, err := h.Checkpoints.Load(ctx, rc.RunID)
	if err != nil {
		t.Fatal(err)
	}
	final, err := contextos.DecodeCheckpoint(end)
	if err != nil || !final.Terminal || final.Active || final.Stopped != "" || final.Unconfirmed != nil || end.Version != 2 {
		t.Errorf("final checkpoint v%d %+v (%v); want the run ended at version 2", end.Version, final, err)
	}
	// Once ended, the run answers with its record and stores nothing more.
	n := len(recs)
	if again, err := h.Runtime.Invoke(ctx, req, rc); err != nil || again.Record.RecordHash != res.Record.RecordHash {
		t.Errorf("Invoke after the settle: %v", err)
	}
	if _, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{}); !errors.Is(err, contextos.ErrNotResumable) {
		t.Errorf("Resume after the settle = %v, want ErrNotResumable", err)
	}
	if got := len(listRecords(t, store, rc.RunID)); got != n {
		t.Errorf("%d records after the run ended, want %d", got, n)
	}
}

// A hard stop's ESCALATED record whose storage is unconfirmed settles as
// the hard stop it was: the run stays resumable, and its resume with more
// budget ends it, closing the settled record.
func TestUnconfirmedHardStopSettlesResumable(t *testing.T) {
	ctx := context.Background()
	store := &downDecisions{MemoryStore: decision.NewMemoryStore(), keeps: true}
	planner := contextostest.NewPlanner(lookupPlan(), refundPlan(1200))
	h := harness(t, planner, &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
	req, rc := refundRequest(t, 1200, true)
	rc.RunBudget.MaxToolCalls = 2 // the refund is the third call
	store.down.Store(true)
	if _, err := h.Runtime.Invoke(ctx, req, rc); err == nil {
		t.Fatal("the failed append was not reported")
	}
	store.down.Store(false)
	stopped, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, stopped, decision.Escalated)
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
	cp, err := loadState(ctx, h.Checkpoints, rc.RunID)
	if err != nil || cp.Terminal || cp.Unconfirmed != nil || cp.Stopped == "" || cp.Stopped == "record_not_stored: the decision store failed" {
		t.Fatalf("checkpoint %+v (%v); want the budget stop back", cp, err)
	}
	budget := rc.RunBudget
	budget.MaxToolCalls = 5
	done, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Budget: &budget})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, done, decision.Decided)
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	assertClosedRecords(t, listRecords(t, store, rc.RunID), done.Record.RecordID)
}

// A pause whose DEFERRED record the store failed without saying whether
// it kept it goes on as a pause: the resume (or Invoke again) first
// stores that record, or adopts the store's copy, then applies the
// approval; the record is in the chain once, closed when the run ends,
// and the run replays equal.
func TestUnconfirmedPauseIsStoredBeforeTheResume(t *testing.T) {
	for _, keeps := range []bool{false, true} {
		for _, via := range []string{"Resume", "Invoke"} {
			t.Run(fmt.Sprintf("keeps=%t/%s", keeps, via), func(t *testing.T) {
				ctx := context.Background()
				store := &downDecisions{MemoryStore: decision.NewMemoryStore(), keeps: keeps}
				h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
				req, rc := refundRequest(t, 4200, true)
				store.down.Store(true)
				if _, err := h.Runtime.Invoke(ctx, req, rc); err == nil {
					t.Fatal("the failed append was not reported")
				}
				cp, err := loadState(ctx, h.Checkpoints, rc.RunID)
				if err != nil || cp.Pending == nil || cp.Unconfirmed == nil || cp.Unconfirmed.Record.Status != decision.Deferred {
					t.Fatalf("checkpoint %+v (%v); want the pause with its record kept", cp, err)
				}
				deferred := cp.Unconfirmed.Record.RecordID
				store.down.Store(false)
				if via == "Invoke" {
					paused, err := h.Runtime.Invoke(ctx, req, rc)
					if err != nil {
						t.Fatal(err)
					}
					contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
					if paused.Record.RecordID != deferred {
						t.Errorf("Invoke again answered with %s, want the pause's record %s", paused.Record.RecordID, deferred)
					}
				}
				a := contextostest.Approval(cp.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
				done, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
				if err != nil {
					t.Fatal(err)
				}
				contextostest.AssertStatus(t, done, decision.Decided)
				contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
				recs := listRecords(t, store, rc.RunID)
				n := 0
				for _, r := range recs {
					if r.RecordID == deferred {
						n++
					}
				}
				if n != 1 {
					t.Errorf("the pause's record is stored %d times, want once", n)
				}
				assertClosedRecords(t, recs, done.Record.RecordID)
				if err := store.Verify(ctx); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// failingSaves fails one checkpoint save (the at-th), and every save from
// the from-th on when from is set, as a process that dies after its
// record's append and before its next save leaves the checkpoint.
type failingSaves struct {
	*contextos.InMemoryCheckpoints
	at, from, n int
}

func (f *failingSaves) Save(ctx context.Context, c *contextos.Checkpoint) error {
	if f.n++; f.n == f.at || f.from > 0 && f.n >= f.from {
		return errors.New("checkpoint store down")
	}
	return f.InMemoryCheckpoints.Save(ctx, c)
}

// The checkpoint a pause saves before its record's append holds the
// record, unconfirmed: when the save after the append is lost, the
// resume adopts the stored record and goes on, and the run's record ids
// are those of its replay.
func TestPauseCheckpointLostAfterTheAppend(t *testing.T) {
	ctx := context.Background()
	// Saves: the claim, the planner's spend after each of its two turns,
	// the pause's before its append, the pause's after.
	saves := &failingSaves{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints(), at: 5}
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), &contextostest.Options{Runtime: contextos.Options{Checkpoints: saves}})
	req, rc := refundRequest(t, 4200, true)
	if _, err := h.Runtime.Invoke(ctx, req, rc); err == nil {
		t.Fatal("the lost checkpoint save was not reported")
	}
	c, err := saves.Load(ctx, rc.RunID)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := contextos.DecodeCheckpoint(c)
	if err != nil || cp.Pending == nil || cp.Unconfirmed == nil {
		t.Fatalf("checkpoint %+v (%v); want the pause with its record unconfirmed", cp, err)
	}
	a := contextostest.Approval(cp.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
	done, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, done, decision.Decided)
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	recs := listRecords(t, h.Decisions, rc.RunID)
	if len(recs) != 3 { // DEFERRED, DECIDED, CLOSED
		t.Errorf("%d records, want the pause's, the decision and its closing one", len(recs))
	}
	assertClosedRecords(t, recs, done.Record.RecordID)
}

// A runtime that dies after storing the run's decision and before saving
// the checkpoint that says so (here: every save after the claim lost)
// leaves the run claimed; the takeover finds the decision in the decision
// store and ends the run with it. Before, the takeover planned the run
// again and stored a second decision (or, planning the same, met its own
// record id forever). No packet is captured: the replay inputs died with
// the runtime.
func TestTakeoverAfterTheDecisionWasStored(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	saves := &failingSaves{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints(), from: 2}
	saves.Now = clock.Now
	planner := contextostest.NewPlanner(lookupPlan(), refundPlan(1200)).Then(deniedPlan()).RepeatLast()
	h := bareHarness(t, planner, &contextostest.Options{Now: clock.Now, Runtime: contextos.Options{Checkpoints: saves}})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 1200, true)
	if _, err := h.Runtime.Invoke(ctx, req, rc); err == nil {
		t.Fatal("the lost checkpoint save was not reported")
	}
	asked := len(planner.Requests())
	saves.from = 0
	// The run's runtime may be alive: only a takeover goes on.
	if _, err := h.Runtime.Invoke(ctx, req, rc); !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("Invoke of the claimed run = %v, want ErrRunInProgress", err)
	}
	if _, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{}); !errors.Is(err, contextos.ErrNotResumable) {
		t.Errorf("Resume of the claimed run = %v, want ErrNotResumable", err)
	}
	if _, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Takeover: true}); !errors.Is(err, contextos.ErrLeaseHeld) {
		t.Errorf("takeover while the claim's lease lasts = %v, want ErrLeaseHeld", err)
	}
	clock.Advance(contextos.DefaultHeartbeatTTL)
	res, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Takeover: true})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	if res.Record.Outcome != "approved" || len(planner.Requests()) != asked {
		t.Errorf("took over with %q after %d more planner turns; want the run's own decision and none", res.Record.Outcome, len(planner.Requests())-asked)
	}
	if res.ReplayPacketID != "" {
		t.Errorf("a packet %s was captured from incomplete replay inputs", res.ReplayPacketID)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	if recs := listRecords(t, h.Decisions, rc.RunID); len(recs) != 1 {
		t.Errorf("%d records, want the run's one", len(recs))
	}
	cp, err := loadState(ctx, saves, rc.RunID)
	if err != nil || !cp.Terminal || cp.Active || cp.Unconfirmed != nil {
		t.Errorf("checkpoint %+v (%v); want the run ended", cp, err)
	}
	if again, err := h.Runtime.Invoke(ctx, req, rc); err != nil || again.Record.RecordHash != res.Record.RecordHash {
		t.Errorf("Invoke after the takeover = %v", err)
	}
	if _, err := h.Runtime.Capture(ctx, rc.RunID, replay.SourceOperatorCorrection); !errors.Is(err, contextos.ErrReplayInputsLost) {
		t.Errorf("Capture of a run settled from a dead runtime's record = %v, want ErrReplayInputsLost", err)
	}
}

// A checkpoint whose unconfirmed record the run could not have built (a
// corrupt or edited store) is refused, and nothing is stored: a settle
// stores the record as it stands. (The checkpoint store is trusted with
// the run's state; these checks catch corruption, not a forger who can
// rewrite plans and results too.)
func TestCorruptUnconfirmedRecordIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(cp *contextos.CheckpointState)
	}{
		{"CLOSED", func(cp *contextos.CheckpointState) { cp.Unconfirmed.Record.Status = decision.Closed }},
		{"IN_FLIGHT", func(cp *contextos.CheckpointState) { cp.Unconfirmed.Record.Status = decision.InFlight }},
		{"DEFERRED without a pause", func(cp *contextos.CheckpointState) { cp.Unconfirmed.Record.Status = decision.Deferred }},
		{"another status under the id", func(cp *contextos.CheckpointState) { cp.Unconfirmed.Record.Status = decision.Rejected }},
		{"another id", func(cp *contextos.CheckpointState) { cp.Unconfirmed.Record.RecordID = "dr_0000000000000001" }},
		{"another sequence", func(cp *contextos.CheckpointState) { cp.Seq++ }},
		{"another run", func(cp *contextos.CheckpointState) { cp.Unconfirmed.Record.RunID = "run_other" }},
		{"another tenant", func(cp *contextos.CheckpointState) { cp.Unconfirmed.Record.TenantID = "tenant_other" }},
		{"no record", func(cp *contextos.CheckpointState) { cp.Unconfirmed.Record = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := &downDecisions{MemoryStore: decision.NewMemoryStore()}
			h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
			scriptDefaults(h, "")
			req, rc := refundRequest(t, 1200, true)
			store.down.Store(true)
			if _, err := h.Runtime.Invoke(ctx, req, rc); err == nil {
				t.Fatal("the failed append was not reported")
			}
			store.down.Store(false)
			cp, err := loadState(ctx, h.Checkpoints, rc.RunID)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(cp)
			if err := saveState(ctx, h.Checkpoints, cp); err != nil {
				t.Fatal(err)
			}
			if _, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{}); err == nil || !strings.Contains(err.Error(), "corrupt") {
				t.Errorf("Resume = %v, want the checkpoint refused as corrupt", err)
			}
			if _, err := h.Runtime.Invoke(ctx, req, rc); err == nil || !strings.Contains(err.Error(), "corrupt") {
				t.Errorf("Invoke = %v, want the checkpoint refused as corrupt", err)
			}
			if recs := listRecords(t, store, rc.RunID); len(recs) != 0 {
				t.Errorf("%d records stored from a corrupt checkpoint", len(recs))
			}
		})
	}
}

// Settles racing on one run (Invokes and Resumes from many callers) store
// the record once: each caller gets the run's record or ErrRunInProgress,
// and a run whose storage is unconfirmed is not captured until settled.
func TestConcurrentSettles(t *testing.T) {
	ctx := context.Background()
	store := &downDecisions{MemoryStore: decision.NewMemoryStore(), keeps: true}
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)).Then(deniedPlan()).RepeatLast(), &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
	req, rc := refundRequest(t, 1200, true)
	store.down.Store(true)
	if _, err := h.Runtime.Invoke(ctx, req, rc); err == nil {
		t.Fatal("the failed append was not reported")
	}
	if _, err := h.Runtime.Capture(ctx, rc.RunID, replay.SourceOperatorCorrection); !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("Capture of an unsettled run = %v, want ErrRunInProgress", err)
	}
	store.down.Store(false)
	const n = 8
	results := make(chan error, n)
	hashes := make(chan string, n)
	for i := range n {
		go func() {
			var res *contextos.Result
			var err error
			if i%2 == 0 {
				res, err = h.Runtime.Invoke(ctx, req, rc)
			} else {
				res, err = h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{})
			}
			if err == nil {
				hashes <- res.Record.RecordHash
			}
			results <- err
		}()
	}
	ok := 0
	for range n {
		err := <-results
		switch {
		case err == nil:
			ok++
		case errors.Is(err, contextos.ErrRunInProgress), errors.Is(err, contextos.ErrNotResumable):
		default:
			t.Errorf("a settle failed with %v", err)
		}
	}
	close(hashes)
	if ok == 0 {
		t.Fatal("no settle succeeded")
	}
	recs := listRecords(t, store, rc.RunID)
	if len(recs) != 1 {
		t.Fatalf("%d records, want one", len(recs))
	}
	for h := range hashes {
		if h != recs[0].RecordHash {
			t.Errorf("a caller got record %s, the store holds %s", h, recs[0].RecordHash)
		}
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
}

// blockingDecisions holds the first append of an ESCALATED record until
// released, so a test can act while a hard stop's record is on its way.
type blockingDecisions struct {
	*decision.MemoryStore
	entered, release chan struct{}
	once             atomic.Bool
}

func (s *blockingDecisions) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	if r.Status == decision.Escalated && !s.once.Swap(true) {
		close(s.entered)
		<-s.release
	}
	return s.MemoryStore.Append(ctx, r)
}

// A resume that lands while a hard stop's ESCALATED record is being
// appended settles the run with that record (it is in the checkpoint)
// instead of going on without it: the record is then the run's, open,
// and closed by the record its next resume ends with. Before, the resume
// went on and the ESCALATED record, stored after, was never closed.
func TestResumeDuringAHardStopsAppend(t *testing.T) {
	ctx := context.Background()
	store := &blockingDecisions{MemoryStore: decision.NewMemoryStore(), entered: make(chan struct{}), release: make(chan struct{})}
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
	req, rc := refundRequest(t, 1200, true)
	rc.RunBudget.MaxToolCalls = 2 // the refund is the third call
	done := make(chan error, 1)
	go func() {
		_, err := h.Runtime.Invoke(ctx, req, rc)
		done <- err
	}()
	<-store.entered
	budget := rc.RunBudget
	budget.MaxToolCalls = 5
	early, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Budget: &budget})
	close(store.release)
	<-done // the Invoke may lose the checkpoint to the resume's settle
	if err != nil {
		t.Fatalf("Resume during the append = %v", err)
	}
	contextostest.AssertStatus(t, early, decision.Escalated)
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
	final, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Budget: &budget})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, final, decision.Decided)
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	assertClosedRecords(t, listRecords(t, store.MemoryStore, rc.RunID), final.Record.RecordID)
}

// Settling a run is not its work: invoking a finished run again, Capture,
// a settle of a record whose storage was unconfirmed and a takeover that
// settles a decision the dead runtime had stored succeed an hour after
// the run started, far past its 30 s wall clock, with no planner turn and
// no call. A run's own remaining work stays bounded by the wall clock: a
// resume of a run stopped by it, without more budget, stops again before
// planning or calling anything.
func TestSettlingIsNotBudgetedWork(t *testing.T) {
	late := time.Hour
	t.Run("invoke again and capture", func(t *testing.T) {
		ctx := context.Background()
		clock := newFakeClock()
		h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Now: clock.Now})
		req, rc := refundRequest(t, 1200, true)
		res := h.Invoke(req, rc)
		contextostest.AssertStatus(t, res, decision.Decided)
		clock.Advance(late)
		again, err := h.Runtime.Invoke(ctx, req, rc)
		if err != nil || again.Record.RecordHash != res.Record.RecordHash {
			t.Fatalf("Invoke of the finished run an hour later = %v", err)
		}
		p, err := h.Runtime.Capture(ctx, rc.RunID, replay.SourceGoldenCase)
		if err != nil {
			t.Fatalf("Capture an hour later: %v", err)
		}
		report, err := h.Runtime.Replay(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		contextostest.AssertReplayEqual(t, report)
	})
	t.Run("settle an unconfirmed record", func(t *testing.T) {
		ctx := context.Background()
		clock := newFakeClock()
		store := &downDecisions{MemoryStore: decision.NewMemoryStore()}
		planner := contextostest.NewPlanner(lookupPlan(), refundPlan(1200)).Then(deniedPlan()).RepeatLast()
		h := harness(t, planner, &contextostest.Options{Now: clock.Now, Runtime: contextos.Options{Decisions: store}})
		req, rc := refundRequest(t, 1200, true)
		store.down.Store(true)
		if _, err := h.Runtime.Invoke(ctx, req, rc); err == nil {
			t.Fatal("the failed append was not reported")
		}
		store.down.Store(false)
		asked := len(planner.Requests())
		clock.Advance(late)
		res, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{})
		if err != nil {
			t.Fatalf("settle an hour later: %v", err)
		}
		contextostest.AssertStatus(t, res, decision.Decided)
		if n := len(planner.Requests()) - asked; n != 0 {
			t.Errorf("the settle asked the planner %d times", n)
		}
		contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	})
	t.Run("takeover settles a stored decision", func(t *testing.T) {
		ctx := context.Background()
		clock := newFakeClock()
		saves := &failingSaves{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints(), from: 2}
		saves.Now = clock.Now
		planner := contextostest.NewPlanner(lookupPlan(), refundPlan(1200)).Then(deniedPlan()).RepeatLast()
		h := bareHarness(t, planner, &contextostest.Options{Now: clock.Now, Runtime: contextos.Options{Checkpoints: saves}})
		scriptDefaults(h, "")
		req, rc := refundRequest(t, 1200, true)
		if _, err := h.Runtime.Invoke(ctx, req, rc); err == nil {
			t.Fatal("the lost checkpoint save was not reported")
		}
		saves.from = 0
		clock.Advance(late)
		res, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Takeover: true})
		if err != nil {
			t.Fatalf("takeover an hour later: %v", err)
		}
		contextostest.AssertStatus(t, res, decision.Decided)
		if again, err := h.Runtime.Invoke(ctx, req, rc); err != nil || again.Record.RecordHash != res.Record.RecordHash {
			t.Errorf("Invoke after the takeover = %v", err)
		}
	})
	t.Run("remaining work stays bounded", func(t *testing.T) {
		ctx := context.Background()
		clock := newFakeClock()
		planner := contextostest.NewPlanner(lookupPlan(), refundPlan(1200))
		h := bareHarness(t, planner, &contextostest.Options{Now: clock.Now})
		t.Cleanup(func() { h.ReplayAll() })
		scriptDefaults(h, "adp_orders")
		// The lookup takes 40 s: past the run's 30 s wall clock.
		h.Adapter("adp_orders").On("lookup").When(func(map[string]any) bool { clock.Advance(40 * time.Second); return false })
		h.Adapter("adp_orders").On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200})
		req, rc := refundRequest(t, 1200, true)
		stopped := h.Invoke(req, rc)
		contextostest.AssertStatus(t, stopped, decision.Escalated)
		asked := len(planner.Requests())
		clock.Advance(late)
		again, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{})
		if err != nil {
			t.Fatalf("resume without more budget: %v", err)
		}
		contextostest.AssertStatus(t, again, decision.Escalated)
		if !strings.Contains(again.Record.Rationale.Summary, "wall_clock") {
			t.Errorf("the resume stopped with %q, want the wall clock", again.Record.Rationale.Summary)
		}
		if n := len(planner.Requests()) - asked; n != 0 {
			t.Errorf("the resume without budget asked the planner %d times", n)
		}
		contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
		budget := rc.RunBudget
		budget.WallClockMS = 120_000
		done, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Budget: &budget})
		if err != nil {
			t.Fatal(err)
		}
		contextostest.AssertStatus(t, done, decision.Decided)
		contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	})
}

// A settle's own clock readings are no replay input (found by
// TestBudgetsExactGeneratedRuns): the settle of a hard stop whose record
// the store failed kept its rebuild's readings in the checkpoint, and a
// replay, which builds the record where the run built it and never
// settles, served them to the next resume in place of that resume's own
// readings. With an hour between the settle and the resume, the
// replayed record counted an hour of wall clock the run never used (the
// live record counts 0) and the packet replayed replay_mismatch.
func TestSettleReadingsAreNoReplayInput(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	store := &downDecisions{MemoryStore: decision.NewMemoryStore(), keeps: true}
	planner := contextostest.NewPlanner(lookupPlan(), refundPlan(1200))
	h := harness(t, planner, &contextostest.Options{Now: clock.Now, Runtime: contextos.Options{Decisions: store}})
	req, rc := refundRequest(t, 1200, true)
	rc.RunBudget.MaxToolCalls = 2 // the refund is the third call
	store.down.Store(true)
	if _, err := h.Runtime.Invoke(ctx, req, rc); err == nil {
		t.Fatal("the failed append was not reported")
	}
	store.down.Store(false)
	clock.Advance(time.Hour)
	stopped, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, stopped, decision.Escalated)
	clock.Advance(time.Hour)
	budget := rc.RunBudget
	budget.MaxToolCalls = 5
	done, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Budget: &budget})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, done, decision.Decided)
	if got := done.Record.BudgetUsage.WallClockMS; got != 0 {
		t.Errorf("the record counts %d ms of wall clock, want 0 (the clock moved only while the run was stopped)", got)
	}
	contextostest.AssertReplayEqual(t, h.Replay(done))
}
