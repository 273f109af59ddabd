package contextos_test

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/deepcheck"
	"github.com/contextos/contextos/replay"
)

// The places outside code is handed a value by a run, or hands one
// over, where the property test's vandals may edit it.
const (
	atPlannerRequest = "planner: the plan request (compiled context, request, run context, results, tools, decisions)"
	atPlannerPlan    = "planner: the plans it returned"
	atCriticInput    = "host critic: its input"
	atStreamEvent    = "Stream consumer: the events"
	atAdapterCall    = "adapter: the call (envelope, arguments, delegation)"
	atAdapterOutcome = "adapter: the outcomes it returned"
	atIdempotency    = "idempotency store: the results it was given or returned"
	atTranscript     = "transcript store: the entries it was given or returned"
	atCheckpoints    = "checkpoint store: the checkpoints it was given or returned"
	atPackets        = "packet store: the packets it was given or returned"
	atDecisions      = "decision store: the records it was given or returned"
	atOnPause        = "OnPause: the pending approval"
	atCallerResult   = "caller: the results Invoke, Resume and Stream returned"
	atCallerInput    = "caller: the request, run context and resume input it handed over"
	atCallerReplay   = "caller: the packets it replayed and the reports"
	atCallerPendings = "caller: the pending approvals listed"
)

var outsidePoints = []string{atPlannerRequest, atPlannerPlan, atCriticInput, atStreamEvent, atAdapterCall, atAdapterOutcome,
	atIdempotency, atTranscript, atCheckpoints, atPackets, atDecisions, atOnPause, atCallerResult, atCallerInput, atCallerReplay,
	atCallerPendings}

// vandals edit, in place and as hostile outside code might, what the
// plug-in points they are set at are handed or hand over: each value at
// once (on receipt), or kept and edited later (at a later hand-over: the
// next tool call, planner turn or verdict, after Invoke returns), or
// both, as their seeded source decides. An edit appends into every list
// past its length (deepcheck.Overrun: a list that shares its room with
// another party's is caught) and edits everything (deepcheck.Vandalize).
// Vandals set at no point edit nothing: they are the plain play.
type vandals struct {
	mu   sync.Mutex
	rng  *rand.Rand
	at   map[string]bool
	kept []reflect.Value
	log  []string
	// hold is set while a replay the caller asked for runs: the caller
	// and the stores edit nothing they kept until it returns (a value
	// edited while the call it was handed to runs is a race no copy on
	// return can undo).
	hold bool
}

