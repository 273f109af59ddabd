package contextos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/schemas"
)

// fakeClock is an injected clock tests move by hand.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(contextostest.FixedTime().UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// savesRecorder is a CheckpointStore that keeps a copy of every checkpoint
// saved, so a test sees each checkpoint a run wrote.
type savesRecorder struct {
	contextos.CheckpointStore
	mu    sync.Mutex
	saves []contextos.CheckpointState
	calls []int // index into saves where each Invoke or Resume began
}

func (s *savesRecorder) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	if err := s.CheckpointStore.Save(ctx, cp); err != nil {
		return err
	}
	st, err := contextos.DecodeCheckpoint(cp)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saves = append(s.saves, *st)
	return nil
}

// begin marks the start of an Invoke or Resume.
func (s *savesRecorder) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, len(s.saves))
}

// longHarness is the support harness with a run in long_running mode on an
// injected clock, its checkpoints recorded. Register hooks on its adapters,
// then scriptDefaults.
func longHarness(t *testing.T, planner contextos.Planner, clock *fakeClock, opts *contextostest.Options) (*contextostest.Harness, *savesRecorder) {
	t.Helper()
	var o contextostest.Options
	if opts != nil {
		o = *opts
	}
	saves := &savesRecorder{CheckpointStore: contextos.NewInMemoryCheckpoints()}
	o.Runtime.Checkpoints = saves
	o.Now = clock.Now
	h := bareHarness(t, planner, &o)
	t.Cleanup(func() { h.ReplayAll() })
	return h, saves
}

func longRequest(t *testing.T, amount int, session time.Duration) (*runcontext.InvokeRequest, *runcontext.RunContext) {
	t.Helper()
	req, rc := refundRequest(t, amount, true)
	req.Mode = runcontext.ModeLongRunning
	rc.RunBudget.WallClockMS = (24 * time.Hour).Milliseconds()
	rc.RunBudget.MaxSessionDurationMS = session.Milliseconds()
	return req, rc
}

func runRecords(t *testing.T, h *contextostest.Harness, runID string) []*decision.Record {
	t.Helper()
	return listRecords(t, h.Decisions, runID)
}

