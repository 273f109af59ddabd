package contextos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/runcontext"
)

// The "Budgets are exact" promise (docs/guarantees.md) over generated
// runs. Each run is generated from a seed: planner turns that report
// tokens and cost (some failing with a PlanUsageError that reports
// them), reads and writes whose attempts report cost and tokens (some
// failing, retryably or not), budgets small enough to be hit, pauses for
// the finance approval and their resumes, resumes of stopped runs with
// and without a larger budget, and deaths of the runtime working on the
// run at generated points followed by a takeover (ResumeInput.Takeover),
// itself perhaps dying and taken over in turn.
//
// A death is simulated as in the takeover tests: the dying runtime's
// goroutine freezes at the generated operation (inside a planner turn or
// a read, or at a checkpoint save or a decision append, before or after
// the store does it) and from then on every store, planner and adapter
// call it makes blocks; the clock is moved past its claim's lease and the
// run is taken over. Some deaths are between a retried read's attempts:
// at the first attempt after the first that the runtime starts, or at
// the first save of a read's spend before a retry. The dead are let go
// when the run is over and find every store refusing them. Writes are
// never where a runtime dies (nor the save between a write's attempts):
// the in-memory idempotency store holds a dead holder's claim for ever,
// as no claim TTL lets it go.
//
// The planner and the adapters count what they report, so the test knows
// the true usage. What must hold, on every result a live runtime returns
// and over the whole run:
//
//  1. the record's budget_usage counts at least every token and cent the
//     planner turns and the tool attempts reported, across all runtimes
//     that worked on the run, less, for each death, the usage of the
//     dead runtime's last planner turn and of the attempt in progress
//     (the docs' bound: "a runtime's death loses at most the usage of the
//     planner turn in progress, the spend of the tool attempt in
//     progress": an attempt is in progress from its start until the
//     runtime saved its spend before the next attempt, or recorded the
//     call's result), and never more than was reported (nothing is
//     charged twice); its tool_calls is the number of calls that reached
//     an adapter;
//  2. no planner turn or adapter attempt starts once the usage the run
//     must know of (as in 1) is over the run's total_tokens or
//     max_cost_cents, and no call starts past max_tool_calls; a result
//     whose record is over a budget is ESCALATED, and a resume without a
//     larger budget asks the planner nothing, runs no call and ends
//     ESCALATED again;
//  3. no idempotency key is paid (a refund performed) more than once;
//  4. the packet of each result replays equal, and every packet the run
//     saved does (the harness's ReplayAll).
//
// Each case is generated from a PCG source seeded with (budgetInvSeed,
// case index), so a failing case reruns by its name:
//
//	go test -run 'TestBudgetsExactGeneratedRuns/case_0042' .
//
// and its failure prints the generated scenario, the run's timeline and
// its records (CONTEXTOS_BUDGET_DEBUG=1 also logs each runtime's start and
// result). The default is budgetInvRuns cases (-short: fewer);
// CONTEXTOS_BUDGET_RUNS=n runs n. FuzzBudgetsExact explores other seeds.
const (
	budgetInvSeed = 0xb0d6_e7_2026
	budgetInvRuns = 40
)

func TestBudgetsExactGeneratedRuns(t *testing.T) {
	runBudgetCases(t, genBudgetScenario)
}

// TestBudgetsExactWhenFrozenRuntimesComeBack: the generated runs of
// TestBudgetsExactGeneratedRuns in which some runtimes freeze (slow, not
// dead; see budgetFreeze) — in a planner turn, in a read, in the refund's
// adapter before or after it pays, at a read's retry or at the save of
// its spend before it — are taken over, and come back: while the
// runtimes that took the run over work on it, or when the run is over.
// Besides what the budget invariant holds (the usage a frozen runtime's
// planner turn or attempt reports once it comes back is usage of the
// turn or attempt in progress at its freeze, which the run may lose),
// what must hold: a runtime that comes back starts no planner turn and
// no tool attempt, its Invoke or Resume returns ErrRunInProgress, and it
// writes no checkpoint, decision record or replay packet; the one write
// it may finish is the transcript entry of the call it was frozen in
// (docs/stores.md: a replica stalled in a tool call may finish that one
// write after a takeover), which the runtime that has the run then finds
// at its position (it stops, ErrRunInProgress, and the next takeover
// goes on from the transcript's end); the refund is paid at most once;
// the transcript verifies from genesis, and the packets replay equal.
//
//	go test -run 'TestBudgetsExactWhenFrozenRuntimesComeBack/cases/case_0042' .
func TestBudgetsExactWhenFrozenRuntimesComeBack(t *testing.T) {
	runBudgetCases(t, genFrozenBudgetScenario)
}

// TestBudgetsExactThroughCheckpointStoreOutages: the generated runs of
// TestBudgetsExactGeneratedRuns whose checkpoint store fails some saves
// (see budgetOutage): it refuses them, or keeps them and loses its
// answer (a commit whose reply was cut off), the load the runtime then
// makes to find its save failing too (Blind), and each planner call may
// take part of the claim's lease (Tick), so the claim is renewed at the
// run's takeover points and checks. A runtime may go on past a failed
// save or stop, with an error that wraps the store's failure
// (errors.Is): then the run is taken over once the lease lapses, as
// from a death. A stop that says the run was taken over
// (ErrRunInProgress) when nobody took it is a failure. Besides the
// budget invariant, whose bound on what a stop or death may lose grows
// with the spend a failed save left unsaved (budgetInc.mayLose), the
// refund is paid at most once and the packets replay equal.
//
//	go test -run 'TestBudgetsExactThroughCheckpointStoreOutages/cases/case_0042' .
func TestBudgetsExactThroughCheckpointStoreOutages(t *testing.T) {
	runBudgetCases(t, genOutageBudgetScenario)
}

// TestBudgetsExactWhenFrozenRuntimesComeBackThroughOutages: the frozen
// runtimes of TestBudgetsExactWhenFrozenRuntimesComeBack with the
// checkpoint store outages of TestBudgetsExactThroughCheckpointStoreOutages
// (before a runtime freezes: one frozen and back meets the store as it
// is), and its clock that moves with each planner call.
//
//	go test -run 'TestBudgetsExactWhenFrozenRuntimesComeBackThroughOutages/cases/case_0042' .
func TestBudgetsExactWhenFrozenRuntimesComeBackThroughOutages(t *testing.T) {
	runBudgetCases(t, func(seed, idx uint64) *budgetScenario {
		sc := genFrozenBudgetScenario(seed, idx)
		o := genOutageBudgetScenario(seed, idx)
		sc.Outages, sc.Tick = o.Outages, o.Tick
		return sc
	})
}

