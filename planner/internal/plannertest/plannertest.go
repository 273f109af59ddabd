// Package plannertest is the test support of the model planners
// (planner/openai, planner/anthropic): a whole governed refund run of the
// canonical support scenario (seed 003) driven by the planner under test.
//
// A Harness is a contextostest harness around the support pack with the
// canonical request and run context (order ord_881, refund of INR 4200,
// identity verified) and three scripted adapters with realistic outputs
// and argument schemas:
//
//   - adp_orders.lookup returns the order (delivered, total_inr the
//     refund amount, customer cus_77), or Options.Order;
//   - adp_policy.eval returns eligible with 24 days left of the window;
//   - adp_payments.issue_refund issues the refund (a transaction id).
//
// The flow a competent planner follows: lookup and policy eval, then
// issue_refund with the decision support.refund.execute approved; the
// refund of 4200 pauses for GATE_FINANCE_APPROVAL, Approve grants it as
// the finance lead and the run is DECIDED approved. Every run is captured
// for replay.
package plannertest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// Canonical values of the scenario.
const (
	// OrderID is the order of the refund request.
	OrderID = "ord_881"
	// CustomerID is the order's customer.
	CustomerID = "cus_77"
	// DefaultAmount is the refund amount of the canonical request (INR).
	DefaultAmount = 4200
	// DecisionKey is the pack's decision.
	DecisionKey = "support.refund.execute"
	// FinanceGate is the approval gate a refund pauses for.
	FinanceGate = "GATE_FINANCE_APPROVAL"
	// OrderEvidence is the evidence ref of the order's record.
	OrderEvidence = "kg:order:ord_881#snapshot_kg_2026_05_03_T0930"
)

// Capability ids of the scenario's tools.
const (
	Lookup = "adp_orders.lookup"
	Eval   = "adp_policy.eval"
	Refund = "adp_payments.issue_refund"
)