func listRecords(t *testing.T, s decision.Store, runID string) []*decision.Record {
	t.Helper()
	recs, err := s.List(context.Background(), decision.Filter{RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// A session that passes max_session_duration_ms ends ESCALATED before the
// next tool call, whether the time passed inside a tool call, while the
// run was paused, or neither; an operator may extend it.
func TestLongRunningSessionLimit(t *testing.T) {
	ctx := context.Background()
	t.Run("time passes inside a tool call", func(t *testing.T) {
		clock := newFakeClock()
		h, _ := longHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), clock, nil)
		h.Adapter("adp_orders").On("lookup").When(func(map[string]any) bool { clock.Advance(61 * time.Minute); return false })
		scriptDefaults(h, "")
		req, rc := longRequest(t, 1200, time.Hour)
		res := h.Invoke(req, rc)
		contextostest.AssertStatus(t, res, decision.Escalated)
		if s := res.Record.Rationale.Summary; !strings.Contains(s, "session_expired") || !strings.Contains(s, "max_session_duration_ms 3600000") {
			t.Errorf("rationale = %q, want the session limit named", s)
		}
		contextostest.AssertCalls(t, h.Adapter("adp_orders"), "lookup", 1)
		contextostest.AssertCalls(t, h.Adapter("adp_policy"), "eval", 0)
		contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
		// A resume without a longer session stops again, calling nothing.
		again, err := h.Runtime.Resume(ctx, res.RunID, contextos.ResumeInput{})
		if err != nil {
			t.Fatal(err)
		}
		contextostest.AssertStatus(t, again, decision.Escalated)
		contextostest.AssertCalls(t, h.Adapter("adp_policy"), "eval", 0)
		// An operator extends the session: the run goes on from its
		// checkpoint.
		budget := rc.RunBudget
		budget.MaxSessionDurationMS = (3 * time.Hour).Milliseconds()
		done, err := h.Runtime.Resume(ctx, res.RunID, contextos.ResumeInput{Budget: &budget})
		if err != nil {
			t.Fatal(err)
		}
		contextostest.AssertStatus(t, done, decision.Decided)
		contextostest.AssertCalls(t, h.Adapter("adp_orders"), "lookup", 1)
		assertClosedRecords(t, runRecords(t, h, res.RunID), done.Record.RecordID)
	})
	t.Run("time passes while paused", func(t *testing.T) {
		clock := newFakeClock()
		h, _ := longHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), clock, nil)
		scriptDefaults(h, "")
		req, rc := longRequest(t, 4200, 4*time.Hour)
		paused := h.Invoke(req, rc)
		contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
		clock.Advance(4*time.Hour + time.Second) // the approval comes too late
		a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, clock.Now())
		res, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
		if err != nil {
			t.Fatal(err)
		}
		contextostest.AssertStatus(t, res, decision.Escalated)
		if !strings.Contains(res.Record.Rationale.Summary, "session_expired") {
			t.Errorf("rationale = %q", res.Record.Rationale.Summary)
		}
		contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
		assertClosedRecords(t, runRecords(t, h, paused.RunID), res.Record.RecordID)
	})
	t.Run("within the session", func(t *testing.T) {
		clock := newFakeClock()
		h, _ := longHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), clock, nil)
		scriptDefaults(h, "")
		// A session of 90 minutes: the finance gate's approval request
		// lasts two hours (ttl_seconds 7200).
		req, rc := longRequest(t, 4200, 90*time.Minute)
		paused := h.Invoke(req, rc)
		clock.Advance(90 * time.Minute) // exactly at the limit is still within it
		a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, clock.Now())
		res, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
		if err != nil {
			t.Fatal(err)
		}
		contextostest.AssertStatus(t, res, decision.Decided)
	})
	t.Run("the default is four hours", func(t *testing.T) {
		clock := newFakeClock()
		h, _ := longHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), clock, nil)
		scriptDefaults(h, "")
		req, rc := longRequest(t, 4200, 0)
		paused := h.Invoke(req, rc)
		clock.Advance(time.Duration(runcontext.DefaultRunBudget().MaxSessionDurationMS)*time.Millisecond + time.Millisecond)
		a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, clock.Now())
		res, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
		if err != nil {
			t.Fatal(err)
		}
		contextostest.AssertStatus(t, res, decision.Escalated)
	})
	t.Run("other modes are bounded by wall_clock_ms, not the session", func(t *testing.T) {
		clock := newFakeClock()
		h, _ := longHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), clock, nil)
		scriptDefaults(h, "")
		req, rc := longRequest(t, 4200, time.Hour)
		req.Mode = runcontext.ModeBatch
		paused := h.Invoke(req, rc)
		clock.Advance(90 * time.Minute) // past the session, within the approval request's TTL
		a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, clock.Now())
		res, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
		if err != nil {
			t.Fatal(err)
		}
		contextostest.AssertStatus(t, res, decision.Decided)
		for _, r := range runRecords(t, h, paused.RunID) {
			if r.Status == decision.InFlight {
				t.Errorf("a batch run wrote an IN_FLIGHT record %s", r.RecordID)
			}
		}
	})
}

