package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/server"
)

// pauseDoor is a pause hook (contextos.Options.OnPause) shared by the
// runtimes of two replicas: every run's first two pauses hand their
// pending approval to the test and wait until it opens the door, so the
// test decides whether the pausing worker is held (the pause saved and
// pending, the part still ending) while it acts. It counts every pause
// of every run.
type pauseDoor struct {
	mu    sync.Mutex
	runs  map[string]*pausedRun
	calls map[string]int
}

type pausedRun struct {
	entered [2]chan contextos.PendingApproval
	release [2]chan struct{}
	// by is the replica whose worker paused the run, by pause.
	by [2]int
}

func newPauseDoor() *pauseDoor {
	return &pauseDoor{runs: map[string]*pausedRun{}, calls: map[string]int{}}
}

func (d *pauseDoor) run(runID string) *pausedRun {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.runs[runID]
	if r == nil {
		r = &pausedRun{}
		for i := range r.entered {
			r.entered[i] = make(chan contextos.PendingApproval, 1)
			r.release[i] = make(chan struct{})
		}
		d.runs[runID] = r
	}
	return r
}

// hook is replica i's pause hook.
func (d *pauseDoor) hook(i int) func(context.Context, contextos.PendingApproval) {
	return func(_ context.Context, p contextos.PendingApproval) {
		d.mu.Lock()
		k := d.calls[p.RunID]
		d.calls[p.RunID]++
		d.mu.Unlock()
		if k >= 2 {
			return
		}
		r := d.run(p.RunID)
		d.mu.Lock()
		r.by[k] = i
		d.mu.Unlock()
		r.entered[k] <- p
		<-r.release[k]
	}
}

// pausedBy is the replica whose worker paused the run at pause k.
func (d *pauseDoor) pausedBy(r *pausedRun, k int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return r.by[k]
}

func (d *pauseDoor) pauses(runID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[runID]
}

// openAll lets every held worker go (a failed scenario must not keep a
// handler's Close waiting).
func (d *pauseDoor) openAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.runs {
		for _, c := range r.release {
			select {
			case <-c:
			default:
				close(c)
			}
		}
	}
}

// heldLister is a handler's PendingLister: the runtime's, as the default
// one, whose next listing for a sweep (of every tenant) can be held once
// armed: the sweep then goes on with what it listed after the run moved
// on.
type heldLister struct {
	rt    *contextos.Runtime
	runs  contextos.CheckpointLister
	armed atomic.Pointer[listHold]
}

type listHold struct {
	listed  chan struct{}
	release chan struct{}
}

func (l *heldLister) PendingApprovals(ctx context.Context, tenantID string) ([]contextos.PendingApproval, error) {
	if tenantID != "" {
		return l.rt.PendingApprovalsOf(ctx, l.runs, tenantID)
	}
	list, err := l.rt.PendingApprovals(ctx, l.runs)
	if h := l.armed.Swap(nil); h != nil {
		close(h.listed)
		<-h.release
	}
	return list, err
}

// pauseStep is what a scenario does around one pause of a run.
type pauseStep struct {
	hold  bool // the pausing worker is held while the test acts
	early bool // decided while it is held (hold) or just as it is let go
	on    int  // the replica the decision is posted to
	dup   bool // the same decision is posted to the other replica at once
	deny  bool
	sweep int // ≥ 0: a sweep on that replica (past the grace) while held, or racing the decision
	stale int // ≥ 0: a sweep on that replica lists the pause before the decision's part ends and goes on after it
	// linger (the first pause, held): the worker is held until the second
	// pause is decided; the other replica continues the run meanwhile.
	linger bool
}

func (s pauseStep) String() string {
	return fmt.Sprintf("{hold:%v early:%v on:%d dup:%v deny:%v sweep:%d stale:%d linger:%v}", s.hold, s.early, s.on, s.dup, s.deny, s.sweep, s.stale, s.linger)
}

func randomStep(r *rand.Rand) pauseStep {
	return pauseStep{hold: r.Intn(2) == 0, early: r.Intn(2) == 0, on: r.Intn(2), dup: r.Intn(4) == 0, deny: r.Intn(3) == 0,
		sweep: r.Intn(3) - 1, stale: r.Intn(3) - 1, linger: r.Intn(4) == 0}
}