// handed is told of a value (a pointer, list or map) outside code at
// point is handed, or hands over and may still reach. A value the run
// has not used yet when it is handed (one outside code returns) is only
// kept: edit names whether an edit now is an edit on receipt.
func (v *vandals) handed(point string, x any, now bool) {
	if v == nil || !v.at[point] {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	rv := reflect.ValueOf(x)
	switch mode := v.rng.Intn(3); {
	case now && mode != 1:
		v.log = append(v.log, fmt.Sprintf("edit now  %T at %s", x, point))
		deepcheck.Overrun(rv)
		deepcheck.Vandalize(rv)
		if mode == 0 {
			return
		}
		fallthrough
	default:
		v.kept = append(v.kept, rv)
	}
}

// later edits, or not (as the seeded source decides), every value kept
// so far; where names the moment.
func (v *vandals) later(where string) {
	if v == nil || len(v.at) == 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.hold || len(v.kept) == 0 || v.rng.Intn(3) == 0 {
		return
	}
	v.log = append(v.log, fmt.Sprintf("edit the %d kept %s", len(v.kept), where))
	for _, rv := range v.kept {
		deepcheck.Overrun(rv)
		deepcheck.Vandalize(rv)
	}
}

// deepCopy returns a copy of x that shares no list, map or pointer
// with it (unexported members are copied as they are).
func deepCopy[T any](x T) T {
	c := reflect.New(reflect.TypeFor[T]()).Elem()
	copyInto(c, reflect.ValueOf(&x).Elem())
	out, _ := c.Interface().(T) // a nil interface stays nil
	return out
}

func copyInto(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if !src.IsNil() {
			p := reflect.New(src.Type().Elem())
			copyInto(p.Elem(), src.Elem())
			dst.Set(p)
		}
	case reflect.Interface:
		if !src.IsNil() {
			e := reflect.New(src.Elem().Type()).Elem()
			copyInto(e, src.Elem())
			dst.Set(e)
		}
	case reflect.Struct:
		dst.Set(src)
		for i := range src.NumField() {
			if src.Type().Field(i).IsExported() {
				copyInto(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Slice:
		if !src.IsNil() {
			s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
			for i := range src.Len() {
				copyInto(s.Index(i), src.Index(i))
			}
			dst.Set(s)
		}
	case reflect.Map:
		if !src.IsNil() {
			m := reflect.MakeMapWithSize(src.Type(), src.Len())
			for it := src.MapRange(); it.Next(); {
				e := reflect.New(src.Type().Elem()).Elem()
				copyInto(e, it.Value())
				m.SetMapIndex(it.Key(), e)
			}
			dst.Set(m)
		}
	default:
		dst.Set(src)
	}
}

// holding sets hold.
func (v *vandals) holding(on bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.hold = on
}

// keepingAdapter is an adapter that hands its calls and outcomes to the
// vandals: the call once the adapter has answered it, the outcome kept.
// It answers each call with an outcome of its own (a copy of the
// scripted one), as a live adapter does.
//
// An adapter that retries fails each call's first attempt with a
// retryable error (with details of its own) before it asks next, as a
// busy backend does: the gateway makes the call again.
type keepingAdapter struct {
	next    gateway.Adapter
	v       *vandals
	retries bool
}

func (a keepingAdapter) Call(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
	a.v.later("at a tool call")
	if a.retries && c.Attempt == 1 {
		te := gateway.NewToolError(gateway.CodeExecutionFailed, true, "busy, try again", map[string]any{"queue": []any{"q1", map[string]any{"depth": 7}}})
		a.v.handed(atAdapterCall, c, true)
		a.v.handed(atAdapterOutcome, te, false)
		return nil, te
	}
	out, err := a.next.Call(ctx, c)
	out, err = deepCopy(out), deepCopy(err)
	a.v.handed(atAdapterCall, c, true)
	if out != nil {
		a.v.handed(atAdapterOutcome, out, false)
	}
	if te, ok := err.(*gateway.ToolError); ok {
		a.v.handed(atAdapterOutcome, te, false)
	}
	return out, err
}

// vandalIdempotency keeps results as the in-memory store does, and hands
// what it is given and returns to the vandals.
// It counts the prior results it answered a claim with (a duplicate
// write's).
type vandalIdempotency struct {
	*gateway.MemoryIdempotency
	v      *vandals
	priors *int
}

func (s vandalIdempotency) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	prior, claimed, err := s.MemoryIdempotency.Claim(ctx, key)
	if prior != nil {
		*s.priors++
		s.v.handed(atIdempotency, prior, false)
	}
	return prior, claimed, err
}

func (s vandalIdempotency) Complete(ctx context.Context, key string, res *gateway.ToolResultEnvelope) error {
	err := s.MemoryIdempotency.Complete(ctx, key, res)
	s.v.handed(atIdempotency, res, true)
	return err
}

// vandalTranscript keeps each entry it is given (as the recorder does,
// by reference; a copy when its vandals may edit what it is given), and
// hands the entries it is given and returns to the vandals. An entry
// kept by reference shows an edit by other outside code (an adapter, an
// observer) of what the entry shares with them.
type vandalTranscript struct {
	rec *gatewaytest.Recorder
	v   *vandals
}

func (s vandalTranscript) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	kept := e
	if s.v.at[atTranscript] {
		kept = e.Clone()
	}
	err := s.rec.Append(ctx, kept)
	s.v.handed(atTranscript, &e, true)
	return err
}

func (s vandalTranscript) RunEntries(ctx context.Context, runID string) ([]gateway.TranscriptEntry, error) {
	out, err := s.rec.RunEntries(ctx, runID)
	s.v.handed(atTranscript, out, false)
	return out, err
}

// vandalCheckpoints keeps checkpoints as the in-memory store does, and
// hands what it is given (once it has set the saved revision, as its
// contract says) and returns to the vandals.
type vandalCheckpoints struct {
	*contextos.InMemoryCheckpoints
	v *vandals
}

func (s vandalCheckpoints) Save(ctx context.Context, c *contextos.Checkpoint) error {
	err := s.InMemoryCheckpoints.Save(ctx, c)
	rev := c.Revision
	s.v.handed(atCheckpoints, c, true)
	c.Revision = rev // the revision saved is the store's answer
	return err
}

func (s vandalCheckpoints) Load(ctx context.Context, runID string) (*contextos.Checkpoint, error) {
	c, err := s.InMemoryCheckpoints.Load(ctx, runID)
	if c != nil {
		s.v.handed(atCheckpoints, c, false)
	}
	return c, err
}

// vandalPackets keeps packets as the in-memory store does (their JSON),
// and hands what it is given and returns to the vandals.
type vandalPackets struct {
	*contextos.InMemoryPackets
	v *vandals
}

func (s vandalPackets) Save(ctx context.Context, p *replay.Packet) error {
	err := s.InMemoryPackets.Save(ctx, p)
	s.v.handed(atPackets, p, true)
	return err
}

func (s vandalPackets) Get(ctx context.Context, id string) (*replay.Packet, error) {
	p, err := s.InMemoryPackets.Get(ctx, id)
	if p != nil {
		s.v.handed(atPackets, p, false)
	}
	return p, err
}

// vandalDecisions keeps records as the in-memory store does, and hands
// what it is given and returns to the vandals.
type vandalDecisions struct {
	*decision.MemoryStore
	v *vandals
}

func (s vandalDecisions) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	out, err := s.MemoryStore.Append(ctx, r)
	s.v.handed(atDecisions, r, true)
	if out != nil {
		s.v.handed(atDecisions, out, false)
	}
	return out, err
}