// runBudgetCases runs the generated cases of gen (see
// TestBudgetsExactGeneratedRuns for their number).
func runBudgetCases(t *testing.T, gen func(seed, idx uint64) *budgetScenario) {
	n := budgetInvRuns
	if testing.Short() {
		n = 15
	}
	if s := os.Getenv("CONTEXTOS_BUDGET_RUNS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("CONTEXTOS_BUDGET_RUNS=%q: want a count ≥ 1", s)
		}
		n = v
	}
	var mu sync.Mutex
	stats := map[string]int{}
	t.Run("cases", func(t *testing.T) {
		for i := range n {
			sc := gen(budgetInvSeed, uint64(i))
			t.Run(fmt.Sprintf("case_%04d", i), func(t *testing.T) {
				t.Parallel()
				st := runBudgetScenario(t, sc)
				mu.Lock()
				defer mu.Unlock()
				for k, v := range st {
					stats[k] += v
				}
			})
		}
	})
	t.Logf("%d generated runs: %v", n, stats)
}

func FuzzBudgetsExact(f *testing.F) {
	for i := range 4 {
		f.Add(uint64(budgetInvSeed), uint64(i))
	}
	f.Fuzz(func(t *testing.T, seed, idx uint64) {
		runBudgetScenario(t, genBudgetScenario(seed, idx))
	})
}

// Scenario.

// budgetTurn is what the planner's n-th call (over the whole run, all
// runtimes) does.
type budgetTurn struct {
	Lookup bool    `json:"lookup,omitempty"` // plan the reads again after turn 0 (or not at turn 0)
	Fail   bool    `json:"fail,omitempty"`   // fail with a PlanUsageError reporting the usage
	Tokens int     `json:"tokens"`
	Cents  float64 `json:"cents"`
}

// budgetAttempt is what a capability's n-th attempt does.
type budgetAttempt struct {
	Fail   string  `json:"fail,omitempty"` // "", "retryable", "fatal"
	Tokens int     `json:"tokens"`
	Cents  float64 `json:"cents"`
}

// budgetDeath is where the runtime of one Invoke or Resume dies: at its
// At-th dying point (from 1; 0: it does not die), after the store did
// the operation when After; or, with Retry, between a retried read's
// attempts: at the first attempt after a read's first that it starts
// ("attempt"), or at its first checkpoint save while a read is in
// progress ("save": the save of the attempts' spend before a retry).
type budgetDeath struct {
	At    int    `json:"at"`
	After bool   `json:"after,omitempty"`
	Retry string `json:"retry,omitempty"`
}

type budgetScenario struct {
	Seed   uint64                     `json:"seed"`
	Case   uint64                     `json:"case"`
	Amount int                        `json:"amount"`
	Budget [3]float64                 `json:"budget"` // total_tokens, max_cost_cents, max_tool_calls
	Turns  []budgetTurn               `json:"turns"`
	Steps  map[string][]budgetAttempt `json:"attempts"`
	// Deaths are the deaths of successive runtimes (Invoke, then each
	// Resume), past the list none.
	Deaths []budgetDeath `json:"deaths"`
	// Resumes are what successive stops that leave the run resumable
	// get: "" (none: the run is left stopped), "same" (a resume without
	// a larger budget) or "raise" (a larger one).
	Resumes []string `json:"resumes"`
	// Raise is what a larger budget adds (tokens, cents, calls).
	Raise [3]float64 `json:"raise"`
	// Freezes are where successive runtimes freeze (a runtime with a
	// freeze has no death), past the list none.
	Freezes []budgetFreeze `json:"freezes,omitempty"`
	// Outages are the checkpoint store's failures of successive
	// runtimes' saves, past the list none.
	Outages []budgetOutage `json:"outages,omitempty"`
	// Tick is the part of the claim's lease (DefaultHeartbeatTTL) each
	// planner call takes on the run's clock.
	Tick float64 `json:"tick,omitempty"`
}

// budgetOutage is how the checkpoint store fails the saves of one
// runtime: from its At-th save (from 1; 0: none) N saves in a row, each
// refused (errBudgetOutage, nothing saved) or, when Lost, kept and then
// failed (the answer lost).
type budgetOutage struct {
	At   int  `json:"at"`
	N    int  `json:"n,omitempty"`
	Lost bool `json:"lost,omitempty"`
	// Blind fails the runtime's first checkpoint load after each answer
	// the store lost (the store still unreachable when the runtime looks
	// for the save it sent).
	Blind bool `json:"blind,omitempty"`
}

// errBudgetOutage is the checkpoint store's failure in the outage cases.
var errBudgetOutage = errors.New("budget invariant: checkpoint store unreachable")

// budgetFreeze is where the runtime of one Invoke or Resume freezes
// (slow, not dead): at its N-th pass (from 1) of Where: "plan" (in a
// planner turn, before it reports), "read" (in a read's attempt, before
// it reports), "write" (in the refund's adapter, before it pays, or
// after when Paid), "attempt" (at a read's attempt after its first) or
// "save" (at the save of a read's spend before a retry). The run is
// taken over as from a dead runtime; the frozen one comes back once the
// runtimes working on the run after it have passed Wake dying points (0:
// when the run is over), or when one of them claims an idempotency key
// (the refund's, which a runtime frozen in the write holds), and goes
// on with the stores as they are.
type budgetFreeze struct {
	Where string `json:"where"`
	N     int    `json:"n"`
	Paid  bool   `json:"paid,omitempty"`
	Wake  int    `json:"wake,omitempty"`
}

func (sc *budgetScenario) String() string {
	b, _ := json.Marshal(sc)
	return string(b)
}

var budgetCaps = []string{"adp_orders.lookup", "adp_policy.eval", "adp_payments.issue_refund"}