// Each checkpoint of a long_running run is an IN_FLIGHT record and a
// heartbeat that renews the run's lease; the records are closed when the
// run ends.
func TestLongRunningInFlightRecords(t *testing.T) {
	clock := newFakeClock()
	h, saves := longHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), clock, nil)
	h.Adapter("adp_orders").On("lookup").When(func(map[string]any) bool { clock.Advance(time.Minute); return false })
	scriptDefaults(h, "")
	req, rc := longRequest(t, 4200, 4*time.Hour)
	saves.begin()
	paused := h.Invoke(req, rc)
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	clock.Advance(time.Hour)
	saves.begin()
	done := h.Approve(paused, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
	contextostest.AssertStatus(t, done, decision.Decided)

	recs := runRecords(t, h, paused.RunID)
	want := []decision.Status{
		decision.InFlight, // before turn 0
		decision.InFlight, // after the lookup
		decision.InFlight, // after the policy evaluation
		decision.InFlight, // before turn 1
		decision.Deferred, // the refund awaits its approval
		decision.InFlight, // the resume, before the refund runs
		decision.InFlight, // after the refund
		decision.Decided,
		decision.Closed, decision.Closed, decision.Closed, decision.Closed, decision.Closed, decision.Closed, decision.Closed,
	}
	if got := statuses(recs); !slices.Equal(got, want) {
		t.Fatalf("records = %v\nwant      %v", got, want)
	}
	assertClosedRecords(t, recs, done.Record.RecordID)
	checkCheckpointRecords(t, saves, recs, contextos.DefaultHeartbeatTTL)
	if err := h.Decisions.Verify(context.Background()); err != nil {
		t.Error(err)
	}
	// Every record, IN_FLIGHT and CLOSED ones included, is a published
	// decision-record.v1.
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas.Validate("decision-record", b); err != nil {
			t.Errorf("%s %s: %v", r.Status, r.RecordID, err)
		}
	}
}

// A heartbeat renews the run's lease: a takeover is refused while a live
// runtime holds it and allowed once its heartbeats have stopped for the
// TTL.
func TestLongRunningLease(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	const ttl = 5 * time.Minute
	// The decision store fails the third IN_FLIGHT record: the runtime
	// "dies" with the run claimed, after its checkpoint was saved.
	store := &failingRecords{Store: decision.NewMemoryStore(), failAt: 3}
	var o contextostest.Options
	o.Runtime.Decisions = store
	o.Runtime.HeartbeatTTL = ttl
	o.Now = clock.Now
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &o)
	scriptDefaults(h, "adp_orders")
	h.Adapter("adp_orders").On("lookup").When(func(map[string]any) bool { clock.Advance(3 * time.Minute); return false })
	h.Adapter("adp_orders").On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200})
	req, rc := longRequest(t, 1200, 4*time.Hour)
	if _, err := h.Runtime.Invoke(ctx, req, rc); !errors.Is(err, errStoreDown) {
		t.Fatalf("Invoke = %v, want the store failure", err)
	}
	cp, err := loadState(ctx, h.Checkpoints, rc.RunID)
	if err != nil {
		t.Fatal(err)
	}
	// The heartbeat after the lookup (3 minutes in) renewed the lease the
	// claim took at the start.
	if want := contextostest.FixedTime().Add(3*time.Minute + ttl).Format(time.RFC3339Nano); !cp.Active || cp.LeaseUntil != want {
		t.Fatalf("checkpoint active %v, lease_until %s, want active until %s", cp.Active, cp.LeaseUntil, want)
	}
	clock.Advance(ttl - time.Second) // past the claim's lease, within the renewed one
	_, err = h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Takeover: true})
	if !errors.Is(err, contextos.ErrLeaseHeld) || !errors.Is(err, contextos.ErrNotResumable) {
		t.Fatalf("takeover within the lease = %v, want ErrLeaseHeld", err)
	}
	if !strings.Contains(err.Error(), "lease lasts 1s more") {
		t.Errorf("error %q does not say how long the lease lasts", err)
	}
	clock.Advance(time.Second) // the lease has lapsed
	if _, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{}); !errors.Is(err, contextos.ErrNotResumable) {
		t.Fatalf("resume of an active run without Takeover = %v, want ErrNotResumable", err)
	}
	done, err := h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Takeover: true})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, done, decision.Decided)
	contextostest.AssertCalls(t, h.Adapter("adp_orders"), "lookup", 1)
	recs := listRecords(t, store, rc.RunID)
	// The IN_FLIGHT record the dead runtime never stored is still closed
	// (its checkpoint listed it); every stored one is closed too.
	closes := map[string]bool{}
	for _, r := range recs {
		if r.Status == decision.Closed {
			closes[r.Closes] = true
		}
	}
	if !closes[store.failedID] {
		t.Errorf("the in-flight record the checkpoint listed (%s) is not closed", store.failedID)
	}
	assertClosedRecords(t, recs, done.Record.RecordID)
	// The taken-over run replays as recorded: the replay stops where the
	// takeover began (the heartbeat whose record failed) and goes on as
	// the takeover did.
	contextostest.AssertReplayEqual(t, h.Replay(done))
}

