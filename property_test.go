package contextos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/replay"
)

// The property test (issue 13, "Done when"): random plans, random scripted
// adapter statuses, random approvals and cancellations at random points run
// through contextostest, and on every Invoke and every Resume:
//
//   - no DECIDED record with an outcome that is neither a refusal nor an
//     escalation ("approved") unless an adp_payments.issue_refund result
//     succeeded (ok or completed) in the run;
//   - every issue_refund the scripted payments adapter received (every
//     attempt) is in a stored record's evidence_refs or in the run's
//     checkpoint results: no side effect without a record or checkpoint;
//   - a DEFERRED result has Pending and its record says what it awaits;
//   - Invoke and Resume neither panic nor return an error;
//   - every captured packet replays replay_equal, also after a JSON round
//     trip, and pins its record as stored: expected.decision_record_hash
//     is the stored record_hash, and the record names the packet
//     (replay.replay_packet_id == lineage.replay_packet_id == its id;
//     checkPacketHandle);
//   - a stored record that names a packet names one the store has,
//     captured with it (checkRecordHandles), and validates against
//     decision-record.v1;
//   - the decision store's chain verifies;
//   - no gated write runs without its approval: a refund that reached the
//     payments adapter while the finance gate held it (the request's
//     amount above 3000, or, in the per-call packs, the call's own) carries
//     the gate's approval;
//   - no write runs without its required evidence: a refund that reached
//     the adapter came after a successful order lookup and policy
//     evaluation in the run, with identity verified;
//   - no idempotency key is paid twice: each refund key reaches the
//     payments adapter once (its retries are attempts of that call).
//
// Besides plans, statuses, approvals, cancellations and store failures
// (the decision store's, and the stores a tool call needs: the
// idempotency store's claim or completion, the transcript sink's append),
// the generated dimensions are the pack (the seed's finance control over
// request context, or bound to the call: the gate's when, or the
// high-value rule, over tool.args.amount_inr) and a required read that
// always fails (the order lookup failing, or answering not_found).
//
// Each case is generated from a PCG source seeded with (propertySeed, case
// index), so a failing case is reproduced by its subtest name alone:
//
//	go test -run 'TestPropertyRandomRuns/case_0042' .
//
// and its failure message prints the generated scenario.
const propertySeed = 0x13c0_5e_2026

func TestPropertyRandomRuns(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 60
	}
	mem := propertyMemory(t)
	ev := evidence(t)
	pk := readTestdata(t, "ctxpack.support-1.0.0.json")
	start := time.Now()
	var mu sync.Mutex
	stats := map[string]int{}
	t.Run("cases", func(t *testing.T) {
		for i := range n {
			sc := genScenario(propertySeed, uint64(i))
			t.Run(fmt.Sprintf("case_%04d", i), func(t *testing.T) {
				t.Parallel()
				st := map[string]int{}
				defer func() { // also when the case is skipped
					mu.Lock()
					defer mu.Unlock()
					for k, v := range st {
						stats[k] += v
					}
				}()
				runScenario(t, sc, pk, ev, mem, st)
			})
		}
	})
	t.Logf("%d cases in %v: %v", n, time.Since(start).Round(time.Millisecond), stats)
}

// Scenario.

type propTurn struct {
	Kind    string `json:"kind"` // lookup, refund, refund_step, decide, lookup_refund, empty, memory, error
	Amount  int    `json:"amount,omitempty"`
	Outcome string `json:"outcome,omitempty"`
}

type propScenario struct {
	Seed     uint64 `json:"seed"`
	Case     uint64 `json:"case"`
	Amount   int    `json:"request_amount"`
	Verified bool   `json:"identity_verified"`
	Evidence string `json:"evidence"` // static, empty, none
	Memory   bool   `json:"memory"`
	Turns    []propTurn
	Repeat   bool                `json:"repeat_last"`
	Scripts  map[string][]string `json:"scripts"` // capability → statuses; the last repeats
	// Cancel is where the caller's context ends: "" (never), "adapter"
	// (inside the CancelAt-th call of CancelCap, before it runs),
	// "planner" (inside the CancelAt-th planner call), "critic" (inside
	// the host critic's CancelAt-th Verify: after a plan is taken, before
	// its first step), each as a
	// cancellation ("cancel") or a deadline passing ("deadline").
	Cancel    string `json:"cancel,omitempty"`
	CancelCap string `json:"cancel_capability,omitempty"`
	CancelAt  int    `json:"cancel_at,omitempty"`
	CancelErr string `json:"cancel_kind,omitempty"`
	// Approvals answer successive pauses (right, wrong_role, denied, self,
	// empty_approver, empty_id, expired); past the list, right.
	Approvals []string `json:"approvals"`
	// ResumeStops is how many times a hard-stopped run is resumed.
	ResumeStops int `json:"resume_stops"`
	// StoreFail is how the decision store fails the StoreFailAt-th append
	// of the run: "down" (not stored, and the lookup after fails),
	// "lost" (stored, the answer lost, and the lookup fails) or
	// "lost_found" (stored, the answer lost, the lookup finds it).
	StoreFail   string `json:"store_fail,omitempty"`
	StoreFailAt int    `json:"store_fail_at,omitempty"`
	// Pack is the finance control's form: "seed" (over request
	// context), "gate_args" (the gate's when over the call's
	// amount_inr) or "rule_args" (the high-value rule over it).
	Pack string `json:"pack"`
	// ReadFail makes every order lookup fail ("fail") or answer
	// not_found ("not_found"); "" leaves Scripts as generated.
	ReadFail string `json:"read_fail,omitempty"`
	// GatewayFail is the store a tool call needs that fails its
	// GatewayFailAt-th request of the run, once: "claim" or "complete"
	// (the idempotency store's claim or completion of a write's key) or
	// "append" (the transcript sink's append of an entry); "" none.
	GatewayFail   string `json:"gateway_store_fail,omitempty"`
	GatewayFailAt int    `json:"gateway_store_fail_at,omitempty"`
}