func genBudgetScenario(seed, idx uint64) *budgetScenario {
	r := rand.New(rand.NewPCG(seed, idx))
	sc := &budgetScenario{Seed: seed, Case: idx, Steps: map[string][]budgetAttempt{}}
	sc.Amount = pick(r, 1200, 1200, 4200) // 4200 waits for the finance approval
	// total_tokens is at least the bucket allocations' sum (8,900).
	sc.Budget = [3]float64{float64(pick(r, 9000, 10000, 12000, 20000, 50000)), pick(r, 3.0, 8, 25, 60, 1000), float64(pick(r, 2, 3, 4, 6, 10))}
	for range 24 {
		t := budgetTurn{Lookup: r.IntN(10) < 3, Fail: r.IntN(8) == 0,
			Tokens: pick(r, 0, 0, 300, 900, 2500, 4000, 7000), Cents: pick(r, 0, 0, 0.25, 1, 2.5, 6, 15)}
		sc.Turns = append(sc.Turns, t)
	}
	for _, c := range budgetCaps {
		for range 16 {
			a := budgetAttempt{Fail: weighted(r, map[string]int{"": 7, "retryable": 2, "fatal": 1}),
				Tokens: pick(r, 0, 0, 0, 150, 600, 3000), Cents: pick(r, 0, 0, 0.5, 1.25, 4, 12)}
			sc.Steps[c] = append(sc.Steps[c], a)
		}
	}
	deaths := 0
	for range 8 {
		d := budgetDeath{}
		if deaths < 3 && r.IntN(100) < 45 {
			d = budgetDeath{At: 1 + r.IntN(7), After: r.IntN(2) == 0}
			deaths++
		}
		sc.Deaths = append(sc.Deaths, d)
	}
	for range 4 {
		sc.Resumes = append(sc.Resumes, weighted(r, map[string]int{"": 1, "same": 2, "raise": 3}))
	}
	sc.Raise = [3]float64{float64(pick(r, 2000, 6000, 20000)), pick(r, 5.0, 20, 100), float64(pick(r, 1, 2, 4))}
	// Deaths between a retried read's attempts, drawn last so the draws
	// above are the cases' as they were, in runtimes that do not die
	// otherwise.
	for i := range sc.Deaths {
		if kind := weighted(r, map[string]int{"": 3, "attempt": 1, "save": 1}); kind != "" && sc.Deaths[i].At == 0 {
			sc.Deaths[i] = budgetDeath{Retry: kind, After: r.IntN(2) == 0}
		}
	}
	return sc
}

// genFrozenBudgetScenario is genBudgetScenario's case with freezes,
// drawn from a source of their own: one or two runtimes freeze instead
// of dying, or not dying.
func genFrozenBudgetScenario(seed, idx uint64) *budgetScenario {
	sc := genBudgetScenario(seed, idx)
	r := rand.New(rand.NewPCG(seed^0xf7ee2e, idx))
	sc.Freezes = make([]budgetFreeze, len(sc.Deaths))
	n := 0
	for i := range sc.Freezes {
		if n < 2 && (r.IntN(100) < 35 || i == len(sc.Freezes)-1 && n == 0) {
			// The last runtime seldom runs: with none frozen so far, the
			// first one freezes.
			if i == len(sc.Freezes)-1 && n == 0 {
				i = 0
			}
			f := budgetFreeze{Where: weighted(r, map[string]int{"plan": 3, "read": 3, "write": 3, "attempt": 1, "save": 1}), N: 1, Wake: pick(r, 0, 0, 1, 2, 4)}
			switch f.Where {
			case "plan", "read":
				f.N = 1 + r.IntN(2)
			case "write":
				f.Paid = r.IntN(2) == 0
			}
			sc.Freezes[i], sc.Deaths[i] = f, budgetDeath{}
			n++
		}
	}
	return sc
}

// genOutageBudgetScenario is genBudgetScenario's case with checkpoint
// store outages and a clock that moves with each planner call, drawn
// from a source of their own.
func genOutageBudgetScenario(seed, idx uint64) *budgetScenario {
	sc := genBudgetScenario(seed, idx)
	r := rand.New(rand.NewPCG(seed^0x0a7a6e, idx))
	sc.Tick = pick(r, 0, 0.2, 0.3, 0.45)
	sc.Outages = make([]budgetOutage, len(sc.Deaths))
	for i := range sc.Outages {
		if r.IntN(100) < 55 {
			sc.Outages[i] = budgetOutage{At: 1 + r.IntN(6), N: 1 + r.IntN(2), Lost: r.IntN(2) == 0}
		}
	}
	// Drawn last, so the draws above are the cases' as they were.
	for i := range sc.Outages {
		sc.Outages[i].Blind = sc.Outages[i].Lost && r.IntN(2) == 0
	}
	return sc
}

// The run's world: what the planner and the adapters reported, and the
// runtimes that worked on the run.

type budgetIncKey struct{}

// budgetInc is one runtime's Invoke or Resume of the run.
type budgetInc struct {
	id     int
	budget runcontext.RunBudget
	death  budgetDeath
	dead   atomic.Bool
	points int           // dying points passed
	last   usageSum      // its last planner turn's reported usage
	cur    usageSum      // what its attempt in progress reported (see 1. above)
	inCall string        // the capability of its call in progress ("": none)
	idle   bool          // a resume without a larger budget of a run over it: nothing may start
	died   chan struct{} // closed when it dies (or freezes)

	freeze  budgetFreeze
	seen    int           // passes of its freeze's Where
	zombie  bool          // it froze: the run was taken from it (under the world's mu)
	woken   bool          // it was woken (under the world's mu)
	wakeAt  int           // the world's points at which it wakes (Wake ≠ 0)
	claimed bool          // a checkpoint save of its was taken (under the world's mu)
	wake    chan struct{} // closed to wake it
	done    chan struct{} // closed when its Invoke or Resume returned
	err     error         // what it returned (read after done)
	res     *contextos.Result

	outage budgetOutage
	saves  int  // checkpoint saves it asked for (under the world's mu)
	blind  bool // its next checkpoint load fails (outage.Blind; under the world's mu)
	// planOwed and callOwed are what its planner turns, and the attempts
	// of its call in progress, reported since its last checkpoint save
	// the store kept (and, for a call, since its result was recorded):
	// after a save the store failed, more than the last turn's and the
	// attempt in progress's may be unsaved (under the world's mu).
	planOwed, callOwed usageSum
}

// mayLose is what inc's death or stop may lose (under the world's mu):
// its last planner turn's usage and its attempt in progress's, or, when
// a failed save left more unsaved, that.
func (inc *budgetInc) mayLose() usageSum {
	return inc.last.max(inc.planOwed).add(inc.cur.max(inc.callOwed).tokens, inc.cur.max(inc.callOwed).cents)
}

type usageSum struct {
	tokens int
	cents  float64
}

func (u usageSum) add(t int, c float64) usageSum { return usageSum{u.tokens + t, u.cents + c} }

func (u usageSum) max(v usageSum) usageSum {
	return usageSum{max(u.tokens, v.tokens), max(u.cents, v.cents)}
}

// budgetEvent is one entry of the run's timeline.
type budgetEvent struct {
	inc    *budgetInc
	kind   string // "plan" or "call" (an attempt) started, "report", "death"
	what   string
	use    usageSum
	zombie bool // inc had frozen (the run was taken from it)
}