// Argument schemas of the scripted capabilities, as the gateway checks
// them (the refund's carries $schema and $id, which a planner drops when
// it renders the tool).
var (
	LookupSchema = json.RawMessage(`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string","pattern":"^ord_","description":"the order id"}},"additionalProperties":false}`)
	EvalSchema   = json.RawMessage(`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string","pattern":"^ord_"},"amount_inr":{"type":"integer","minimum":1}},"additionalProperties":false}`)
	RefundSchema = json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"schema://adp_payments.issue_refund.v1","type":"object","required":["order_id","amount_inr","currency"],"properties":{"order_id":{"type":"string","pattern":"^ord_"},"amount_inr":{"type":"integer","minimum":1,"maximum":50000},"currency":{"enum":["INR"]},"reason":{"type":"string","maxLength":500},"idempotency_key":{"type":"string"}},"additionalProperties":false}`)
)

// Options tunes a Harness. The zero value is the canonical run.
type Options struct {
	// Amount is the refund amount the request asks for (its message and
	// refund_amount) and the order's total. Default DefaultAmount.
	Amount int
	// Order replaces the order lookup's output, for a case whose order
	// says something else (a note with a prompt injection, say).
	Order map[string]any
	// PlanTimeoutMS, TotalTokens and MaxCostCents set the run budget's
	// plan_timeout_ms, total_tokens and max_cost_cents (the run context's
	// and the request's hints) when > 0. A TotalTokens below the buckets'
	// sum (8900) scales every bucket down in proportion.
	PlanTimeoutMS int64
	TotalTokens   int
	MaxCostCents  float64
	// MaxReplanAttempts sets max_replan_attempts when not nil.
	MaxReplanAttempts *int
	// Pack is the pack document the run uses (JSON, unsigned). Default:
	// the canonical support pack; BoundPack adds a per-call rule.
	Pack []byte
	// Runtime are further runtime options. Adapters and Evidence are the
	// harness's unless set; ReplaySampleRate is 1.
	Runtime contextos.Options
}

// Harness is a test runtime for a governed refund run planned by a model
// planner.
type Harness struct {
	// Test is the contextostest harness underneath (its Runtime, stores
	// and transcript).
	Test *contextostest.Harness
	// Orders, Policy and Payments are the scripted adapters (nil when
	// Options.Runtime.Adapters is set).
	Orders, Policy, Payments *gatewaytest.ScriptedAdapter
	t                        testing.TB
	o                        Options
}

// FinanceLead is who approves the refund in Approve.
var FinanceLead = contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}

// New builds a harness whose runtime plans with p.
func New(t testing.TB, p contextos.Planner, opts *Options) *Harness {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Amount == 0 {
		o.Amount = DefaultAmount
	}
	h := &Harness{t: t, o: o}
	ro := o.Runtime
	if len(ro.Adapters) == 0 {
		h.Orders, h.Policy, h.Payments = gatewaytest.NewScriptedAdapter(), gatewaytest.NewScriptedAdapter(), gatewaytest.NewScriptedAdapter()
		order := o.Order
		if order == nil {
			order = map[string]any{"order_id": OrderID, "customer_id": CustomerID, "status": "delivered", "total_inr": o.Amount,
				"currency": "INR", "placed_at": "2026-04-28", "delivered_at": "2026-04-30"}
		}
		h.Orders.On("lookup").ReturnOutput(order)
		h.Policy.On("eval").ReturnOutput(map[string]any{"eligible": true, "window_days_left": 24, "policy_id": "POLICY_RETURNS_V4"})
		h.Payments.On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_" + OrderID + "_1", "status": "issued"}, "refund:txn_"+OrderID+"_1")
		ro.Adapters = []gateway.Registration{
			{AdapterID: "adp_orders", Adapter: h.Orders, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: LookupSchema, Scopes: []string{"orders.read"}}}},
			{AdapterID: "adp_policy", Adapter: h.Policy, Capabilities: map[string]gateway.Capability{"eval": {ArgsSchema: EvalSchema}}},
			{AdapterID: "adp_payments", Adapter: h.Payments, Capabilities: map[string]gateway.Capability{"issue_refund": {ArgsSchema: RefundSchema, Scopes: []string{"payments.refund"}}}},
		}
	}
	if ro.Evidence == nil {
		var ev compiler.StaticEvidence
		if err := json.Unmarshal(fixture.Evidence(), &ev); err != nil {
			t.Fatalf("plannertest: evidence: %v", err)
			return nil
		}
		ro.Evidence = ev
	}
	ro.ReplaySampleRate = 1
	doc := o.Pack
	if doc == nil {
		doc = fixture.SupportPack()
	}
	h.Test = contextostest.New(t, p, [][]byte{doc}, &contextostest.Options{Runtime: ro})
	if h.Test == nil {
		return nil
	}
	return h
}

// Runtime is the harness's runtime.
func (h *Harness) Runtime() *contextos.Runtime { return h.Test.Runtime }

// Request returns a fresh copy of the canonical request and run context
// with the options applied.
func (h *Harness) Request() (*runcontext.InvokeRequest, *runcontext.RunContext) {
	h.t.Helper()
	req, err := runcontext.DecodeInvokeRequest(fixture.Invoke())
	if err != nil {
		h.t.Fatalf("plannertest: request: %v", err)
		return nil, nil
	}
	rc, err := runcontext.DecodeRunContext(fixture.RunContext())
	if err != nil {
		h.t.Fatalf("plannertest: run context: %v", err)
		return nil, nil
	}
	req.Input.Message = fmt.Sprintf("Refund order %s for INR %d", OrderID, h.o.Amount)
	req.Input.Context["refund_amount"] = h.o.Amount
	if h.o.PlanTimeoutMS > 0 {
		rc.RunBudget.PlanTimeoutMS = h.o.PlanTimeoutMS
		req.Runtime.PlanTimeoutMS = &h.o.PlanTimeoutMS
	}
	if h.o.TotalTokens > 0 {
		rc.RunBudget.TotalTokens = h.o.TotalTokens
		scaleBuckets(rc.RunBudget.BucketTokens, h.o.TotalTokens)
		req.Runtime.TotalTokens = &h.o.TotalTokens
	}
	if h.o.MaxCostCents > 0 {
		rc.RunBudget.MaxCostCents = h.o.MaxCostCents
		req.Runtime.MaxCostCents = &h.o.MaxCostCents
	}
	if h.o.MaxReplanAttempts != nil {
		rc.RunBudget.MaxReplanAttempts = *h.o.MaxReplanAttempts
		req.Runtime.MaxReplanAttempts = h.o.MaxReplanAttempts
	}
	return req, rc
}

// Invoke runs the canonical request (Request) and fails the test if
// Invoke returns an error.
func (h *Harness) Invoke() *contextos.Result {
	h.t.Helper()
	req, rc := h.Request()
	if req == nil {
		return nil
	}
	return h.Test.Invoke(req, rc)
}

// InvokeContext is Invoke with ctx (a test cancelling the run).
func (h *Harness) InvokeContext(ctx context.Context) (*contextos.Result, error) {
	h.t.Helper()
	req, rc := h.Request()
	if req == nil {
		return nil, fmt.Errorf("plannertest: no request")
	}
	return h.Test.Runtime.Invoke(ctx, req, rc)
}

// Approve fails the test unless res awaits the finance gate, then
// resumes it with the finance lead's approval.
func (h *Harness) Approve(res *contextos.Result) *contextos.Result {
	h.t.Helper()
	contextostest.AssertPending(h.t, res, FinanceGate)
	if res.Pending == nil {
		h.t.FailNow()
		return nil
	}
	return h.Test.Approve(res, FinanceLead)
}

// Packet returns the run's captured replay packet.
func (h *Harness) Packet(res *contextos.Result) *replay.Packet {
	h.t.Helper()
	if res.ReplayPacketID == "" {
		h.t.Fatalf("plannertest: run %s captured no replay packet", res.RunID)
		return nil
	}
	p, err := h.Test.Runtime.Packets().Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		h.t.Fatalf("plannertest: packet: %v", err)
		return nil
	}
	return p
}

// Plans returns the plans the packet recorded, one per planner turn.
func (h *Harness) Plans(res *contextos.Result) []*contextos.Plan {
	h.t.Helper()
	p := h.Packet(res)
	if p == nil {
		return nil
	}
	out := make([]*contextos.Plan, len(p.PlannerOutput))
	for i, raw := range p.PlannerOutput {
		var pl contextos.Plan
		if err := json.Unmarshal(raw, &pl); err != nil {
			h.t.Fatalf("plannertest: planner output %d: %v", i, err)
			return nil
		}
		out[i] = &pl
	}
	return out
}

// Replay replays the run offline and fails the test unless it is
// replay_equal.
func (h *Harness) Replay(res *contextos.Result) *replay.Report {
	h.t.Helper()
	r := h.Test.Replay(res)
	if r != nil {
		contextostest.AssertReplayEqual(h.t, r)
	}
	return r
}

// Calls is how many times capability ("adp_payments.issue_refund")
// reached its adapter.
func (h *Harness) Calls(capability string) int {
	h.t.Helper()
	var a *gatewaytest.ScriptedAdapter
	switch capability {
	case Lookup:
		a = h.Orders
	case Eval:
		a = h.Policy
	case Refund:
		a = h.Payments
	}
	if a == nil {
		h.t.Fatalf("plannertest: no scripted adapter for %q", capability)
		return 0
	}
	_, name, _ := strings.Cut(capability, ".")
	return a.CallCount(name)
}

// Usage is the run's budget usage as its record states it.
func Usage(res *contextos.Result) decision.BudgetUsage {
	if res == nil || res.Record == nil {
		return decision.BudgetUsage{}
	}
	return res.Record.BudgetUsage
}

// AssertDecided fails the test unless res is DECIDED with outcome.
func AssertDecided(t testing.TB, res *contextos.Result, outcome string) {
	t.Helper()
	contextostest.AssertStatus(t, res, decision.Decided)
	contextostest.AssertOutcome(t, res, outcome)
}

// scaleBuckets scales the bucket allocations down in proportion when
// they add up to more than total (the run context requires they fit).
func scaleBuckets(b map[runcontext.Bucket]int, total int) {
	sum := 0
	for _, n := range b {
		sum += n
	}
	if sum <= total {
		return
	}
	for k, n := range b {
		b[k] = n * total / sum
	}
}

// BoundRule is the rule BoundPack adds.
const BoundRule = "R_REFUND_WITHIN_REQUEST"

// BoundPack is the support pack with a per-call rule that binds the refund
// call to the request: a call whose amount_inr exceeds the request's
// refund_amount is denied. The canonical pack gates on the request's
// amount only, so without such a rule a model that calls the refund with
// another amount than the request's is bound by the request's gate, not
// its own call's.
func BoundPack(t testing.TB) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(fixture.SupportPack(), &p); err != nil {
		t.Fatalf("plannertest: pack: %v", err)
		return nil
	}
	b := p["policy_layer"].(map[string]any)["policy_bundles"].([]any)[0].(map[string]any)
	dsl := b["policy_dsl"].(map[string]any)
	dsl["rules"] = append(dsl["rules"].([]any), map[string]any{
		"rule_id":    BoundRule,
		"applies_to": map[string]any{"tool.capability_id": Refund},
		"if":         map[string]any{">": []any{map[string]any{"var": "tool.args.amount_inr"}, map[string]any{"var": "request.context.refund_amount"}}},
		"then":       map[string]any{"allow": false, "reason": "The refund exceeds the amount the request asks for."},
		"else":       map[string]any{"allow": true},
		"rationale":  "A refund call is bound to the requested amount.",
	})
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("plannertest: pack: %v", err)
		return nil
	}
	return out
}

// Per-call forms of the finance control for PerCallPack.
const (
	// GateWhenOverArgs: the finance gate's when reads the refund call's
	// amount_inr.
	GateWhenOverArgs = "gate when over tool.args"
	// GateWhenOverArgsDefault: the same, reading 0 for a call without
	// the argument.
	GateWhenOverArgsDefault = "gate when over tool.args with a default"
	// RuleOverArgs: the high-value rule reads the refund call's
	// amount_inr and names the finance gate.
	RuleOverArgs = "rule over tool.args naming the gate"
)

// PerCallPack is the support pack with its finance control bound to the
// call (form is GateWhenOverArgs, GateWhenOverArgsDefault or
// RuleOverArgs): a refund above 3000
// pauses for the finance gate whatever amount the request says.
func PerCallPack(t testing.TB, form string) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(fixture.SupportPack(), &p); err != nil {
		t.Fatalf("plannertest: pack: %v", err)
		return nil
	}
	overArgs := map[string]any{">": []any{map[string]any{"var": "tool.args.amount_inr"}, 3000}}
	pl := p["policy_layer"].(map[string]any)
	switch form {
	case GateWhenOverArgs:
		pl["approval_gates"].([]any)[0].(map[string]any)["when"] = overArgs
	case GateWhenOverArgsDefault:
		pl["approval_gates"].([]any)[0].(map[string]any)["when"] = map[string]any{">": []any{map[string]any{"var": []any{"tool.args.amount_inr", 0}}, 3000}}
	case RuleOverArgs:
		rules := pl["policy_bundles"].([]any)[0].(map[string]any)["policy_dsl"].(map[string]any)["rules"].([]any)
		rules[1].(map[string]any)["if"] = overArgs
	default:
		t.Fatalf("plannertest: no per-call form %q", form)
		return nil
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("plannertest: pack: %v", err)
		return nil
	}
	return out
}