func (sc *propScenario) String() string {
	b, _ := json.MarshalIndent(sc, "", "  ")
	return string(b)
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// weighted picks among choices by weight.
func weighted(r *rand.Rand, choices map[string]int) string {
	keys := make([]string, 0, len(choices))
	total := 0
	for k, w := range choices {
		keys = append(keys, k)
		total += w
	}
	slices.Sort(keys)
	x := r.IntN(total)
	for _, k := range keys {
		if x < choices[k] {
			return k
		}
		x -= choices[k]
	}
	return keys[len(keys)-1]
}

func genAmount(r *rand.Rand, request int) int {
	if r.IntN(3) > 0 {
		return request
	}
	return pick(r, 0, -5, 1, 1200, 2999, 3001, 4200, 50000, 50001, 1+r.IntN(50000))
}

func genScenario(seed, idx uint64) *propScenario {
	r := rand.New(rand.NewPCG(seed, idx))
	sc := &propScenario{Seed: seed, Case: idx, Scripts: map[string][]string{}}
	sc.Amount = pick(r, 1200, 1200, 4200, 4200, 3000, 3001, 50000, 1+r.IntN(60000))
	sc.Verified = r.IntN(6) > 0
	sc.Evidence = weighted(r, map[string]int{"static": 8, "empty": 1, "none": 1})
	sc.Memory = r.IntN(4) == 0
	sc.Repeat = r.IntN(2) == 0
	for i := range 1 + r.IntN(6) {
		k := weighted(r, map[string]int{"lookup": 25, "refund": 25, "refund_step": 8, "decide": 22, "lookup_refund": 8, "empty": 3, "memory": 5, "error": 4, "replan": 3})
		if i == 0 && r.IntN(5) < 3 {
			k = "lookup" // most runs look the order up first
		}
		t := propTurn{Kind: k}
		switch k {
		case "refund", "refund_step", "lookup_refund", "memory":
			t.Amount = genAmount(r, sc.Amount)
		}
		switch k {
		case "decide":
			t.Outcome = weighted(r, map[string]int{"approved": 5, "denied": 3, "escalated": 2, "bogus": 1})
		case "refund", "lookup_refund", "memory":
			t.Outcome = "approved"
		}
		sc.Turns = append(sc.Turns, t)
	}
	readStatuses := map[string]int{"ok": 30, "fail": 2, "fail_retryable": 2, "fail_with": 2, "fail_plain": 1, "panic": 1, "escalate_signal": 1, "refuse_signal": 1, "nan": 1}
	writeStatuses := map[string]int{"ok": 20, "no_mutations": 2, "fail": 2, "fail_retryable": 3, "fail_with": 2, "fail_plain": 1, "panic": 1, "nan": 1}
	for _, c := range []string{"adp_orders.lookup", "adp_policy.eval", "adp_payments.issue_refund"} {
		w := readStatuses
		if c == "adp_payments.issue_refund" {
			w = writeStatuses
		}
		for range 1 + r.IntN(3) {
			s := weighted(r, w)
			if s == "fail_with" {
				s += ":" + pick(r, gateway.CodeInvalidInput, gateway.CodePermissionDenied, gateway.CodeTimeout, gateway.CodeCanceled,
					gateway.CodeAuthExpired, gateway.CodeAuthForbidden, gateway.CodeSecretResolutionFailed, gateway.CodeUnsupportedTool, "made_up_code")
				if r.IntN(2) == 0 {
					s += ":retryable"
				}
			}
			sc.Scripts[c] = append(sc.Scripts[c], s)
		}
	}
	switch weighted(r, map[string]int{"": 12, "adapter": 6, "planner": 4, "critic": 4}) {
	case "adapter":
		sc.Cancel = "adapter"
		sc.CancelCap = pick(r, "adp_orders.lookup", "adp_policy.eval", "adp_payments.issue_refund", "adp_payments.issue_refund")
		sc.CancelAt = 1 + r.IntN(3)
	case "planner":
		sc.Cancel = "planner"
		sc.CancelAt = 1 + r.IntN(len(sc.Turns)+1)
	case "critic":
		sc.Cancel = "critic"
		sc.CancelAt = 1 + r.IntN(len(sc.Turns))
	}
	if sc.Cancel != "" {
		sc.CancelErr = pick(r, "cancel", "deadline")
	}
	for range r.IntN(4) {
		sc.Approvals = append(sc.Approvals, weighted(r, map[string]int{"right": 4, "wrong_role": 1, "denied": 1, "self": 1, "empty_approver": 1, "empty_id": 1, "expired": 1}))
	}
	sc.ResumeStops = r.IntN(3)
	if sc.StoreFail = weighted(r, map[string]int{"": 10, "down": 1, "lost": 1, "lost_found": 1}); sc.StoreFail != "" {
		sc.StoreFailAt = 1 + r.IntN(4)
	}
	// Drawn last, so the dimensions above stay as they were generated.
	sc.Pack = weighted(r, map[string]int{"seed": 3, "gate_args": 2, "rule_args": 2})
	switch sc.ReadFail = weighted(r, map[string]int{"": 6, "fail": 1, "not_found": 1}); sc.ReadFail {
	case "fail":
		sc.Scripts["adp_orders.lookup"] = []string{"fail"}
	case "not_found":
		sc.Scripts["adp_orders.lookup"] = []string{"fail_with:not_found"}
	}
	// Drawn after the dimensions above, so they stay as generated.
	if sc.GatewayFail = weighted(r, map[string]int{"": 8, "claim": 1, "complete": 1, "append": 1}); sc.GatewayFail != "" {
		sc.GatewayFailAt = 1 + r.IntN(2)
		if sc.GatewayFail == "append" {
			sc.GatewayFailAt = 1 + r.IntN(10)
		}
	}
	return sc
}

// scenarioPack is the support pack in the scenario's form.
func scenarioPack(t testing.TB, sc *propScenario, seed []byte) []byte {
	overArgs := map[string]any{">": []any{map[string]any{"var": "tool.args.amount_inr"}, 3000}}
	switch sc.Pack {
	case "gate_args":
		return supportPackWith(t, func(p map[string]any) {
			p["policy_layer"].(map[string]any)["approval_gates"].([]any)[0].(map[string]any)["when"] = overArgs
		})
	case "rule_args":
		return supportPackWith(t, func(p map[string]any) {
			supportRules(p)[1].(map[string]any)["if"] = map[string]any{"and": []any{
				map[string]any{"==": []any{map[string]any{"var": "user.role"}, "support_agent"}}, overArgs}}
		})
	}
	return seed
}

// gated reports whether the scenario's finance gate holds a refund call
// of amount: the request's amount above 3000 activates it at compile time
// in every form; in the per-call forms, so does the call's own.
func (sc *propScenario) gated(amount float64) bool {
	return sc.Amount > 3000 || sc.Pack != "seed" && amount > 3000
}

// Building the run.

func (t propTurn) plan() *contextos.Plan {
	switch t.Kind {
	case "lookup":
		return lookupPlan()
	case "refund":
		return refundPlan(t.Amount)
	case "refund_step":
		p := refundPlan(t.Amount)
		p.Decision = nil
		return p
	case "lookup_refund":
		p := refundPlan(t.Amount)
		p.Steps = append(lookupPlan().Steps, p.Steps...)
		return p
	case "memory":
		p := refundPlan(t.Amount)
		p.Memory = []contextos.MemoryProposal{{WriteClass: "preference", Content: "prefers app", Confidence: 0.9},
			{WriteClass: "pii_dump", Content: "not allowed", Confidence: 0.9}}
		return p
	case "decide":
		p := approvedAgain()
		p.Decision.Outcome = t.Outcome
		if t.Outcome != "approved" {
			p.Decision.Outputs = nil
		}
		return p
	case "empty":
		return &contextos.Plan{}
	case "replan":
		// A model planner's turn with nothing to run: its own reason, and
		// usage reported as a breakdown only.
		return &contextos.Plan{Replan: "no_tool_call: the model answered in text", Usage: contextos.PlanUsage{InputTokens: 400, OutputTokens: 30, CachedInputTokens: 300}}
	}
	return nil
}

// cancelCtx is the context of one Invoke or Resume: fire ends it, as a
// cancellation or as its deadline passing (deterministically: the deadline
// "passes" when fire is called, wherever that is). It wraps a standard
// library context, so the contexts derived from it end synchronously with
// it; for a deadline, Err says context.DeadlineExceeded and the cause of
// every derived context is context.DeadlineExceeded.
type cancelCtx struct {
	context.Context
	cancel   context.CancelCauseFunc
	deadline bool
}

func newCancelCtx(kind string) *cancelCtx {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &cancelCtx{Context: ctx, cancel: cancel, deadline: kind == "deadline"}
}

func (c *cancelCtx) fire() {
	if c.deadline {
		c.cancel(context.DeadlineExceeded)
	} else {
		c.cancel(context.Canceled)
	}
}

func (c *cancelCtx) Err() error {
	if err := c.Context.Err(); err != nil && c.deadline {
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}

// trigger fires the current call's context once, at the scenario's point.
type trigger struct {
	mu    sync.Mutex
	cur   *cancelCtx
	count int
	fired bool
}

func (tr *trigger) set(c *cancelCtx) { tr.mu.Lock(); tr.cur = c; tr.mu.Unlock() }

// hit counts one occurrence and fires at the at-th.
func (tr *trigger) hit(at int) {
	tr.mu.Lock()
	tr.count++
	var c *cancelCtx
	if tr.count == at && !tr.fired {
		tr.fired, c = true, tr.cur
	}
	tr.mu.Unlock()
	if c != nil {
		c.fire()
	}
}

func scriptStatus(s *gatewaytest.Script, capability, status string) {
	write := capability == "adp_payments.issue_refund"
	out := map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}
	switch capability {
	case "adp_policy.eval":
		out = map[string]any{"eligible": true}
	case "adp_payments.issue_refund":
		out = map[string]any{"transaction_id": "txn_q9"}
	}
	// Every answer and failure carries the card on file, as a value, a key
	// and a number: the pack's card rules must keep it off every surface
	// (checkRunInvariants).
	out["card_on_file"], out[leakCard], out["pan"] = "visa "+leakCard, "on file", 4111111111111111.0
	kind, code, _ := strings.Cut(status, ":")
	switch kind {
	case "ok":
		if write {
			s.ReturnOutput(out, "refund:txn_q9")
		} else {
			s.ReturnOutput(out)
		}
	case "no_mutations":
		s.ReturnOutput(out)
	case "fail":
		s.Fail("service unavailable for card " + leakCard)
	case "fail_retryable":
		s.FailRetryable("service busy charging " + leakCard)
	case "fail_with":
		c, retry, _ := strings.Cut(code, ":")
		s.FailWith(gateway.NewToolError(c, retry == "retryable", "scripted "+c, map[string]any{"card": leakCard}))
	case "fail_plain":
		s.FailWith(errors.New("connection reset by peer"))
	case "panic":
		s.Panic()
	case "escalate_signal":
		s.Return(&gateway.Outcome{Output: out, Signals: []string{"fraud_signal_high"}})
	case "refuse_signal":
		s.Return(&gateway.Outcome{Output: out, RiskTags: []string{"refund_without_identity"}})
	case "nan":
		o := map[string]any{"score": math.NaN()}
		if write {
			s.ReturnOutput(o, "refund:txn_nan")
		} else {
			s.ReturnOutput(o)
		}
	default:
		panic("unknown scripted status " + status)
	}
}

func propertyMemory(t testing.TB) []compiler.MemoryItem {
	t.Helper()
	var mem []compiler.MemoryItem
	if err := json.Unmarshal(readTestdata(t, "memory.support.json"), &mem); err != nil {
		t.Fatal(err)
	}
	return mem
}

func approvalFor(kind string, p *gateway.ApprovalRequest) gateway.Approval {
	a := contextostest.Approval(p, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
	switch kind {
	case "wrong_role":
		a.ApproverRole = "support_agent"
	case "denied":
		a.Denied = true
	case "self":
		a.Approver = "usr_771"
	case "empty_approver":
		a.Approver = ""
	case "empty_id":
		a.ApprovalID = ""
	case "expired":
		a.DecidedAt = contextostest.FixedTime().Add(-3 * time.Hour)
	}
	return a
}

// runScenario runs one scenario and checks the invariants after each
// Invoke and Resume; it counts final statuses and features into stats.
func runScenario(t *testing.T, sc *propScenario, pk []byte, ev compiler.StaticEvidence, mem []compiler.MemoryItem, stats map[string]int) {
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nscenario (reproduce with -run 'TestPropertyRandomRuns/cases/case_%04d$'):\n%s", fmt.Sprintf(format, args...), sc.Case, sc)
	}
	tr := &trigger{}
	planner := contextostest.NewPlanner()
	for i, turn := range sc.Turns {
		i, turn := i, turn
		planner.ThenFunc(func(*contextos.PlanRequest) (*contextos.Plan, error) {
			if turn.Kind == "error" {
				return nil, errors.New("model overloaded")
			}
			_ = i
			return turn.plan(), nil
		})
	}
	if sc.Repeat {
		planner.RepeatLast()
	}
	var pl contextos.Planner = planner
	if sc.Cancel == "planner" {
		pl = contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
			tr.hit(sc.CancelAt)
			return planner.Plan(ctx, req)
		})
	}
	o := contextostest.Options{Runtime: contextos.Options{ReplaySampleRate: 1}, Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}}
	if sc.Cancel == "critic" {
		o.Runtime.Critic = verifyHook(func() { tr.hit(sc.CancelAt) })
	}
	// Retries back off without waiting (still honouring the context).
	o.Runtime.Gateway.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	switch sc.Evidence {
	case "static":
		o.Runtime.Evidence = ev
	case "empty":
		o.Runtime.Evidence = compiler.StaticEvidence{}
	}
	if sc.Memory {
		o.Runtime.Memory = newRawMemory(mem...)
	}
	store := &failOnceDecisions{MemoryStore: decision.NewMemoryStore(), mode: sc.StoreFail, at: sc.StoreFailAt}
	o.Runtime.Decisions = store
	switch sc.GatewayFail {
	case "claim", "complete":
		o.Runtime.Gateway.Idempotency = &failOnceIdempotency{MemoryIdempotency: gateway.NewMemoryIdempotency(), op: sc.GatewayFail, at: int32(sc.GatewayFailAt)}
	case "append":
		o.Runtime.Transcripts = &failOnceTranscript{Recorder: &gatewaytest.Recorder{}, at: int32(sc.GatewayFailAt)}
	}
	h := contextostest.New(t, pl, [][]byte{scenarioPack(t, sc, pk)}, &o)
	h.Decisions = store.MemoryStore // the checks read the store as it is
	if ft, ok := o.Runtime.Transcripts.(*failOnceTranscript); ok {
		h.Transcript = ft.Recorder // the checks read the transcript as it is
	}
	for c, statuses := range sc.Scripts {
		adapter, capName, _ := strings.Cut(c, ".")
		a := h.Adapter(adapter)
		if sc.Cancel == "adapter" && sc.CancelCap == c {
			// A hook with no steps: it sees every call of the capability
			// (retries too) and never answers one.
			a.On(capName).When(func(map[string]any) bool { tr.hit(sc.CancelAt); return false })
		}
		s := a.On(capName)
		for _, st := range statuses {
			scriptStatus(s, c, st)
		}
	}
	req, rc := refundRequest(t, sc.Amount, sc.Verified)
	ctx := context.Background()

	call := func(what string, do func(ctx context.Context) (*contextos.Result, error)) *contextos.Result {
		t.Helper()
		c := newCancelCtx(sc.CancelErr)
		tr.set(c)
		var res *contextos.Result
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					fail("%s panicked: %v", what, p)
				}
			}()
			res, err = do(c)
		}()
		if err != nil && store.fired.Load() && !store.reported {
			// The decision store's one failure: the run's checkpoint
			// says how it goes on. A run whose record is in doubt is
			// settled (its record stored once, nothing planned or
			// called); a pause whose DEFERRED record failed is resumed
			// with its approval.
			store.reported = true
			stats["store_failed"]++
			cp, lerr := loadState(ctx, h.Checkpoints, rc.RunID)
			switch {
			case lerr != nil:
				fail("%s = %v; checkpoint: %v", what, err, lerr)
			case cp.Unconfirmed != nil && cp.Unconfirmed.Record.Status != decision.Deferred:
				stats["settled"]++
				calls, asked := h.Adapter("adp_payments").CallCount("issue_refund"), len(planner.Requests())
				res, err = h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{})
				if err == nil && (h.Adapter("adp_payments").CallCount("issue_refund") != calls || len(planner.Requests()) != asked) {
					fail("%s: the settle planned or called again", what)
				}
				what += " then settled"
			case cp.Pending != nil && !cp.Active:
				stats["pause_unconfirmed"]++
				return &contextos.Result{RunID: rc.RunID, Status: decision.Deferred, Pending: cp.Pending}
			default:
				fail("%s = %v after the decision store failed, and the checkpoint (stopped %q, active %t) neither settles nor awaits an approval", what, err, cp.Stopped, cp.Active)
			}
		}
		if err != nil || res == nil {
			fail("%s = %v, %v", what, res, err)
		}
		checkRunInvariants(t, h, res, what, fail)
		checkWriteControls(h, sc, res.RunID, what, stats, fail)
		return res
	}
	res := call("Invoke", func(ctx context.Context) (*contextos.Result, error) { return h.Runtime.Invoke(ctx, req, rc) })
	pauses, stops := 0, 0
	for step := 0; step < 8; step++ {
		if res.Status == decision.Deferred {
			kind := "right"
			if pauses < len(sc.Approvals) {
				kind = sc.Approvals[pauses]
			}
			pauses++
			stats["approval_"+kind]++
			a := approvalFor(kind, res.Pending)
			res = call(fmt.Sprintf("Resume #%d (%s approval)", step+1, kind), func(ctx context.Context) (*contextos.Result, error) {
				return h.Runtime.Resume(ctx, res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
			})
			continue
		}
		cp, err := loadState(ctx, h.Checkpoints, res.RunID)
		if err != nil {
			fail("checkpoint of %s: %v", res.RunID, err)
		}
		if cp.Terminal || cp.Stopped == "" || stops >= sc.ResumeStops {
			break
		}
		stops++
		stats["resumed_stop"]++
		res = call(fmt.Sprintf("Resume #%d (after the hard stop %q)", step+1, cp.Stopped), func(ctx context.Context) (*contextos.Result, error) {
			return h.Runtime.Resume(ctx, res.RunID, contextos.ResumeInput{})
		})
	}
	stats["final_"+string(res.Status)]++
	if res.Status == decision.Decided {
		stats["decided_"+res.Record.Outcome]++
	}
	if res.Status == decision.Escalated {
		why := "not_a_hard_stop"
		if cp, err := loadState(ctx, h.Checkpoints, res.RunID); err == nil && cp.Stopped != "" {
			why, _, _ = strings.Cut(cp.Stopped, ":")
		}
		stats["escalated_"+why]++
	}
	if tr.fired {
		stats["canceled"]++
	}
	stats["refund_calls"] += h.Adapter("adp_payments").CallCount("issue_refund")
	if sc.GatewayFail != "" {
		stats["gateway_store_"+sc.GatewayFail]++
	}

	// Every captured packet replays equal, as stored and after a JSON
	// round trip (as one read from a file is).
	ids := h.PacketIDs()
	if len(ids) == 0 {
		fail("run %s ended %s and captured no packet", res.RunID, res.Status)
	}
	for _, id := range ids {
		p, err := h.Replays.Get(ctx, id)
		if err != nil {
			fail("packet %s: %v", id, err)
		}
		checkPacketHandle(ctx, h.Decisions, p, fail)
		for _, via := range []string{"stored", "json"} {
			if via == "json" {
				b, err := json.Marshal(p)
				if err != nil {
					fail("packet %s does not encode: %v", id, err)
				}
				p = &replay.Packet{}
				if err := json.Unmarshal(b, p); err != nil {
					fail("packet %s does not decode: %v", id, err)
				}
			}
			out, err := h.Runtime.Replay(ctx, p)
			if err != nil || out.Status != replay.ReplayEqual {
				var diffs []replay.Diff
				if out != nil {
					diffs = out.Diffs
				}
				fail("packet %s (%s, source %s, expected %s) replays %v: %+v (%v)\npacket: %s", id, via, p.SourceRef, p.Expected.Status, statusOf(out), diffs, err, packetSummary(p))
			}
		}
		stats["packets"]++
	}
}