type budgetWorld struct {
	sc      *budgetScenario
	clock   *fakeClock
	release chan struct{} // closed when the run is over: the dead come back
	mu      sync.Mutex
	events  []budgetEvent
	plans   int
	tries   map[string]int
	paid    map[string]int // idempotency key → refunds performed
	calls   int            // calls that reached an adapter (first attempts)
	points  int            // dying points passed by runtimes not frozen
	zombies []*budgetInc   // the runtimes that froze
	// zombieWrites are the writes a runtime that froze made once back,
	// and the store took: "<runtime> <what>".
	zombieWrites []string
	fails        []string // what went wrong off the test's goroutine
}

// event appends an event of inc's (under w.mu). A report of a runtime
// that froze is usage of the turn or attempt in progress at its freeze:
// the run may lose it.
func (w *budgetWorld) event(e budgetEvent) {
	if e.inc != nil && e.inc.zombie {
		e.zombie = true
		if e.kind == "report" {
			w.events = append(w.events, e, budgetEvent{inc: e.inc, kind: "death", what: "reported once back: " + e.what, use: e.use, zombie: true})
			return
		}
	}
	w.events = append(w.events, e)
}

// freezing is passed at each point where inc may freeze (see
// budgetFreeze): a runtime that freezes here stops as a dying one does
// (its death may lose its last planner turn's usage and its attempt in
// progress's), the run is taken over, and it waits here until woken.
func (w *budgetWorld) freezing(inc *budgetInc, where string) {
	if inc == nil || inc.freeze.Where != where {
		return
	}
	w.mu.Lock()
	if inc.zombie {
		w.mu.Unlock()
		return
	}
	if inc.seen++; inc.seen != inc.freeze.N {
		w.mu.Unlock()
		return
	}
	inc.zombie = true
	inc.wakeAt = w.points + inc.freeze.Wake
	w.events = append(w.events, budgetEvent{inc: inc, kind: "death", what: "frozen at " + where, use: inc.mayLose()})
	w.zombies = append(w.zombies, inc)
	w.mu.Unlock()
	close(inc.died)
	<-inc.wake
}

// wakeZombies wakes the frozen runtimes due says are due, and waits
// until each has returned from its Invoke or Resume.
func (w *budgetWorld) wakeZombies(due func(z *budgetInc) bool) {
	w.mu.Lock()
	var wake []*budgetInc
	for _, z := range w.zombies {
		if !z.woken && due(z) {
			z.woken = true
			wake = append(wake, z)
		}
	}
	w.mu.Unlock()
	for _, z := range wake {
		close(z.wake)
		select {
		case <-z.done:
		case <-time.After(30 * time.Second):
			w.fail(fmt.Sprintf("runtime %d, frozen and woken, did not return", z.id))
		}
	}
}

func (w *budgetWorld) fail(s string) {
	w.mu.Lock()
	w.fails = append(w.fails, s)
	w.mu.Unlock()
}

// wrote notes a write of inc's the store took (err nil), when inc froze
// and came back.
func (w *budgetWorld) wrote(inc *budgetInc, what string, err error) {
	if inc == nil || err != nil {
		return
	}
	w.mu.Lock()
	if inc.zombie {
		w.zombieWrites = append(w.zombieWrites, fmt.Sprintf("%d %s", inc.id, what))
	}
	w.mu.Unlock()
}

// zombieWrote reports whether a runtime that froze wrote, once back.
func (w *budgetWorld) zombieWrote() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.zombieWrites) > 0
}

// zombie reports whether inc froze.
func (w *budgetWorld) zombie(inc *budgetInc) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return inc != nil && inc.zombie
}

func incOf(ctx context.Context) *budgetInc {
	inc, _ := ctx.Value(budgetIncKey{}).(*budgetInc)
	return inc
}

// dying is passed at each point where inc may die: it reports whether inc
// is dead (it died before, or dies here). A runtime that dies here dies
// after the store did the operation, when its death says so: after runs
// before the death is known. retry names the point when it is between a
// retried read's attempts ("attempt", "save"; see budgetDeath). The
// death may lose the usage of inc's last planner turn and of its attempt
// in progress.
func (w *budgetWorld) dying(inc *budgetInc, after func(), retry string) bool {
	if inc == nil {
		return false
	}
	w.mu.Lock()
	if inc.dead.Load() {
		w.mu.Unlock()
		return true
	}
	if !inc.zombie && inc.claimed {
		// A runtime frozen before wakes when those after it, once they
		// have the run (a checkpoint of theirs saved), have passed its
		// Wake points.
		w.points++
		w.mu.Unlock()
		w.wakeZombies(func(z *budgetInc) bool { return z != inc && z.freeze.Wake != 0 && w.points >= z.wakeAt })
		w.mu.Lock()
	}
	inc.points++
	if !(inc.death.At != 0 && inc.points == inc.death.At || inc.death.Retry != "" && inc.death.Retry == retry) {
		w.mu.Unlock()
		return false
	}
	inc.dead.Store(true)
	lost := inc.mayLose()
	w.events = append(w.events, budgetEvent{inc: inc, kind: "death", use: lost})
	w.mu.Unlock()
	if inc.death.After && after != nil {
		after()
	}
	close(inc.died)
	return true
}

// gone blocks a dead runtime until the run is over.
func (w *budgetWorld) gone() { <-w.release }

var errBudgetDead = errors.New("budget invariant: this runtime is dead")

// budgetPlanner plans by turn: the reads at turn 0, the refund (with the
// approved decision) after; the script may plan the reads again. Each
// call reports the script's usage, in its plan or its PlanUsageError.
type budgetPlanner struct{ w *budgetWorld }

func (p budgetPlanner) Plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	w, inc := p.w, incOf(ctx)
	if inc == nil || inc.dead.Load() {
		w.gone()
		return nil, errBudgetDead
	}
	w.mu.Lock()
	n := w.plans
	w.plans++
	w.event(budgetEvent{inc: inc, kind: "plan", what: fmt.Sprintf("planner call %d (turn %d)", n, req.Turn)})
	w.mu.Unlock()
	// A runtime that dies or freezes in a turn does so before the turn
	// reports.
	w.freezing(inc, "plan")
	if w.dying(inc, nil, "") {
		w.gone()
		return nil, errBudgetDead
	}
	t := budgetTurn{Tokens: 100}
	if n < len(w.sc.Turns) {
		t = w.sc.Turns[n]
	}
	u := contextos.PlanUsage{Tokens: t.Tokens, CostCents: t.Cents}
	w.mu.Lock()
	inc.last = usageSum{t.Tokens, t.Cents}
	inc.planOwed = inc.planOwed.add(t.Tokens, t.Cents)
	w.event(budgetEvent{inc: inc, kind: "report", what: fmt.Sprintf("planner call %d", n), use: inc.last})
	w.mu.Unlock()
	if w.sc.Tick > 0 {
		w.clock.Advance(time.Duration(w.sc.Tick * float64(contextos.DefaultHeartbeatTTL)))
	}
	if t.Fail {
		return nil, &contextos.PlanUsageError{Usage: u, Err: errors.New("the reply was cut off")}
	}
	plan := refundPlan(w.sc.Amount)
	if (req.Turn == 0) != t.Lookup {
		plan = lookupPlan()
	}
	plan.Usage = u
	return plan, nil
}