func (s vandalDecisions) Get(ctx context.Context, id string) (*decision.Record, error) {
	out, err := s.MemoryStore.Get(ctx, id)
	if out != nil {
		s.v.handed(atDecisions, out, false)
	}
	return out, err
}

func (s vandalDecisions) List(ctx context.Context, f decision.Filter) ([]*decision.Record, error) {
	out, err := s.MemoryStore.List(ctx, f)
	s.v.handed(atDecisions, out, false)
	return out, err
}

// outsideCase is one generated case: the scripted refund agent's
// refund, whether its runs stream, whether a held refund is approved and
// resumed, and the plug-in points its vandals are set at. Some cases
// also have each tool call's first attempt fail retryably (retry), the
// refund proposed again in the next turn, which the idempotency store
// answers with the first one's result (duplicate; a refund under the
// gate only), or the policy
// adapter fail with an error whose details it keeps and edits later
// (fail).
type outsideCase struct {
	amount                 int
	stream, approve        bool
	retry, duplicate, fail bool
	at                     []string
}

func (c outsideCase) String() string {
	return fmt.Sprintf("refund %d INR, stream %v, approve %v, retry %v, duplicate %v, fail %v, vandals at:\n\t%s",
		c.amount, c.stream, c.approve, c.retry, c.duplicate, c.fail, strings.Join(c.at, "\n\t"))
}