func statusOf(r *replay.Report) replay.Status {
	if r == nil {
		return ""
	}
	return r.Status
}

// checkRunInvariants checks what must hold after every Invoke and Resume.
func checkRunInvariants(t *testing.T, h *contextostest.Harness, res *contextos.Result, what string, fail func(format string, args ...any)) {
	t.Helper()
	ctx := context.Background()
	const refund = "adp_payments.issue_refund"
	succeeded := slices.ContainsFunc(res.ToolResults, func(r *gateway.ToolResultEnvelope) bool {
		return r.CapabilityID == refund && r.Status.Succeeded()
	})
	if res.Record == nil {
		fail("%s: result %s has no record", what, res.Status)
	}
	if res.Status != res.Record.Status {
		fail("%s: result status %s, record status %s", what, res.Status, res.Record.Status)
	}
	// Issue 13's invariant is about writes that were attempted: a refund
	// that was called and did not complete. (Approving with no refund call
	// at all is a decision the support pack allows: its decision names no
	// capability it executes.)
	attempted := slices.ContainsFunc(res.ToolResults, func(r *gateway.ToolResultEnvelope) bool { return r.CapabilityID == refund })
	if res.Status == decision.Decided && res.Record.Outcome == "approved" && attempted && !succeeded {
		fail("%s: DECIDED approved without a successful refund: %v (%s)", what, resultStatuses(res), res.Record.Rationale.Summary)
	}
	if res.Status == decision.Deferred && (res.Pending == nil || res.Record.Awaiting == nil || res.Record.Awaiting.GateID != res.Pending.GateID) {
		fail("%s: DEFERRED without what it awaits: pending %+v, awaiting %+v", what, res.Pending, res.Record.Awaiting)
	}
	recs, err := h.Decisions.List(ctx, decision.Filter{RunID: res.RunID})
	if err != nil || len(recs) == 0 {
		fail("%s: stored records %v (%v)", what, recs, err)
	}
	refs := map[string]bool{}
	for _, rec := range recs {
		for _, ref := range rec.EvidenceRefs {
			refs[ref] = true
		}
		if rec.Status == decision.Decided && rec.Outcome == "approved" && attempted &&
			!slices.ContainsFunc(rec.EvidenceRefs, func(ref string) bool { return strings.HasPrefix(ref, "tool:"+refund+":") }) {
			fail("%s: stored record %s is DECIDED approved and cites no refund: %v", what, rec.RecordID, rec.EvidenceRefs)
		}
	}
	cp, err := loadState(ctx, h.Checkpoints, res.RunID)
	if err != nil {
		fail("%s: checkpoint: %v", what, err)
	}
	for _, c := range h.Adapter("adp_payments").Calls() {
		if c.Capability != "issue_refund" {
			continue
		}
		id := c.Envelope.ToolCallID
		if refs["tool:"+refund+":"+id] || slices.ContainsFunc(cp.Results, func(s contextos.StepResult) bool { return s.Result.ToolCallID == id }) {
			continue
		}
		fail("%s: the refund %s (attempt %d) ran and is in no stored record and not in the checkpoint (status %s, stopped %q)", what, id, c.Attempt, res.Status, cp.Stopped)
	}
	if err := h.Decisions.Verify(ctx); err != nil {
		fail("%s: decision chain: %v", what, err)
	}
	checkRecordHandles(ctx, h.Decisions, h.Replays, res.RunID, fail)
	// Nothing leaks: the card every adapter returns reaches no surface.
	surfaces := map[string]any{"result": res, "records": recs, "checkpoint": cp, "transcript": h.Transcript.Entries()}
	if res.ReplayPacketID != "" {
		if p, err := h.Replays.Get(ctx, res.ReplayPacketID); err == nil {
			surfaces["packet"] = p
		}
	}
	for name, v := range surfaces {
		if b, err := json.Marshal(v); err != nil || bytes.Contains(b, []byte(leakCard)) {
			fail("%s: the %s holds the card number (or has no JSON form: %v)", what, name, err)
		}
	}
	// What a durable store persists is the checkpoint's opaque data, not
	// the decoded state: the card must not be in those bytes either.
	if raw, err := h.Checkpoints.Load(ctx, res.RunID); err != nil || bytes.Contains(raw.Data, []byte(leakCard)) {
		fail("%s: the stored checkpoint data holds the card number (or cannot be loaded: %v)", what, err)
	}
}