var errStoreDown = errors.New("decision store is down")

// failingRecords fails the failAt-th IN_FLIGHT append once.
type failingRecords struct {
	decision.Store
	mu       sync.Mutex
	n        int
	failAt   int
	failedID string
}

func (s *failingRecords) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	s.mu.Lock()
	if r.Status == decision.InFlight {
		s.n++
		if s.n == s.failAt {
			s.failedID = r.RecordID
			s.mu.Unlock()
			return nil, errStoreDown
		}
	}
	s.mu.Unlock()
	return s.Store.Append(ctx, r)
}

// assertClosedRecords checks a run that has ended: exactly one terminal
// record that no CLOSED record closes (terminal), and it is the run's
// latest record that is not CLOSED; every IN_FLIGHT and DEFERRED record is
// closed by a later CLOSED record, and nothing is closed twice.
func assertClosedRecords(t *testing.T, recs []*decision.Record, terminal string) {
	t.Helper()
	closedAt := map[string]int{}
	index := map[string]int{}
	for i, r := range recs {
		index[r.RecordID] = i
		if r.Status != decision.Closed {
			continue
		}
		if _, twice := closedAt[r.Closes]; twice {
			t.Errorf("%s is closed twice", r.Closes)
		}
		closedAt[r.Closes] = i
	}
	var open []string
	last := ""
	for i, r := range recs {
		if r.Status == decision.Closed {
			if j, ok := index[r.Closes]; ok && j >= i {
				t.Errorf("CLOSED %s closes %s, which comes after it", r.RecordID, r.Closes)
			}
			continue
		}
		last = r.RecordID
		_, closed := closedAt[r.RecordID]
		switch r.Status {
		case decision.InFlight, decision.Deferred:
			if !closed {
				t.Errorf("%s %s is not closed though the run has ended", r.Status, r.RecordID)
			}
		default:
			if !closed {
				open = append(open, r.RecordID)
			}
		}
	}
	if len(open) != 1 || open[0] != terminal || last != terminal {
		t.Errorf("terminal records not closed = %v (latest %s), want exactly [%s]", open, last, terminal)
	}
}

// checkCheckpointRecords checks the recorded checkpoints of a long_running
// run against its records: in each Invoke or Resume, every checkpoint the
// run saved while active, after the one claiming the run, names a new
// IN_FLIGHT record that is stored, timestamped when the lease it carries
// was renewed; and every stored IN_FLIGHT record is named by one.
func checkCheckpointRecords(t *testing.T, saves *savesRecorder, recs []*decision.Record, ttl time.Duration) {
	t.Helper()
	byID := map[string]*decision.Record{}
	for _, r := range recs {
		byID[r.RecordID] = r
	}
	saves.mu.Lock()
	defer saves.mu.Unlock()
	named := map[string]bool{}
	for c, from := range saves.calls {
		to := len(saves.saves)
		if c+1 < len(saves.calls) {
			to = saves.calls[c+1]
		}
		prev := ""
		if from > 0 {
			prev = saves.saves[from-1].InFlight
		}
		for i := from; i < to; i++ {
			cp := saves.saves[i]
			if !cp.Active || i == from {
				prev = cp.InFlight
				continue
			}
			if cp.InFlight == prev && cp.Seq == saves.saves[i-1].Seq {
				// A renewal of the run's claim (half its lease had passed
				// on the clock): nothing recorded since the last save.
				continue
			}
			if cp.InFlight == "" || cp.InFlight == prev || named[cp.InFlight] {
				t.Errorf("checkpoint %d of call %d (active) names no new IN_FLIGHT record (%q)", i, c, cp.InFlight)
			}
			prev = cp.InFlight
			named[cp.InFlight] = true
			r := byID[cp.InFlight]
			if r == nil || r.Status != decision.InFlight {
				t.Errorf("checkpoint %d names %s, which is not a stored IN_FLIGHT record", i, cp.InFlight)
				continue
			}
			lease, err := time.Parse(time.RFC3339Nano, cp.LeaseUntil)
			if err != nil || lease.Add(-ttl).Truncate(time.Second).Format(time.RFC3339) != r.Timestamp {
				t.Errorf("checkpoint %d: lease_until %s is not its heartbeat (%s) plus %v", i, cp.LeaseUntil, r.Timestamp, ttl)
			}
		}
	}
	for _, r := range recs {
		if r.Status == decision.InFlight && !named[r.RecordID] {
			t.Errorf("IN_FLIGHT record %s belongs to no checkpoint", r.RecordID)
		}
	}
}