// newOutsideCase draws a case from rng: a refund under the finance gate
// (3000 INR) or one above it that the gate holds, and a non-empty random
// subset of the plug-in points; then (drawn last, so the earlier draws
// stay what they were) whether it retries, duplicates the refund or has
// the policy adapter fail. A case that does sets vandals at the points
// that see it: the adapters' calls (a retry), their outcomes (a retry's
// error, a failure) and the idempotency store (a duplicate).
func newOutsideCase(rng *rand.Rand) outsideCase {
	c := outsideCase{amount: []int{1200, 5000}[rng.Intn(2)], stream: rng.Intn(2) == 0}
	c.approve = c.amount > 3000 && rng.Intn(2) == 0
	for len(c.at) == 0 {
		for _, p := range outsidePoints {
			if rng.Intn(2) == 0 {
				c.at = append(c.at, p)
			}
		}
	}
	c.retry, c.duplicate, c.fail = rng.Intn(2) == 0, rng.Intn(2) == 0, rng.Intn(3) == 0
	// A refund the gate holds is held again when it is proposed again
	// (each proposal is its own call to approve): only one under the
	// gate is a duplicate the idempotency store answers.
	c.duplicate = c.duplicate && c.amount < 3000
	// A failing policy adapter escalates the run before any refund: a
	// duplicate has none to answer.
	c.fail = c.fail && !c.duplicate
	with := func(on bool, p string) {
		if on && !slices.Contains(c.at, p) {
			c.at = append(c.at, p)
		}
	}
	with(c.retry, atAdapterCall)
	with(c.retry || c.fail, atAdapterOutcome)
	with(c.duplicate, atIdempotency)
	return c
}