// checkWriteControls checks that every refund that reached the payments
// adapter passed the controls that bind it at the moment of the call: the
// finance gate's approval when the gate held it, and the evidence the
// refund's decision and rules require (a successful lookup and policy
// evaluation before it, identity verified).
//
// A result whose transcript append failed is not in the transcript: the
// run's checkpoint holds it, and its store failures name the append (the
// packet does too).
func checkWriteControls(h *contextostest.Harness, sc *propScenario, runID, what string, stats map[string]int, fail func(format string, args ...any)) {
	entries := h.Transcript.Entries()
	cp, err := loadState(context.Background(), h.Checkpoints, runID)
	if err != nil {
		fail("%s: checkpoint: %v", what, err)
	}
	unrecorded := map[string]bool{} // tool call ids whose result append failed
	for _, f := range cp.StoreFailures {
		if f.Store == replay.StoreTranscript && f.Kind == "result" {
			unrecorded[f.ToolCallID] = true
		}
	}
	paid := map[string]int{}
	for _, c := range h.Adapter("adp_payments").Calls() {
		if c.Capability != "issue_refund" || c.Attempt != 1 {
			continue
		}
		// No idempotency key is paid twice: each reaches the adapter once
		// (its retries are later attempts of the same call).
		if paid[c.IdempotencyKey]++; paid[c.IdempotencyKey] > 1 {
			fail("%s: the refund under idempotency key %s reached the adapter %d times", what, c.IdempotencyKey, paid[c.IdempotencyKey])
		}
		id := c.Envelope.ToolCallID
		amount, _ := c.Envelope.Args["amount_inr"].(float64)
		// The result of the call that ran (a paused call is recorded with
		// the same id before it), and the call entry before it.
		i := slices.IndexFunc(entries, func(e gateway.TranscriptEntry) bool {
			return e.Result != nil && e.Result.ToolCallID == id && e.Result.Metadata.Attempts > 0
		})
		if i < 0 && unrecorded[id] {
			stats["refund_result_unrecorded"]++
			continue
		}
		if i < 0 {
			fail("%s: the refund %s reached the adapter and its result is not in the transcript (store failures %+v)", what, id, cp.StoreFailures)
		}
		at := i - 1
		for at >= 0 && (entries[at].Call == nil || entries[at].Call.ToolCallID != id) {
			at--
		}
		if at < 0 {
			fail("%s: the refund %s reached the adapter and its call is not in the transcript", what, id)
		}
		if sc.gated(amount) {
			if entries[i].Result.Metadata.ApprovalGateID != "GATE_FINANCE_APPROVAL" || entries[i].Result.Metadata.Approver == "" {
				fail("%s: the refund %s of %v ran while the finance gate held it, without its approval", what, id, amount)
			}
			stats["gated_refund_ran"]++
		}
		held := func(capability string) bool {
			return slices.ContainsFunc(entries[:at], func(e gateway.TranscriptEntry) bool {
				return e.Result != nil && e.Result.CapabilityID == capability && e.Result.Status.Succeeded()
			}) || slices.ContainsFunc(cp.Results, func(s contextos.StepResult) bool {
				return unrecorded[s.Result.ToolCallID] && s.Result.CapabilityID == capability && s.Result.Status.Succeeded()
			})
		}
		if !sc.Verified || !held("adp_orders.lookup") || !held("adp_policy.eval") {
			fail("%s: the refund %s ran without its evidence (identity verified %v, lookup %v, policy eval %v before it)",
				what, id, sc.Verified, held("adp_orders.lookup"), held("adp_policy.eval"))
		}
	}
	for _, e := range entries {
		if r := e.Result; r != nil && r.CapabilityID == "adp_payments.issue_refund" && r.Error != nil && strings.HasPrefix(r.Error.Message, "missing_evidence:") {
			stats["write_blocked_missing_evidence"]++
		}
	}
}