// onceReplicas are two replicas (handlers over runtimes sharing every
// store) whose runs pause twice, with the pause door and held listers.
type onceReplicas struct {
	envs    [2]*env
	door    *pauseDoor
	listers [2]*heldLister
}

func newOnceReplicas(t *testing.T) *onceReplicas {
	o := &onceReplicas{door: newPauseDoor()}
	state := gateway.NewMemoryIdempotency()
	base := newEnv(t, nil)
	sh := &shared{h: base.harness, state: state, payments: base.payments, clock: base.clock}
	for i := range o.envs {
		l := &heldLister{}
		o.listers[i] = l
		o.envs[i] = newEnv(t, &envOptions{shared: sh, planner: refundThenAnother(), handler: server.Options{Pending: l},
			runtime: func(ro *contextos.Options) { ro.OnPause = o.door.hook(i) }})
		l.rt, l.runs = o.envs[i].harness.Runtime, base.harness.Checkpoints
	}
	t.Cleanup(o.door.openAll) // before the handlers close (cleanups run last first)
	return o
}

// scenario is one run's interleaving; it returns a violation, or nil.
type scenario struct {
	o       *onceReplicas
	r       *rand.Rand
	runID   string
	starter int
	steps   [2]pauseStep
	// accepted are the approval ids of the accepted decisions, by pause.
	accepted [2]string
	sweeps   sync.WaitGroup
	// lingering lets go the first pause's worker held past it, on
	// replica lingerOn.
	lingering func()
	lingerOn  int
}

var errScenario = errors.New("violation")

func (s *scenario) fail(format string, args ...any) error {
	return fmt.Errorf("%w: run %s: %s", errScenario, s.runID, fmt.Sprintf(format, args...))
}

// sweep advances the clock past the sweep's grace and sweeps replica i.
func (s *scenario) sweep(i int) {
	e := s.o.envs[i]
	e.clock.Advance(6 * time.Second)
	e.handler.SweepNow(context.Background())
}

// staleSweep starts a sweep on replica i whose listing is held: it
// returns once the sweep listed the pending approvals, and go lets it
// go on.
func (s *scenario) staleSweep(i int) (goOn func()) {
	s.o.envs[i].clock.Advance(6 * time.Second)
	h := &listHold{listed: make(chan struct{}), release: make(chan struct{})}
	s.o.listers[i].armed.Store(h)
	s.sweeps.Add(1)
	go func() {
		defer s.sweeps.Done()
		s.o.envs[i].handler.SweepNow(context.Background())
	}()
	<-h.listed
	return func() { close(h.release) }
}

// decide posts the decision of step on pause p (and, for dup, the same on
// the other replica at once): exactly one is accepted.
func (s *scenario) decide(k int, p contextos.PendingApproval) error {
	st := s.steps[k]
	verdict := server.DecisionApprove
	if st.deny {
		verdict = server.DecisionDeny
	}
	b, _ := json.Marshal(map[string]string{"decision": verdict, "action_digest": p.ActionDigest})
	path := "/v1/runs/" + s.runID + "/approvals/" + p.GateID
	posts := []int{st.on}
	if st.dup {
		posts = append(posts, 1-st.on)
	}
	answers := make([]response, len(posts))
	var wg sync.WaitGroup
	for j, i := range posts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := s.o.envs[i]
			w := lead
			if j == 1 {
				w = lead2
			}
			answers[j] = e.do("POST", path, e.token(w), b)
		}()
	}
	wg.Wait()
	n := 0
	for _, a := range answers {
		switch a.status {
		case http.StatusAccepted:
			n++
			var m struct {
				ApprovalID string `json:"approval_id"`
			}
			_ = json.Unmarshal(a.body, &m)
			s.accepted[k] = m.ApprovalID
		case http.StatusConflict:
			// The duplicate lost: already decided, or, when the run was
			// past the pause and not yet paused again as it was
			// answered, not pending (the handler answers by the run's
			// last pause, and the duplicate names the pause's digest).
			if !strings.Contains(string(a.body), server.CodeAlreadyDecided) && !(len(posts) > 1 && strings.Contains(string(a.body), server.CodeNotPending)) {
				return s.fail("pause %d: a decision answered %d %s", k+1, a.status, a.body)
			}
		default:
			return s.fail("pause %d: a decision answered %d %s", k+1, a.status, a.body)
		}
	}
	if n != 1 {
		return s.fail("pause %d: %d decisions accepted of %d posted", k+1, n, len(posts))
	}
	return nil
}