// playOutside plays c's runs (two refunds, each approved and resumed when
// c.approve, then every packet replayed twice) with every plug-in point
// in place, and vandals set at the points of at (none: the plain play).
// It returns what the play recorded, enforced and replayed, and the
// vandals' log.
func playOutside(t *testing.T, c outsideCase, seed int64, at []string) (playRecord, []string) {
	v := &vandals{rng: rand.New(rand.NewSource(seed)), at: map[string]bool{}}
	for _, p := range at {
		v.at[p] = true
	}
	ctx := context.Background()
	// The planner plans the lookups, then the refund (and the refund
	// again at any later turn), each a plan of its own.
	planner := contextos.PlannerFunc(func(_ context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
		v.later("at a planner turn")
		p := lookupPlan()
		if req.Turn > 0 {
			p = refundPlan(c.amount)
		}
		if c.duplicate && req.Turn == 1 {
			p.Decision = nil // the refund is proposed again next turn
		}
		tools, decisions := req.Tools(), req.Decisions()
		v.handed(atPlannerRequest, req, true)
		v.handed(atPlannerRequest, tools, true)
		v.handed(atPlannerRequest, decisions, true)
		v.handed(atPlannerPlan, p, false)
		return p, nil
	})
	scripted := map[string]*gatewaytest.ScriptedAdapter{}
	var regs []gateway.Registration
	for _, a := range []struct {
		id, capability string
		scopes         []string
	}{{"adp_orders", "lookup", nil}, {"adp_policy", "eval", nil}, {"adp_payments", "issue_refund", []string{"payments.refund"}}} {
		sa := gatewaytest.NewScriptedAdapter()
		scripted[a.id] = sa
		regs = append(regs, gateway.Registration{AdapterID: a.id, Adapter: keepingAdapter{sa, v, c.retry},
			Capabilities: map[string]gateway.Capability{a.capability: {Scopes: a.scopes, MaxAttempts: 2, Backoff: func(string, int) time.Duration { return 0 }}}})
	}
	scripted["adp_orders"].On("lookup").Return(&gateway.Outcome{Output: map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200,
		"lines": []any{map[string]any{"sku": "a", "qty": 1}}}, Citations: []gateway.Citation{{EvidenceRef: "kg:order:ord_881"}}, Signals: []string{"ok"}})
	if c.fail {
		scripted["adp_policy"].On("eval").FailWith(gateway.NewToolError(gateway.CodeExecutionFailed, false, "policy engine down",
			map[string]any{"backend": "pe-3", "tried": []any{"pe-1", map[string]any{"host": "pe-2", "ms": 120}}}))
	} else {
		scripted["adp_policy"].On("eval").ReturnOutput(map[string]any{"eligible": true, "why": []any{"delivered", map[string]any{"window_days": 30}}})
	}
	scripted["adp_payments"].On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")

	rec := &gatewaytest.Recorder{}
	cps := contextos.NewInMemoryCheckpoints()
	cps.Now = contextostest.FixedTime
	packets := contextos.NewInMemoryPackets()
	var opts contextostest.Options
	opts.Runtime.Adapters = regs
	opts.Runtime.Critic = editingCritic(func(in *contextos.CriticInput) {
		v.later("at a verdict")
		v.handed(atCriticInput, in, true)
	})
	priors := 0
	opts.Runtime.Gateway.Idempotency = vandalIdempotency{gateway.NewMemoryIdempotency(), v, &priors}
	opts.Runtime.Transcripts = vandalTranscript{rec, v}
	opts.Runtime.Checkpoints = vandalCheckpoints{cps, v}
	opts.Runtime.Replays = vandalPackets{packets, v}
	opts.Runtime.Decisions = vandalDecisions{decision.NewMemoryStore(), v}
	opts.Runtime.OnPause = func(_ context.Context, p contextos.PendingApproval) {
		v.later("at a pause")
		v.handed(atOnPause, &p, true)
	}
	h := bareHarness(t, planner, &opts)
	src := playSources{H: h, Checkpoints: cps, Transcript: rec, Packets: packets, Payments: scripted["adp_payments"]}

	var o playRecord
	// run runs (or streams) one refund, or resumes runID.
	// It returns the approval the run awaits, if any.
	run := func(runID string, resume *contextos.ResumeInput) *gateway.ApprovalRequest {
		req, rc := refundRequest(t, c.amount, true)
		rc.RunID = runID
		var res *contextos.Result
		var err error
		var events []string
		switch {
		case c.stream:
			seq := h.Runtime.Stream(ctx, req, rc)
			if resume != nil {
				seq = h.Runtime.ResumeStream(ctx, runID, *resume)
			}
			for ev, evErr := range seq {
				if evErr != nil {
					err = evErr
					break
				}
				if ev.Kind == contextos.EventResult {
					res = ev.Final
					continue
				}
				events = append(events, asJSON(t, ev))
				v.handed(atStreamEvent, &ev, true)
			}
		case resume != nil:
			res, err = h.Runtime.Resume(ctx, runID, *resume)
		default:
			res, err = h.Runtime.Invoke(ctx, req, rc)
		}
		o.Runs = append(o.Runs, src.run(t, runID, events, res, err))
		var pending *gateway.ApprovalRequest
		if res != nil && res.Pending != nil {
			p := *res.Pending // before anyone edits res
			pending = &p
		}
		v.later("after the run returned")
		v.handed(atCallerResult, res, true)
		if resume != nil {
			v.handed(atCallerInput, resume, true)
		} else {
			v.handed(atCallerInput, req, true)
			v.handed(atCallerInput, rc, true)
		}
		pendings, err := h.Runtime.PendingApprovals(ctx, contextos.RunList{runID})
		o.Extra = append(o.Extra, fmt.Sprintf("pending approvals %s, %v", asJSON(t, pendings), err))
		v.handed(atCallerPendings, pendings, true)
		return pending
	}
	for _, runID := range []string{"run_a1b2c3d4e5f60718", "run_a1b2c3d4e5f60719"} {
		held := run(runID, nil)
		if held != nil && c.approve {
			a := contextostest.Approval(held, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
			run(runID, &contextos.ResumeInput{Approvals: []gateway.Approval{a}})
		}
	}
	// Every packet replays equal, twice: the second replay comes after
	// the caller and the stores have edited what the first was given
	// and returned.
	for round := range 2 {
		for _, id := range h.PacketIDs() {
			p, err := h.Runtime.Packets().Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			v.holding(true)
			report, err := h.Runtime.Replay(ctx, p)
			v.holding(false)
			if err != nil {
				o.Extra = append(o.Extra, fmt.Sprintf("replay %d of %s: %v", round, id, err))
				continue
			}
			if report.Status != replay.ReplayEqual {
				t.Errorf("replay %d of %s = %s: %+v", round, id, report.Status, report.Diffs)
			}
			o.Extra = append(o.Extra, fmt.Sprintf("replay %d of %s: %s", round, id, asJSON(t, report)))
			v.later("after a replay")
			v.handed(atCallerReplay, p, true)
			v.handed(atCallerReplay, report, true)
		}
	}
	src.finish(t, &o)
	o.Extra = append(o.Extra, fmt.Sprintf("claims answered with a prior result: %d", priors))
	return o, v.log
}