// packetSummary is what a failure report needs of a packet: its
// transcript, adapter outcomes, interrupts, planner errors and resumes.
func packetSummary(p *replay.Packet) string {
	var b strings.Builder
	for _, e := range p.Transcript {
		switch {
		case e.Call != nil:
			fmt.Fprintf(&b, "\n  call %s %s", e.Call.CapabilityID, e.Call.ToolCallID)
		case e.Result != nil:
			code := ""
			if e.Result.Error != nil {
				code = e.Result.Error.Code
			}
			fmt.Fprintf(&b, "\n  result %s %s %s %s attempts=%d", e.Result.CapabilityID, e.Result.ToolCallID, e.Result.Status, code, e.Result.Metadata.Attempts)
		}
	}
	for _, o := range p.Outcomes {
		fmt.Fprintf(&b, "\n  outcome %s %s#%d panic=%v error=%v", o.CapabilityID, o.ToolCallID, o.Attempt, o.Panic, o.Error != nil)
	}
	fmt.Fprintf(&b, "\n  interrupts %+v planner_errors %+v resumes %d planner_outputs %d", p.Interrupts, p.PlannerErrors, len(p.Resumes), len(p.PlannerOutput))
	return b.String()
}

// verifyHook is a host critic that accepts everything and calls hook in
// each Verify.
// failOnceDecisions fails the at-th append once, as mode says (see
// propScenario.StoreFail); the lookup right after fails too, except for
// "lost_found".
type failOnceDecisions struct {
	*decision.MemoryStore
	mode     string
	at       int
	n        atomic.Int32
	fired    atomic.Bool
	getFails atomic.Bool
	reported bool // by the scenario's call, once it handled the failure
}