// budgetAdapter answers a capability's attempts as the script says, and
// counts what they report and the refunds performed.
type budgetAdapter struct {
	w   *budgetWorld
	cap string
}

func (a budgetAdapter) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	w, inc := a.w, incOf(ctx)
	write := a.cap == "adp_payments.issue_refund"
	if inc == nil || inc.dead.Load() {
		w.gone()
		return nil, gateway.NewToolError(gateway.CodeExecutionFailed, false, "dead", nil)
	}
	w.mu.Lock()
	n := w.tries[a.cap]
	w.tries[a.cap]++
	if call.Attempt == 1 {
		w.calls++
	}
	// The attempt in progress has reported nothing yet: the earlier
	// attempts' spend was saved before it started.
	inc.cur, inc.inCall = usageSum{}, a.cap
	w.event(budgetEvent{inc: inc, kind: "call", what: fmt.Sprintf("%s attempt %d (%s, the capability's attempt %d)", a.cap, call.Attempt, call.Envelope.ToolCallID, n)})
	w.mu.Unlock()
	// A runtime that freezes in a call does so before it reports (or,
	// in the write with Paid, after it paid).
	if write {
		if !inc.freeze.Paid {
			w.freezing(inc, "write")
		}
	} else {
		if call.Attempt > 1 {
			w.freezing(inc, "attempt")
		}
		w.freezing(inc, "read")
	}
	// A runtime that dies in a read dies before the read reports; a write
	// is never where a runtime dies (see the test's comment).
	retry := ""
	if call.Attempt > 1 {
		retry = "attempt"
	}
	if !write && w.dying(inc, nil, retry) {
		w.gone()
		return nil, gateway.NewToolError(gateway.CodeExecutionFailed, false, "dead", nil)
	}
	w.mu.Lock()
	st := budgetAttempt{}
	if s := w.sc.Steps[a.cap]; n < len(s) {
		st = s[n]
	}
	w.event(budgetEvent{inc: inc, kind: "report", what: a.cap, use: usageSum{st.Tokens, st.Cents}})
	inc.cur = usageSum{st.Tokens, st.Cents}
	inc.callOwed = inc.callOwed.add(st.Tokens, st.Cents)
	if write && st.Fail == "" {
		w.paid[call.IdempotencyKey]++
	}
	w.mu.Unlock()
	if write && inc.freeze.Paid {
		w.freezing(inc, "write")
	}
	spent := &gateway.Outcome{CostCents: st.Cents, Tokens: st.Tokens}
	switch st.Fail {
	case "retryable":
		return spent, gateway.NewToolError(gateway.CodeExecutionFailed, true, "try again", nil)
	case "fatal":
		return spent, gateway.NewToolError(gateway.CodeExecutionFailed, false, "exit 3", nil)
	}
	out := &gateway.Outcome{CostCents: st.Cents, Tokens: st.Tokens}
	switch a.cap {
	case "adp_orders.lookup":
		out.Output = map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}
	case "adp_policy.eval":
		out.Output = map[string]any{"eligible": true}
	default:
		out.Output, out.Mutations = map[string]any{"transaction_id": "txn_q9"}, []string{"refund:txn_q9"}
	}
	return out, nil
}

// The stores, as a dying runtime sees them.

type budgetCheckpoints struct {
	*contextos.InMemoryCheckpoints
	w *budgetWorld
}

func (s budgetCheckpoints) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	inc := incOf(ctx)
	if inc != nil && inc.dead.Load() {
		s.w.gone()
		return contextos.ErrCheckpointConflict
	}
	retry := ""
	if inc != nil {
		s.w.mu.Lock()
		in := inc.inCall
		s.w.mu.Unlock()
		switch {
		case in == "adp_payments.issue_refund":
			// The save between a write's attempts is not where a runtime
			// dies (see the test's comment).
			return s.save(ctx, inc, cp)
		case in != "":
			retry = "save"
			s.w.freezing(inc, "save")
		}
	}
	if s.w.dying(inc, func() { _ = s.InMemoryCheckpoints.Save(ctx, cp) }, retry) {
		s.w.gone()
		return contextos.ErrCheckpointConflict
	}
	return s.save(ctx, inc, cp)
}

func (s budgetCheckpoints) save(ctx context.Context, inc *budgetInc, cp *contextos.Checkpoint) error {
	fail, lost := false, false
	if inc != nil {
		s.w.mu.Lock()
		inc.saves++
		// A runtime frozen and back meets the store as it is (it cannot
		// know it was taken over from a store it cannot reach).
		if o := inc.outage; o.At != 0 && !inc.zombie && inc.saves >= o.At && inc.saves < o.At+o.N {
			fail, lost = true, o.Lost
		}
		s.w.mu.Unlock()
	}
	if fail && !lost {
		s.w.mu.Lock()
		s.w.event(budgetEvent{inc: inc, kind: "outage", what: fmt.Sprintf("checkpoint save %d refused", inc.saves)})
		s.w.mu.Unlock()
		return errBudgetOutage
	}
	err := s.InMemoryCheckpoints.Save(ctx, cp)
	s.w.wrote(inc, "checkpoint save", err)
	if inc != nil && err == nil {
		s.w.mu.Lock()
		inc.claimed = true
		// The save holds every charge of the run so far (a spend save,
		// the attempts' spend of the call in progress): none is owed.
		inc.planOwed, inc.callOwed = usageSum{}, usageSum{}
		if lost {
			s.w.event(budgetEvent{inc: inc, kind: "outage", what: fmt.Sprintf("checkpoint save %d kept, its answer lost", inc.saves)})
			inc.blind = inc.outage.Blind
		}
		s.w.mu.Unlock()
		if lost {
			return errBudgetOutage
		}
	}
	return err
}