// movedOn waits until the run no longer awaits pause p: it awaits
// another or ended.
func (s *scenario) movedOn(p contextos.PendingApproval) error {
	rt := s.o.envs[0].harness.Runtime
	deadline := time.Now().Add(10 * time.Second)
	for {
		pend, err := rt.PendingApprovals(context.Background(), contextos.RunList{s.runID})
		if err != nil {
			return err
		}
		if len(pend) == 1 && pend[0].RecordID != p.RecordID {
			return nil
		}
		recs, err := s.o.envs[0].harness.Decisions.List(context.Background(), decision.Filter{RunID: s.runID})
		if err != nil {
			return err
		}
		if len(recs) > 0 && recs[len(recs)-1].Status != decision.Deferred && recs[len(recs)-1].Status != decision.InFlight {
			return nil
		}
		if time.Now().After(deadline) {
			return s.fail("the run did not go past its pause %s (decided: %v)", p.RecordID, s.accepted)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// pause plays step k on the run's pause k.
func (s *scenario) pause(k int) error {
	st := s.steps[k]
	door := s.o.door.run(s.runID)
	var p contextos.PendingApproval
	select {
	case p = <-door.entered[k]:
	case <-time.After(10 * time.Second):
		return s.fail("pause %d was not reached (pauses so far: %d)", k+1, s.o.door.pauses(s.runID))
	}
	// A sweep held after its listing goes on once the run moved past
	// the pause (or the scenario failed): with the listing it took
	// before, of a pause decided and continued since.
	var stale func()
	defer func() {
		if stale != nil {
			stale()
		}
	}()
	released := false
	release := func() {
		if !released {
			released = true
			close(door.release[k])
		}
	}
	defer release()
	decided := false
	if st.hold {
		// The pausing worker is held: its part is still ending.
		if st.stale >= 0 && st.early {
			stale = s.staleSweep(st.stale)
		}
		if st.early {
			if err := s.decide(k, p); err != nil {
				return err
			}
			decided = true
		}
		if st.sweep >= 0 {
			s.sweep(st.sweep)
		}
		if st.stale >= 0 && !st.early {
			stale = s.staleSweep(st.stale)
		}
		if k == 0 && st.linger {
			// The worker stays held, its part ending at this pause, past
			// it: the other replica's sweep continues the run with the
			// decision (parked here when it was posted here).
			if !decided {
				if err := s.decide(k, p); err != nil {
					return err
				}
			}
			s.lingerOn = s.o.door.pausedBy(door, k)
			s.sweep(1 - s.lingerOn)
			released = true
			s.lingering = func() { close(door.release[k]) }
			return s.movedOn(p)
		}
		release()
	} else {
		release()
		if st.early {
			// The decision races the end of the pausing part.
			runtimeYield(s.r)
		} else if err := s.waitIdle(); err != nil {
			return err
		}
		if st.stale >= 0 {
			stale = s.staleSweep(st.stale)
		}
	}
	// The first pause's worker, held past it, lets go before or after
	// this pause is decided (its part ends at the first pause, this
	// pause's decision parked there or not).
	if s.lingering != nil && s.r.Intn(2) == 0 {
		s.letGo()
	}
	if !decided {
		if st.sweep >= 0 && !st.hold {
			s.sweeps.Add(1)
			go func() { defer s.sweeps.Done(); s.sweep(st.sweep) }()
		}
		if err := s.decide(k, p); err != nil {
			return err
		}
	}
	s.letGo()
	return s.movedOn(p)
}

// letGo lets the lingering worker go.
func (s *scenario) letGo() {
	if s.lingering != nil {
		s.lingering()
		s.lingering = nil
	}
}

// runtimeYield lets the other goroutines run a little, a random while.
func runtimeYield(r *rand.Rand) {
	if n := r.Intn(3); n > 0 {
		time.Sleep(time.Duration(n) * 200 * time.Microsecond)
	}
}

// waitIdle waits until no replica runs a part of the run (a stale view is
// fine: the run is paused or past it on every one), but the lingering
// worker's.
func (s *scenario) waitIdle() error {
	for i, e := range s.o.envs {
		if s.lingering != nil && i == s.lingerOn {
			continue
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := e.do("GET", "/v1/runs/"+s.runID, e.token(agent), nil)
			var m struct {
				State string `json:"state"`
			}
			_ = json.Unmarshal(r.body, &m)
			if r.status == http.StatusOK && m.State != server.StateRunning {
				break
			}
			if time.Now().After(deadline) {
				return s.fail("a replica still runs the run: %d %s", r.status, r.body)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	return nil
}

// play runs the scenario and checks the run: each pause decided once and
// continued once (its call ran once when approved, not at all when
// denied; the record holds each decision once), two pauses, one end, no
// run left paused with a decision.
func (s *scenario) play(t *testing.T, id string) error {
	e := s.o.envs[s.starter]
	body := refundBody(t, "req_once_"+id, 4200)
	r := e.do("POST", "/v1/runs", e.token(agent), body, "Prefer", "respond-async")
	if r.status != http.StatusAccepted {
		return fmt.Errorf("%w: POST /v1/runs: %d %s", errScenario, r.status, r.body)
	}
	s.runID = r.json(t)["run_id"].(string)
	defer s.letGo()
	for k := range s.steps {
		if err := s.pause(k); err != nil {
			s.sweeps.Wait()
			return err
		}
	}
	s.sweeps.Wait()
	s.letGo()
	if err := s.waitIdle(); err != nil {
		return err
	}
	return s.check()
}

func (s *scenario) check() error {
	ctx := context.Background()
	recs, err := s.o.envs[0].harness.Decisions.List(ctx, decision.Filter{RunID: s.runID})
	if err != nil {
		return err
	}
	var deferred []*decision.Record
	var ends []*decision.Record
	for _, rec := range recs {
		switch rec.Status {
		case decision.Deferred:
			deferred = append(deferred, rec)
		case decision.InFlight, decision.Closed:
		default:
			ends = append(ends, rec)
		}
	}
	statuses := func() string {
		var out []string
		for _, r := range recs {
			out = append(out, string(r.Status))
		}
		return strings.Join(out, ",")
	}
	if len(deferred) != 2 || len(ends) != 1 {
		pend, _ := s.o.envs[0].harness.Runtime.PendingApprovals(ctx, contextos.RunList{s.runID})
		return s.fail("records %s (want two pauses, one end); pending %d", statuses(), len(pend))
	}
	if n := s.o.door.pauses(s.runID); n != 2 {
		return s.fail("the run paused %d times, want 2", n)
	}
	// Each decision is in the end's record once, on its own call (in
	// any order).
	var got []string
	for _, a := range ends[0].Approvals {
		got = append(got, fmt.Sprintf("%s/%s/%s", a.ApprovalID, a.ToolCallID, a.Decision))
	}
	var want []string
	for k, d := range deferred {
		verdict := ""
		if s.steps[k].deny {
			verdict = string(decision.ApprovalDenied)
		}
		want = append(want, fmt.Sprintf("%s/%s/%s", s.accepted[k], d.Awaiting.ToolCallID, verdict))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return s.fail("the record's approvals are %v, want %v", got, want)
	}
	// The gated calls ran once each when approved, never when denied.
	keys, _ := s.o.envs[0].payments.Counts()
	runs := s.o.envs[0].payments.Runs()
	calls := 0
	perKey := map[string]int{}
	for _, k := range keys {
		if runs[k] == s.runID {
			calls++
			perKey[k]++
		}
	}
	approved := 0
	for _, st := range s.steps {
		if !st.deny {
			approved++
		}
	}
	if calls != approved || len(perKey) != approved {
		return s.fail("payments got %d requests under %d keys; want one for each of the %d approved calls", calls, len(perKey), approved)
	}
	return nil
}

// Every decision on a paused run is continued exactly once, however it
// is taken up: by the worker whose part is still ending at the pause, by
// the handler that recorded it, by a sweep (one listing before the run
// moved on among them), on either of two replicas over shared stores.
// Each scenario is generated from a seed (CONTEXTOS_ONCE_SEED replays
// one); a failure prints it.
func TestEveryDecisionIsContinuedOnce(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	seed := time.Now().UnixNano()
	if v := os.Getenv("CONTEXTOS_ONCE_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	scenarios := 40
	if testing.Short() {
		scenarios = 10
	}
	o := newOnceReplicas(t)
	rng := rand.New(rand.NewSource(seed))
	for n := range scenarios {
		s := &scenario{o: o, r: rng, starter: rng.Intn(2), steps: [2]pauseStep{randomStep(rng), randomStep(rng)}}
		if err := s.play(t, fmt.Sprintf("%d_%d", seed, n)); err != nil {
			t.Fatalf("seed %d (CONTEXTOS_ONCE_SEED=%d), scenario %d, started on %d, steps %v: %v", seed, seed, n, s.starter, s.steps, err)
		}
	}
}

// heldSegments is a handler's state store whose next read of a run
// segment's events, once armed, waits until it is let go: it holds a
// replica seeding a run it continues (its entry running, its part not
// started).
type heldSegments struct {
	gateway.IdempotencyStore
	armed atomic.Pointer[listHold]
}

func (s *heldSegments) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	if strings.HasPrefix(key, "contextos-server/v1/events/") {
		if h := s.armed.Swap(nil); h != nil {
			close(h.listed)
			<-h.release
		}
	}
	return s.IdempotencyStore.Claim(ctx, key)
}

// A sweep that listed a pause before its decision was continued, and
// goes on once the run paused again, does not continue the run with
// that decision: the run awaits its next pause still, and the decision
// on it is taken up (here by the worker that recorded it while the
// sweep's refused part was running: parked, it is not dropped when that
// part fails). Before, the stale decision was handed to the next pause
// (the gateway blocked the 4200 refund as an approval of another
// action, and its approver got 409).
func TestAStaleSweepDecidesNotTheNextPause(t *testing.T) {
	for _, parked := range []bool{false, true} {
		t.Run(fmt.Sprintf("parked=%v", parked), func(t *testing.T) {
			state := gateway.NewMemoryIdempotency()
			base := newEnv(t, nil)
			sh := &shared{h: base.harness, state: state, payments: base.payments, clock: base.clock}
			a := newEnv(t, &envOptions{shared: sh, planner: refundThenAnother()})
			l, segs := &heldLister{}, &heldSegments{}
			b := newEnv(t, &envOptions{shared: sh, planner: refundThenAnother(), handler: server.Options{Pending: l},
				state: func(s gateway.IdempotencyStore) gateway.IdempotencyStore { segs.IdempotencyStore = s; return segs }})
			l.rt, l.runs = b.harness.Runtime, base.harness.Checkpoints
			runID := a.startPaused("req_stale_sweep_" + strconv.FormatBool(parked))
			first := a.pendingDigests(lead)
			if len(first) != 1 {
				t.Fatalf("pending: %v", first)
			}
			// b's sweep lists the first pause, and waits.
			listing := &listHold{listed: make(chan struct{}), release: make(chan struct{})}
			l.armed.Store(listing)
			swept := make(chan struct{})
			go func() { defer close(swept); b.handler.SweepNow(context.Background()) }()
			<-listing.listed
			if r := a.decide(runID, lead2, server.DecisionApprove, ""); r.status != http.StatusAccepted {
				t.Fatalf("the 2100 refund's approval: %d %s", r.status, r.body)
			}
			var second []string
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
				if second = a.pendingDigests(lead); len(second) == 1 && second[0] != first[0] {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run did not pause on the 4200 refund: %v", second)
				}
			}
			a.clock.Advance(time.Minute) // the first decision is past the sweep's grace
			seeding := &listHold{listed: make(chan struct{}), release: make(chan struct{})}
			if parked {
				segs.armed.Store(seeding)
			}
			close(listing.release)
			b4200, _ := json.Marshal(map[string]string{"decision": server.DecisionApprove, "action_digest": second[0]})
			if parked {
				// b continues the run with the first decision (its entry
				// running, seeding): the second decision, posted to b, is
				// parked behind that part, which the runtime refuses.
				<-seeding.listed
				if r := b.do("POST", "/v1/runs/"+runID+"/approvals/GATE_FINANCE_APPROVAL", b.token(lead), b4200); r.status != http.StatusAccepted {
					t.Fatalf("the 4200 refund's approval through b: %d %s", r.status, r.body)
				}
				close(seeding.release)
				<-swept
			} else {
				<-swept
				if err := (&scenario{o: &onceReplicas{envs: [2]*env{a, b}}, runID: runID}).waitIdle(); err != nil {
					t.Fatal(err)
				}
				if got := a.pendingDigests(lead); len(got) != 1 || got[0] != second[0] {
					t.Fatalf("after the stale sweep the run awaits %v; want the 4200 refund's pause (%s)", got, second[0])
				}
				if r := a.do("POST", "/v1/runs/"+runID+"/approvals/GATE_FINANCE_APPROVAL", a.token(lead), b4200); r.status != http.StatusAccepted {
					t.Fatalf("the 4200 refund's approval: %d %s", r.status, r.body)
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				m := b.do("GET", "/v1/runs/"+runID, b.token(agent), nil).json(t)
				if m["state"] == server.StateEnded {
					if m["status"] != "DECIDED" || len(m["decision_record"].(map[string]any)["approvals"].([]any)) != 2 {
						t.Fatalf("the run ended %v with approvals %v", m["status"], m["decision_record"].(map[string]any)["approvals"])
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run did not go on with its decided pause: %v %v", m["state"], m["status"])
				}
				time.Sleep(5 * time.Millisecond)
			}
			keys, effects := a.payments.Counts()
			if len(keys) != 2 || len(effects) != 2 {
				t.Errorf("payments got %d requests, %d effects; want 2 each (the 2100 and 4200 refunds)", len(keys), len(effects))
			}
		})
	}
}

// Two decisions parked behind one part are both kept: replica a's worker
// is held ending its part at the first pause, which is decided on a
// (parked); b's sweep continues the run with that decision to its second
// pause, which is decided on a too while a's part still ends. When a's
// part ends at the first pause, the second decision is the one the run
// awaits, and a continues it. Before, the second decision replaced the
// first, was dropped (a's part did not end at its pause), and the run
// stayed paused with its decision made.
func TestTwoDecisionsParkedBehindOnePart(t *testing.T) {
	o := newOnceReplicas(t)
	a, b := o.envs[0], o.envs[1]
	r := a.do("POST", "/v1/runs", a.token(agent), refundBody(t, "req_two_parked", 4200), "Prefer", "respond-async")
	if r.status != http.StatusAccepted {
		t.Fatalf("POST /v1/runs: %d %s", r.status, r.body)
	}
	s := &scenario{o: o, runID: r.json(t)["run_id"].(string), steps: [2]pauseStep{{on: 0}, {on: 0}}}
	door := o.door.run(s.runID)
	first := <-door.entered[0] // a's worker, held
	if err := s.decide(0, first); err != nil {
		t.Fatal(err)
	}
	a.clock.Advance(time.Minute)
	b.handler.SweepNow(context.Background())
	second := <-door.entered[1] // b's worker, at the second pause
	close(door.release[1])
	if err := s.movedOn(first); err != nil {
		t.Fatal(err)
	}
	if err := s.decide(1, second); err != nil {
		t.Fatal(err)
	}
	close(door.release[0])
	if err := s.movedOn(second); err != nil {
		t.Fatal(err)
	}
	if err := s.waitIdle(); err != nil {
		t.Fatal(err)
	}
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
}
