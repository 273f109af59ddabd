package storekit

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/transport"
)

// RefundRequest is the support fixture's refund of amount under run id
// runID (the fixture's when empty), identity verified.
func RefundRequest(t testing.TB, runID string, amount int) (*runcontext.InvokeRequest, *runcontext.RunContext) {
	t.Helper()
	req, err := runcontext.DecodeInvokeRequest(fixture.Invoke())
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(fixture.RunContext())
	if err != nil {
		t.Fatal(err)
	}
	req.Input.Context["refund_amount"] = amount
	req.Input.Context["identity_verified"] = true
	if runID != "" {
		rc.RunID = runID
	}
	return req, rc
}

// Evidence is the support fixture's evidence.
func Evidence(t testing.TB) compiler.StaticEvidence {
	t.Helper()
	var ev compiler.StaticEvidence
	if err := json.Unmarshal(fixture.Evidence(), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// Adapters are the refund's adapters: orders and policy in process, the
// payments tool over the external transport at paymentsURL.
func Adapters(t testing.TB, paymentsURL string) []gateway.Registration {
	t.Helper()
	ext, err := transport.NewAdapter(transport.Endpoint{Transport: transport.TransportExternal, URL: paymentsURL, AllowPrivate: true,
		Timeout: time.Minute, Retry: transport.Retry{MaxAttempts: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	refund := ext.Capability()
	refund.Scopes = []string{"payments.refund"}
	lookup := func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
		return &gateway.Outcome{Output: map[string]any{"order_id": c.Envelope.Args["order_id"], "status": "delivered", "total_inr": 4200}}, ctx.Err()
	}
	eval := func(ctx context.Context, _ *gateway.Call) (*gateway.Outcome, error) {
		return &gateway.Outcome{Output: map[string]any{"eligible": true}}, ctx.Err()
	}
	return []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: gateway.AdapterFunc(lookup), Capabilities: map[string]gateway.Capability{"lookup": {}}},
		{AdapterID: "adp_policy", Adapter: gateway.AdapterFunc(eval), Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: ext, Capabilities: map[string]gateway.Capability{"issue_refund": refund}},
	}
}

// LookupPlan reads the order and evaluates the refund policy.
func LookupPlan() *contextos.Plan {
	return &contextos.Plan{Steps: []contextos.Step{
		{CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_881"}},
		{CapabilityID: "adp_policy.eval", Args: map[string]any{"order_id": "ord_881"}},
	}, Usage: contextos.PlanUsage{Tokens: 900, CostCents: 0.4}}
}

// RefundPlan issues the refund of amount and proposes the approved
// decision.
func RefundPlan(amount int) *contextos.Plan {
	return &contextos.Plan{
		Steps: []contextos.Step{{CapabilityID: "adp_payments.issue_refund", Args: map[string]any{"order_id": "ord_881", "amount_inr": amount, "currency": "INR"}}},
		Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "approved",
			Outputs:    map[string]any{"refund_amount_inr": amount, "currency": "INR"},
			Rationale:  "Order delivered, within the refund window, identity verified.",
			Confidence: 0.95, SubjectIDs: []string{"customer:cus_77", "order:ord_881"},
			EvidenceRefs: []string{"kg:order:ord_881#snapshot_kg_2026_05_03_T0930"}},
		Usage: contextos.PlanUsage{Tokens: 700, CostCents: 0.3},
	}
}

// Payments is a payments service over the external transport. Like a real
// payment API it performs the effect once per idempotency key and answers
// a repeated key with the first answer. It counts raw requests and
// effects per key.
type Payments struct {
	mu       sync.Mutex
	keys     []string // the idempotency key of each raw request, in order
	effects  map[string]int
	runs     map[string]string // key → the run (task id) that sent it first
	answers  map[string]*transport.Response
	onEffect func(key string)
	srv      *httptest.Server
}

// NewPayments starts a Payments service, closed when t ends.
func NewPayments(t testing.TB) *Payments {
	p := &Payments{effects: map[string]int{}, answers: map[string]*transport.Response{}, runs: map[string]string{}}
	p.srv = httptest.NewServer(transport.NewHandler(transport.ExecutorFunc(p.execute)))
	t.Cleanup(p.srv.Close)
	return p
}

// URL is the service's address.
func (p *Payments) URL() string { return p.srv.URL }

// OnEffect sets f to run after an effect is performed and before it is
// answered (a test kills a process there).
func (p *Payments) OnEffect(f func(key string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onEffect = f
}

func (p *Payments) execute(_ context.Context, req *transport.Request) *transport.Response {
	p.mu.Lock()
	key := req.IdempotencyKey
	p.keys = append(p.keys, key)
	if key == "" {
		p.mu.Unlock()
		return &transport.Response{Status: transport.StatusError, Error: &transport.Failure{Code: gateway.CodeInvalidInput, Message: "a refund needs an idempotency key"}}
	}
	if _, ok := p.runs[key]; !ok {
		p.runs[key] = req.TaskID
	}
	if ans, ok := p.answers[key]; ok {
		p.mu.Unlock()
		return ans
	}
	p.effects[key]++
	ans := &transport.Response{Status: transport.StatusOK, Output: map[string]any{"transaction_id": fmt.Sprintf("txn_%d", len(p.answers)+1), "status": "issued"}}
	p.answers[key] = ans
	hook := p.onEffect
	p.mu.Unlock()
	if hook != nil {
		hook(key)
	}
	return ans
}

// Runs returns the run (the request's task id) each key was first sent
// by.
func (p *Payments) Runs() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.runs)
}

// Counts returns the raw request keys, in order, and the effects per key.
func (p *Payments) Counts() ([]string, map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.keys), maps.Clone(p.effects)
}

// AssertOneEffect checks the service saw requests raw requests, all
// under one idempotency key, and performed its effect once; it returns
// the key.
func (p *Payments) AssertOneEffect(t *testing.T, requests int) string {
	t.Helper()
	keys, effects := p.Counts()
	if len(keys) != requests {
		t.Errorf("payments got %d raw requests, want %d", len(keys), requests)
	}
	if len(keys) == 0 {
		t.Fatal("payments was never called")
	}
	for _, k := range keys {
		if k != keys[0] {
			t.Errorf("payments requests carry keys %q, want one key", keys)
			break
		}
	}
	if len(effects) != 1 || effects[keys[0]] != 1 {
		t.Errorf("payments effects = %v, want one effect under %s", effects, keys[0])
	}
	return keys[0]
}