func (s budgetCheckpoints) Load(ctx context.Context, runID string) (*contextos.Checkpoint, error) {
	if inc := incOf(ctx); inc != nil {
		s.w.mu.Lock()
		blind := inc.blind
		inc.blind = false
		if blind {
			s.w.event(budgetEvent{inc: inc, kind: "outage", what: "checkpoint load failed"})
		}
		s.w.mu.Unlock()
		if blind {
			return nil, errBudgetOutage
		}
	}
	return s.InMemoryCheckpoints.Load(ctx, runID)
}

type budgetDecisions struct {
	*decision.MemoryStore
	w *budgetWorld
}

func (s budgetDecisions) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	inc := incOf(ctx)
	if inc != nil && inc.dead.Load() {
		s.w.gone()
		return nil, errBudgetDead
	}
	if s.w.dying(inc, func() { _, _ = s.MemoryStore.Append(ctx, r) }, "") {
		s.w.gone()
		return nil, errBudgetDead
	}
	got, err := s.MemoryStore.Append(ctx, r)
	s.w.wrote(inc, "decision record "+string(r.Status), err)
	return got, err
}

// budgetIdempotency wakes the runtimes frozen in the refund's adapter
// (they hold its key) when another claims a key: that one would wait
// for them.
type budgetIdempotency struct {
	*gateway.MemoryIdempotency
	w *budgetWorld
}

func (s budgetIdempotency) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	if inc := incOf(ctx); inc != nil && !inc.dead.Load() && !s.w.zombie(inc) {
		s.w.wakeZombies(func(z *budgetInc) bool { return z != inc && z.freeze.Where == "write" })
	}
	return s.MemoryIdempotency.Claim(ctx, key)
}

type budgetTranscript struct {
	*gatewaytest.Recorder
	w *budgetWorld
}

func (s budgetTranscript) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	inc := incOf(ctx)
	if inc != nil && inc.dead.Load() {
		s.w.gone()
		return errBudgetDead
	}
	err := s.Recorder.Append(ctx, e)
	s.w.wrote(inc, "transcript "+e.Kind, err)
	if inc != nil && e.Kind == "result" && err == nil {
		// The call's result carries what all its attempts spent.
		s.w.mu.Lock()
		inc.cur, inc.inCall, inc.callOwed = usageSum{}, "", usageSum{}
		s.w.mu.Unlock()
	}
	return err
}

// invariantRegistrations registers each capability of caps
// ("adapter.name", as the support pack names them) with adapter(c), no
// wait between its attempts, and the refund's scope: the generated runs'
// tools (the budget and the leak invariants).
func invariantRegistrations(caps []string, adapter func(c string) gateway.Adapter) []gateway.Registration {
	regs := make([]gateway.Registration, 0, len(caps))
	for _, c := range caps {
		id, name, _ := strings.Cut(c, ".")
		capability := gateway.Capability{Backoff: func(string, int) time.Duration { return 0 }}
		if c == "adp_payments.issue_refund" {
			capability.Scopes = []string{"payments.refund"}
		}
		regs = append(regs, gateway.Registration{AdapterID: id, Adapter: adapter(c), Capabilities: map[string]gateway.Capability{name: capability}})
	}
	return regs
}