func (s *failOnceDecisions) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	if s.mode == "" || int(s.n.Add(1)) != s.at {
		return s.MemoryStore.Append(ctx, r)
	}
	s.fired.Store(true)
	if s.mode != "down" {
		if _, err := s.MemoryStore.Append(ctx, r); err != nil {
			return nil, err
		}
	}
	s.getFails.Store(s.mode != "lost_found")
	return nil, errors.New("connection reset")
}

func (s *failOnceDecisions) Get(ctx context.Context, id string) (*decision.Record, error) {
	if s.getFails.Swap(false) {
		return nil, errors.New("db down")
	}
	return s.MemoryStore.Get(ctx, id)
}

// failOnceIdempotency fails its at-th claim or completion (op) once;
// a failed completion does not reach the store (it is down).
type failOnceIdempotency struct {
	*gateway.MemoryIdempotency
	op string
	at int32
	n  atomic.Int32
}

func (s *failOnceIdempotency) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	if s.op == "claim" && s.n.Add(1) == s.at {
		return nil, false, errors.New("idempotency store down")
	}
	return s.MemoryIdempotency.Claim(ctx, key)
}

func (s *failOnceIdempotency) Complete(ctx context.Context, key string, res *gateway.ToolResultEnvelope) error {
	if s.op == "complete" && s.n.Add(1) == s.at {
		return errors.New("idempotency store down")
	}
	return s.MemoryIdempotency.Complete(ctx, key, res)
}

// failOnceTranscript fails its at-th append once.
type failOnceTranscript struct {
	*gatewaytest.Recorder
	at int32
	n  atomic.Int32
}

func (s *failOnceTranscript) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	if s.n.Add(1) == s.at {
		return errors.New("transcript sink down")
	}
	return s.Recorder.Append(ctx, e)
}

type verifyHook func()

func (f verifyHook) Verify(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	f()
	return contextos.Judgement{Verdict: contextos.VerdictOK}, nil
}

func (f verifyHook) Score(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	return contextos.Judgement{Verdict: contextos.VerdictOK}, nil
}