// The long_running invariant test: generated runs with random plans,
// pauses and approvals, clock jumps inside planner and tool calls and
// between resumes, cancellations, session limits and session extensions.
// After every run:
//
//   - every active checkpoint after a run's claim names its own stored
//     IN_FLIGHT record, whose heartbeat set the checkpoint's lease, and
//     every IN_FLIGHT record belongs to a checkpoint;
//   - once the run has ended: exactly one terminal record not closed, and
//     every IN_FLIGHT and DEFERRED record is followed by a CLOSED one;
//   - no tool call starts after max_session_duration_ms (the limit in
//     force) of injected-clock time since the run's start;
//   - a run that is not long_running writes no IN_FLIGHT record;
//   - the decision chain verifies, and every captured packet replays
//     equal (the harness's cleanup).
//
// A failing case is reproduced by its subtest name.
const longRunSeed = 0x15_10_26

type longScenario struct {
	Case      uint64     `json:"case"`
	Long      bool       `json:"long_running"`
	Amount    int        `json:"amount"`
	SessionMS int64      `json:"max_session_duration_ms"`
	Turns     []propTurn `json:"turns"`
	ToolJumps []int64    `json:"tool_jumps_ms"`    // per adapter call, in order; the last repeats
	PlanJumps []int64    `json:"planner_jumps_ms"` // per planner call
	PauseJump []int64    `json:"pause_jumps_ms"`   // before each resume
	Cancel    int        `json:"cancel_at_call"`   // the n-th adapter or planner call cancels (0: never)
	Extend    []bool     `json:"extend_session"`   // per resume of a stopped run
	Approvals []string   `json:"approvals"`
	Resumes   int        `json:"resumes"`
}

func genLongScenario(idx uint64) *longScenario {
	r := rand.New(rand.NewPCG(longRunSeed, idx))
	sc := &longScenario{Case: idx, Long: r.IntN(8) > 0}
	sc.Amount = pick(r, 1200, 4200, 4200)
	sc.SessionMS = pick(r, int64(0), int64(time.Hour/time.Millisecond), int64(10*time.Minute/time.Millisecond), int64(90*time.Second/time.Millisecond), int64(4*time.Hour/time.Millisecond))
	for i := range 1 + r.IntN(4) {
		k := weighted(r, map[string]int{"lookup": 4, "refund": 5, "lookup_refund": 3, "refund_step": 2, "decide": 3, "empty": 1})
		if i == 0 && r.IntN(2) == 0 {
			k = "lookup"
		}
		t := propTurn{Kind: k}
		if k != "lookup" && k != "empty" && k != "decide" {
			t.Amount = sc.Amount
		}
		if k == "decide" {
			t.Outcome = pick(r, "approved", "denied")
		}
		if k == "refund" || k == "lookup_refund" {
			t.Outcome = "approved"
		}
		sc.Turns = append(sc.Turns, t)
	}
	jump := func() int64 {
		return pick(r, int64(0), 0, 0, 1000, 60_000, 20*60_000, 2*3600_000, -30_000)
	}
	for range 1 + r.IntN(4) {
		sc.ToolJumps = append(sc.ToolJumps, jump())
	}
	for range 1 + r.IntN(3) {
		sc.PlanJumps = append(sc.PlanJumps, jump())
	}
	for range r.IntN(4) {
		sc.PauseJump = append(sc.PauseJump, pick(r, int64(0), 60_000, 3600_000, 5*3600_000))
	}
	if r.IntN(3) == 0 {
		sc.Cancel = 1 + r.IntN(6)
	}
	for range r.IntN(4) {
		sc.Extend = append(sc.Extend, r.IntN(2) == 0)
	}
	for range r.IntN(3) {
		sc.Approvals = append(sc.Approvals, weighted(r, map[string]int{"right": 4, "denied": 1, "wrong_role": 1}))
	}
	sc.Resumes = r.IntN(4)
	return sc
}