// runBudgetScenario drives one generated run to its end and checks it;
// it returns counts of what the run did.
func runBudgetScenario(t *testing.T, sc *budgetScenario) map[string]int {
	clock := newFakeClock()
	w := &budgetWorld{sc: sc, clock: clock, release: make(chan struct{}), tries: map[string]int{}, paid: map[string]int{}}
	stats := map[string]int{}
	ck := budgetCheckpoints{contextos.NewInMemoryCheckpoints(), w}
	ck.Now = clock.Now
	decs := budgetDecisions{decision.NewMemoryStore(), w}
	regs := invariantRegistrations(budgetCaps, func(c string) gateway.Adapter { return budgetAdapter{w, c} })
	var o contextostest.Options
	o.Now = clock.Now
	o.Runtime.Checkpoints, o.Runtime.Decisions, o.Runtime.Adapters = ck, decs, regs
	transcript := &gatewaytest.Recorder{}
	o.Runtime.Transcripts = budgetTranscript{transcript, w}
	o.Runtime.Gateway.Idempotency = budgetIdempotency{gateway.NewMemoryIdempotency(), w}
	h := bareHarness(t, budgetPlanner{w}, &o)
	t.Cleanup(func() { h.ReplayAll() })
	// The dead come back when the run is over (or the test stops) and
	// find every store refusing them; the test waits for them.
	var wg sync.WaitGroup
	var once sync.Once
	letGo := func() {
		once.Do(func() { close(w.release) })
		w.wakeZombies(func(*budgetInc) bool { return true })
		wg.Wait()
	}
	t.Cleanup(letGo)

	ctx := context.Background()
	req, rc := refundRequest(t, sc.Amount, true)
	rc.RunBudget.TotalTokens, rc.RunBudget.MaxCostCents, rc.RunBudget.MaxToolCalls = int(sc.Budget[0]), sc.Budget[1], int(sc.Budget[2])
	rc.RunBudget.WallClockMS = 3_600_000
	runID := rc.RunID

	var incs []*budgetInc
	type answer struct {
		res *contextos.Result
		err error
	}
	// start runs call as a new runtime's Invoke or Resume under budget,
	// and returns what it returned, or nil and false when it died.
	start := func(budget runcontext.RunBudget, idle bool, call func(ctx context.Context) (*contextos.Result, error)) (*contextos.Result, bool) {
		t.Helper()
		inc := &budgetInc{id: len(incs), budget: budget, idle: idle, died: make(chan struct{}), wake: make(chan struct{}), done: make(chan struct{})}
		if inc.id < len(sc.Deaths) {
			inc.death = sc.Deaths[inc.id]
		}
		if inc.id < len(sc.Freezes) {
			inc.freeze = sc.Freezes[inc.id]
		}
		if inc.id < len(sc.Outages) {
			inc.outage = sc.Outages[inc.id]
		}
		incs = append(incs, inc)
		if os.Getenv("CONTEXTOS_BUDGET_DEBUG") != "" {
			t.Logf("runtime %d starts (death %+v, idle %v, budget %d tokens %v cents %d calls)", inc.id, inc.death, idle, budget.TotalTokens, budget.MaxCostCents, budget.MaxToolCalls)
		}
		done := make(chan answer, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := call(context.WithValue(ctx, budgetIncKey{}, inc))
			inc.res, inc.err = res, err
			close(inc.done)
			done <- answer{res, err}
		}()
		select {
		case a := <-done:
			if a.err != nil && errors.Is(a.err, contextos.ErrRunInProgress) && w.zombieWrote() {
				// A frozen runtime, back, recorded at the position this
				// one was to record at: it stops as if it died there, and
				// the next takeover goes on from the transcript's end.
				w.mu.Lock()
				w.events = append(w.events, budgetEvent{inc: inc, kind: "death", what: "refused: " + a.err.Error(), use: inc.last.add(inc.cur.tokens, inc.cur.cents)})
				w.mu.Unlock()
				stats["refused_after_a_zombie_wrote"]++
				return nil, false
			}
			if a.err != nil && errors.Is(a.err, errBudgetOutage) && !errors.Is(a.err, contextos.ErrRunInProgress) {
				// The checkpoint store's failure stopped the runtime: the
				// run is taken over once its lease lapses, as from a death.
				w.mu.Lock()
				w.events = append(w.events, budgetEvent{inc: inc, kind: "death", what: "stopped: " + a.err.Error(), use: inc.mayLose()})
				w.mu.Unlock()
				stats["stopped_by_an_outage"]++
				return nil, false
			}
			if a.err != nil {
				w.mu.Lock()
				t.Logf("scenario: %s", sc)
				for i, e := range w.events {
					t.Logf("event %d: runtime %d %s %s %+v", i, e.inc.id, e.kind, e.what, e.use)
				}
				w.mu.Unlock()
				t.Fatalf("runtime %d: %v", inc.id, a.err)
			}
			return a.res, true
		case <-inc.died:
			if inc.freeze.Where != "" {
				stats["freezes_at_"+inc.freeze.Where]++
				return nil, false
			}
			stats["deaths"]++
			if inc.death.Retry != "" {
				stats["deaths_between_attempts_at_"+inc.death.Retry]++
			}
			return nil, false
		}
	}
	approve := func(p *gateway.ApprovalRequest) []gateway.Approval {
		if p == nil {
			return nil
		}
		return []gateway.Approval{contextostest.Approval(p, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, clock.Now())}
	}

	res, alive := start(rc.RunBudget, false, func(ctx context.Context) (*contextos.Result, error) { return h.Runtime.Invoke(ctx, req, rc) })
	resumes := 0
	var final *contextos.Result
	for range 40 {
		if !alive {
			// Let the dead runtime's claim lapse, and go on from what
			// the checkpoint holds.
			clock.Advance(contextos.DefaultHeartbeatTTL)
			st, err := loadState(ctx, ck.InMemoryCheckpoints, runID)
			if errors.Is(err, contextos.ErrNotFound) {
				// It died before its claim: the run never started.
				stats["invoked_again"]++
				res, alive = start(rc.RunBudget, false, func(ctx context.Context) (*contextos.Result, error) { return h.Runtime.Invoke(ctx, req, rc) })
				continue
			}
			if err != nil {
				t.Fatalf("%v", err)
			}
			if st.Terminal {
				stats["ended_by_the_dead"]++
				break
			}
			in := contextos.ResumeInput{Takeover: st.Active, Approvals: approve(st.Pending)}
			if os.Getenv("CONTEXTOS_BUDGET_DEBUG") != "" {
				t.Logf("after the death: active %v, pending %v, stopped %q, spent since point %+v", st.Active, st.Pending != nil, st.Stopped, st.SpentSincePoint)
			}
			if st.Active {
				stats["takeovers"]++
			}
			idle := incs[len(incs)-1].idle && st.Active
			res, alive = start(st.Run.RunBudget, idle, func(ctx context.Context) (*contextos.Result, error) { return h.Runtime.Resume(ctx, runID, in) })
			continue
		}
		budget := incs[len(incs)-1].budget
		if os.Getenv("CONTEXTOS_BUDGET_DEBUG") != "" {
			t.Logf("runtime %d: %s %s %+v", len(incs)-1, res.Status, res.Record.RecordID, res.Record.BudgetUsage)
		}
		checkBudgetResult(t, w, incs, res, budget)
		final = res
		st, err := loadState(ctx, ck.InMemoryCheckpoints, runID)
		if err != nil {
			t.Fatalf("%v", err)
		}
		if st.Terminal {
			break
		}
		if res.Status == decision.Deferred {
			stats["approvals"]++
			in := contextos.ResumeInput{Approvals: approve(res.Pending)}
			res, alive = start(st.Run.RunBudget, false, func(ctx context.Context) (*contextos.Result, error) { return h.Runtime.Resume(ctx, runID, in) })
			continue
		}
		if resumes >= len(sc.Resumes) || sc.Resumes[resumes] == "" {
			break
		}
		u := res.Record.BudgetUsage
		over := u.Tokens > budget.TotalTokens || u.CostUSDCents > budget.MaxCostCents
		in := contextos.ResumeInput{}
		next := st.Run.RunBudget
		if sc.Resumes[resumes] == "raise" {
			next.TotalTokens += int(sc.Raise[0])
			next.MaxCostCents += sc.Raise[1]
			next.MaxToolCalls += int(sc.Raise[2])
			in.Budget = &next
			stats["resumes_raised"]++
		} else {
			stats["resumes_same"]++
		}
		resumes++
		res, alive = start(next, over && in.Budget == nil, func(ctx context.Context) (*contextos.Result, error) { return h.Runtime.Resume(ctx, runID, in) })
	}
	// The run is over: the dead come back to stores that refuse them, and
	// the frozen to stores as they are.
	packets := len(h.PacketIDs())
	letGo()
	checkBudgetTimeline(t, w)
	chain := ""
	if recs, err := decs.MemoryStore.List(ctx, decision.Filter{RunID: runID}); err == nil && len(recs) > 0 {
		chain = recs[len(recs)-1].Lineage.ToolTranscriptChainHash
	}
	checkZombies(t, w, h, transcript, runID, chain, packets)
	for key, n := range w.paid {
		if n > 1 {
			t.Errorf("idempotency key %s paid %d times", key, n)
		}
	}
	if final != nil {
		if final.ReplayPacketID != "" {
			contextostest.AssertReplayEqual(t, h.Replay(final))
			if os.Getenv("CONTEXTOS_BUDGET_DEBUG") != "" {
				p, _ := h.Replays.Get(ctx, final.ReplayPacketID)
				for i, r := range p.Resumes {
					t.Logf("packet resume %d: budget %v takeover %+v", i, r.Budget != nil, r.Takeover)
				}
				for i, c := range p.Clock {
					t.Logf("packet clock %d: %s", i, c.Format("15:04:05"))
				}
			}
		}
		stats["runs_"+string(final.Status)]++
		if strings.Contains(final.Record.Rationale.Summary, "budget_exceeded") {
			stats["ended_over_a_budget"]++
		}
	}
	if t.Failed() {
		t.Logf("scenario: %s", sc)
		for i, e := range w.events {
			t.Logf("event %d: runtime %d %s %s %+v", i, e.inc.id, e.kind, e.what, e.use)
		}
		recs, _ := decs.MemoryStore.List(ctx, decision.Filter{RunID: runID})
		for _, r := range recs {
			t.Logf("record %s %s %+v %s", r.RecordID, r.Status, r.BudgetUsage, r.Rationale.Summary)
		}
	}
	stats["runs"]++
	stats["planner_calls"] += w.plans
	stats["calls"] += w.calls
	return stats
}