// TestOutsideEditsChangeNotTheRun is the property that nothing outside
// code does to a value it is handed or hands over changes what a run
// records, enforces or replays. Each generated case plays the scripted
// refund agent (two runs of a refund under the finance gate, or of one
// above it that the gate holds, approved and resumed or not; streamed or
// not; each tool call's first attempt failing retryably or not; the
// refund proposed again, which the idempotency store answers, or not;
// the policy adapter failing, with details it keeps and edits later, or
// not; then every replay packet replayed, twice) with every plug-in
// point in place: the planner, a host critic, the Stream consumer, the
// tool adapters, the idempotency, transcript, checkpoint, packet and
// decision stores, OnPause, and the caller of Invoke, Resume, Stream,
// Replay and PendingApprovals. Vandals at a random subset of the points
// edit everything each value they are handed or hand over reaches
// (deepcheck.Vandalize), on receipt or later on a value kept from
// earlier. The play must record, enforce and replay what the plain play
// (vandals nowhere) does: every run's status, result, record, pending
// approval, compiled context, checkpoint and events, the transcript and
// its chain, the packets and their replays, the refunds issued; a held
// refund stays held.
func TestOutsideEditsChangeNotTheRun(t *testing.T) {
	t.Parallel()
	const (
		firstSeed = 20261206
		cases     = 24
	)
	for i := range int64(cases) {
		seed := firstSeed + i
		rng := rand.New(rand.NewSource(seed))
		c := newOutsideCase(rng)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			plain, _ := playOutside(t, c, seed, nil)
			switch {
			case c.fail:
				// Without the policy evaluation the refund is not issued:
				// the run escalates.
				if plain.Runs[0].Status != "ESCALATED" || plain.Refunds != 0 {
					t.Fatalf("the plain play's first run is %s and it issued %d refunds: a run whose policy adapter fails must escalate", plain.Runs[0].Status, plain.Refunds)
				}
			case c.approve:
				if plain.Runs[0].Status != "DEFERRED" || plain.Refunds != 2 {
					t.Fatalf("the plain play's first run is %s and it issued %d refunds: the gate must hold each refund until it is approved, then issue it once", plain.Runs[0].Status, plain.Refunds)
				}
			default:
				checkPlain(t, c.amount, plain)
			}
			if prior := plain.Extra[len(plain.Extra)-1]; c.duplicate && plain.Refunds > 0 && prior == "claims answered with a prior result: 0" {
				t.Fatalf("the plain play proposed the refund again, but the idempotency store answered no claim with the first one's result (%s)", prior)
			}
			editing, log := playOutside(t, c, seed, c.at)
			if t.Failed() {
				t.Logf("seed %d: %s", seed, c)
			}
			samePlays(t, fmt.Sprintf("seed %d: %s\nvandals' edits:\n\t%s\n", seed, c, strings.Join(slices.Compact(log), "\n\t")), plain, editing)
		})
	}
}