func TestLongRunningInvariants(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 40
	}
	var mu sync.Mutex
	stats := map[string]int{}
	t.Run("cases", func(t *testing.T) {
		for i := range n {
			sc := genLongScenario(uint64(i))
			t.Run(fmt.Sprintf("case_%04d", i), func(t *testing.T) {
				t.Parallel()
				st := runLongScenario(t, sc)
				mu.Lock()
				defer mu.Unlock()
				for k, v := range st {
					stats[k] += v
				}
				stats["cases"]++
			})
		}
	})
	t.Logf("%d cases: %v", n, stats)
	// The generator must reach what the invariants are about (checked
	// when every case ran).
	for _, k := range []string{"session_expired", "paused", "canceled", "in_flight", "extended", "DECIDED", "paused_again"} {
		if stats[k] == 0 && stats["cases"] == n {
			t.Errorf("no generated run reached %s: %v", k, stats)
		}
	}
}

func runLongScenario(t *testing.T, sc *longScenario) map[string]int {
	st := map[string]int{}
	fail := func(format string, args ...any) {
		t.Helper()
		b, _ := json.Marshal(sc)
		t.Fatalf("%s\nscenario (reproduce with -run 'TestLongRunningInvariants/cases/case_%04d$'): %s", fmt.Sprintf(format, args...), sc.Case, b)
	}
	clock := newFakeClock()
	start := clock.Now()
	var limit atomic.Int64 // the session limit in force, ms
	limit.Store(sc.SessionMS)
	if sc.SessionMS == 0 {
		limit.Store(runcontext.DefaultRunBudget().MaxSessionDurationMS)
	}
	tr := &trigger{}
	var calls atomic.Int64 // adapter and planner calls, for the cancellation
	hit := func() {
		if sc.Cancel > 0 {
			tr.hit(sc.Cancel)
		}
		calls.Add(1)
	}
	var toolCalls atomic.Int64
	var late sync.Map // tool calls started after the session
	tool := func(out map[string]any, mutations ...string) gateway.Adapter {
		return gateway.AdapterFunc(func(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
			n := toolCalls.Add(1) - 1
			if el := clock.Now().Sub(start); sc.Long && el > time.Duration(limit.Load())*time.Millisecond {
				late.Store(call.Envelope.ToolCallID, el)
			}
			clock.Advance(time.Duration(sc.ToolJumps[min(int(n), len(sc.ToolJumps)-1)]) * time.Millisecond)
			hit()
			return &gateway.Outcome{Output: out, Mutations: mutations}, nil
		})
	}
	var planCalls atomic.Int64
	turns := slices.Clone(sc.Turns)
	planner := contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
		n := planCalls.Add(1) - 1
		clock.Advance(time.Duration(sc.PlanJumps[min(int(n), len(sc.PlanJumps)-1)]) * time.Millisecond)
		hit()
		if req.Turn >= len(turns) {
			return nil, errors.New("out of scripted turns")
		}
		return turns[req.Turn].plan(), nil
	})
	saves := &savesRecorder{CheckpointStore: contextos.NewInMemoryCheckpoints()}
	var o contextostest.Options
	o.Now = clock.Now
	o.Runtime.Checkpoints = saves
	o.Runtime.Gateway.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	scope := map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}
	o.Runtime.Adapters = []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: tool(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}), Capabilities: map[string]gateway.Capability{"lookup": {}}},
		{AdapterID: "adp_policy", Adapter: tool(map[string]any{"eligible": true}), Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: tool(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9"), Capabilities: scope},
	}
	h := bareHarness(t, planner, &o)
	t.Cleanup(func() { h.ReplayAll() })
	req, rc := longRequest(t, sc.Amount, time.Duration(sc.SessionMS)*time.Millisecond)
	if !sc.Long {
		req.Mode = runcontext.ModeStream
	}

	call := func(what string, do func(ctx context.Context) (*contextos.Result, error)) *contextos.Result {
		t.Helper()
		c := newCancelCtx("cancel")
		tr.set(c)
		saves.begin()
		res, err := do(c)
		if err != nil || res == nil {
			fail("%s = %v, %v", what, res, err)
		}
		return res
	}
	res := call("Invoke", func(ctx context.Context) (*contextos.Result, error) { return h.Runtime.Invoke(ctx, req, rc) })
	pauses, resumes := 0, 0
	ctx := context.Background()
	for step := 0; step < 10; step++ {
		cp, err := loadState(ctx, saves, res.RunID)
		if err != nil {
			fail("load checkpoint: %v", err)
		}
		if strings.Contains(res.Record.Rationale.Summary, "session_expired") {
			st["session_expired"]++
		}
		if strings.Contains(res.Record.Rationale.Summary, "canceled") {
			st["canceled"]++
		}
		var in contextos.ResumeInput
		switch {
		case res.Status == decision.Deferred:
			st["paused"]++
			kind := "right"
			if pauses < len(sc.Approvals) {
				kind = sc.Approvals[pauses]
			}
			pauses++
			in.Approvals = []gateway.Approval{approvalFor(kind, res.Pending)}
		case !cp.Terminal && cp.Stopped != "" && resumes < sc.Resumes:
			if resumes < len(sc.Extend) && sc.Extend[resumes] {
				b := cp.Run.RunBudget
				b.MaxSessionDurationMS = limit.Load() + (6 * time.Hour).Milliseconds()
				limit.Store(b.MaxSessionDurationMS)
				in.Budget = &b
				st["extended"]++
			}
			resumes++
		default:
			step = 10
			continue
		}
		if i := pauses + resumes - 1; i < len(sc.PauseJump) {
			clock.Advance(time.Duration(sc.PauseJump[i]) * time.Millisecond)
		}
		next, err := func() (*contextos.Result, error) {
			c := newCancelCtx("cancel")
			tr.set(c)
			saves.begin()
			return h.Runtime.Resume(c, res.RunID, in)
		}()
		if errors.Is(err, contextos.ErrResumeInput) {
			st["refused_resume"]++
			break
		}
		if err != nil {
			fail("Resume: %v", err)
		}
		res = next
	}
	st[string(res.Status)]++
	if pauses > 1 {
		st["paused_again"]++
	}

	recs := runRecords(t, h, res.RunID)
	inFlight := 0
	for _, r := range recs {
		if r.Status == decision.InFlight {
			inFlight++
		}
	}
	st["in_flight"] += inFlight
	if !sc.Long && inFlight > 0 {
		fail("a %s run wrote %d IN_FLIGHT records", req.Mode, inFlight)
	}
	if sc.Long {
		checkCheckpointRecords(t, saves, recs, contextos.DefaultHeartbeatTTL)
	}
	if res.Status != decision.Deferred {
		assertClosedRecords(t, recs, res.Record.RecordID)
	}
	late.Range(func(id, el any) bool {
		fail("tool call %s started %v after the run's start, over max_session_duration_ms %d", id, el, limit.Load())
		return false
	})
	if err := h.Decisions.Verify(ctx); err != nil {
		fail("decision chain: %v", err)
	}
	if t.Failed() {
		fail("invariants broken")
	}
	return st
}