// checkZombies checks what the runtimes that froze did once back (see
// TestBudgetsExactWhenFrozenRuntimesComeBack), and that the run's
// transcript verifies and holds nothing past the chain hash the run's
// last record names (chain) but what they recorded; packets is the count
// of replay packets before the last of them came back.
func checkZombies(t *testing.T, w *budgetWorld, h *contextostest.Harness, transcript *gatewaytest.Recorder, runID, chain string, packets int) {
	t.Helper()
	for _, f := range w.fails {
		t.Error(f)
	}
	if len(w.zombies) == 0 {
		return
	}
	for _, z := range w.zombies {
		if !errors.Is(z.err, contextos.ErrRunInProgress) || z.res != nil {
			t.Errorf("runtime %d, frozen at %s and back after the takeover, returned %v and %v, want ErrRunInProgress", z.id, z.freeze.Where, z.res != nil, z.err)
		}
	}
	results := map[string]int{}
	for _, wr := range w.zombieWrites {
		id, what, _ := strings.Cut(wr, " ")
		if what != "transcript result" {
			t.Errorf("runtime %s, frozen and back after the takeover, wrote a %s", id, what)
		} else if results[id]++; results[id] > 1 {
			t.Errorf("runtime %s, frozen and back after the takeover, recorded more than the result of the call it was frozen in", id)
		}
	}
	if n := len(h.PacketIDs()); n != packets {
		t.Errorf("the frozen runtimes, back when the run was over, saved %d replay packets", n-packets)
	}
	entries, err := transcript.RunEntries(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gateway.VerifyTranscript(entries); err != nil {
		t.Errorf("the transcript does not verify from genesis: %v", err)
	}
	if chain == "" {
		return
	}
	at := slices.IndexFunc(entries, func(e gateway.TranscriptEntry) bool { return e.ChainHash == chain })
	if at < 0 && chain != gateway.GenesisHash {
		t.Errorf("the transcript does not hold the chain hash %s the run's last record names", chain)
	} else if past := len(entries) - 1 - at; past > len(results) {
		t.Errorf("the transcript holds %d entries past the run's last record", past)
	}
}

// reported sums what the planner and the adapters reported, and what
// the deaths so far may have lost, over events.
func reported(events []budgetEvent) (got, lost usageSum) {
	for _, e := range events {
		switch e.kind {
		case "report":
			got = got.add(e.use.tokens, e.use.cents)
		case "death":
			lost = lost.add(e.use.tokens, e.use.cents)
		}
	}
	return got, lost
}

const budgetCentsSlack = 1e-6

// checkBudgetResult checks a result a live runtime returned against what
// was reported so far (the dead are frozen: nothing more is).
func checkBudgetResult(t *testing.T, w *budgetWorld, incs []*budgetInc, res *contextos.Result, budget runcontext.RunBudget) {
	t.Helper()
	w.mu.Lock()
	got, lost := reported(w.events)
	calls := w.calls
	w.mu.Unlock()
	u := res.Record.BudgetUsage
	if u.Tokens < got.tokens-lost.tokens || u.CostUSDCents < got.cents-lost.cents-budgetCentsSlack {
		t.Errorf("%s record counts %d tokens and %v cents; reported %d and %v, of which the deaths may have lost at most %d and %v",
			res.Status, u.Tokens, u.CostUSDCents, got.tokens, got.cents, lost.tokens, lost.cents)
	}
	if u.Tokens > got.tokens || u.CostUSDCents > got.cents+budgetCentsSlack {
		t.Errorf("%s record counts %d tokens and %v cents, more than the %d and %v reported", res.Status, u.Tokens, u.CostUSDCents, got.tokens, got.cents)
	}
	if u.ToolCalls != calls {
		t.Errorf("%s record counts %d tool calls; %d reached an adapter", res.Status, u.ToolCalls, calls)
	}
	if over := u.Tokens > budget.TotalTokens || u.CostUSDCents > budget.MaxCostCents; over && res.Status != decision.Escalated {
		t.Errorf("a run over its budget (%d of %d tokens, %v of %v cents) ended %s", u.Tokens, budget.TotalTokens, u.CostUSDCents, budget.MaxCostCents, res.Status)
	}
	if last := incs[len(incs)-1]; last.idle && res.Status != decision.Escalated {
		t.Errorf("a resume without a larger budget of a run over it ended %s", res.Status)
	}
}

// checkBudgetTimeline checks that nothing started once the run was over
// a budget, as the runtime that started it had to know.
func checkBudgetTimeline(t *testing.T, w *budgetWorld) {
	t.Helper()
	var got, lost usageSum
	calls := 0
	for i, e := range w.events {
		switch e.kind {
		case "report":
			got = got.add(e.use.tokens, e.use.cents)
			continue
		case "death":
			lost = lost.add(e.use.tokens, e.use.cents)
			continue
		case "outage":
			continue
		}
		if e.zombie {
			t.Errorf("event %d: %s started by runtime %d, frozen and back after the takeover", i, e.what, e.inc.id)
			continue
		}
		b := e.inc.budget
		if e.inc.idle {
			t.Errorf("event %d: %s started in a resume without a larger budget of a run over it", i, e.what)
		}
		known := usageSum{got.tokens - lost.tokens, got.cents - lost.cents}
		if known.tokens > b.TotalTokens || known.cents > b.MaxCostCents+budgetCentsSlack {
			t.Errorf("event %d: %s started by runtime %d with the run at %d tokens and %v cents (at least), over its budget of %d and %v",
				i, e.what, e.inc.id, known.tokens, known.cents, b.TotalTokens, b.MaxCostCents)
		}
		if e.kind == "call" && strings.Contains(e.what, " attempt 1 ") {
			calls++
			if calls > b.MaxToolCalls {
				t.Errorf("event %d: %s is call %d, over max_tool_calls %d", i, e.what, calls, b.MaxToolCalls)
			}
		}
	}
}
