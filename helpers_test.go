package contextos_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/runcontext"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	return fixture.Read(t, name)
}

// refundRequest is the canonical invocation with the amount and identity
// flag set, and its host run context.
func refundRequest(t testing.TB, amount int, verified bool) (*runcontext.InvokeRequest, *runcontext.RunContext) {
	t.Helper()
	req, err := runcontext.DecodeInvokeRequest(readTestdata(t, "invoke.support-refund.json"))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(readTestdata(t, "run-context.support.json"))
	if err != nil {
		t.Fatal(err)
	}
	req.Input.Context["refund_amount"] = amount
	req.Input.Context["identity_verified"] = verified
	return req, rc
}

func evidence(t testing.TB) compiler.StaticEvidence {
	t.Helper()
	var ev compiler.StaticEvidence
	if err := json.Unmarshal(readTestdata(t, "evidence.support.json"), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// lookupPlan reads the order and evaluates the refund policy.
func lookupPlan() *contextos.Plan {
	return &contextos.Plan{Steps: []contextos.Step{
		{CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_881"}},
		{CapabilityID: "adp_policy.eval", Args: map[string]any{"order_id": "ord_881"}},
	}, Usage: contextos.PlanUsage{Tokens: 900, CostCents: 0.4}}
}

// refundPlan issues the refund and proposes the approved decision.
func refundPlan(amount int) *contextos.Plan {
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

// deniedPlan refuses the refund.
func deniedPlan() *contextos.Plan {
	return &contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "denied",
		Rationale: "Identity is not verified.", Confidence: 1, SubjectIDs: []string{"customer:cus_77"}}}
}

// harness is the canonical support pack with scripted adapters for orders,
// policy and payments, and every run captured for replay.
func harness(t testing.TB, planner contextos.Planner, opts *contextostest.Options) *contextostest.Harness {
	t.Helper()
	h := bareHarness(t, planner, opts)
	scriptDefaults(h, "")
	// Every run a test makes must replay equal.
	t.Cleanup(func() { h.ReplayAll() })
	return h
}

// scriptDefaults scripts the happy path of every adapter but skip.
func scriptDefaults(h *contextostest.Harness, skip string) {
	if skip != "adp_orders" {
		h.Adapter("adp_orders").On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200})
	}
	if skip != "adp_policy" {
		h.Adapter("adp_policy").On("eval").ReturnOutput(map[string]any{"eligible": true})
	}
	if skip != "adp_payments" {
		h.Adapter("adp_payments").On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
	}
}

// bareHarness is the harness with no adapter scripted.
func bareHarness(t testing.TB, planner contextos.Planner, opts *contextostest.Options) *contextostest.Harness {
	t.Helper()
	var o contextostest.Options
	if opts != nil {
		o = *opts
	}
	if o.Runtime.Evidence == nil {
		o.Runtime.Evidence = evidence(t)
	}
	if o.Runtime.ReplaySampleRate == 0 {
		o.Runtime.ReplaySampleRate = 1
	}
	if o.Scopes == nil {
		o.Scopes = map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}
	}
	return contextostest.New(t, planner, [][]byte{readTestdata(t, "ctxpack.support-1.0.0.json")}, &o)
}

// loadState loads and decodes a run's checkpoint from s.
func loadState(ctx context.Context, s contextos.CheckpointStore, runID string) (*contextos.CheckpointState, error) {
	c, err := s.Load(ctx, runID)
	if err != nil {
		return nil, err
	}
	return contextos.DecodeCheckpoint(c)
}

// saveState encodes st and saves it over the revision it was loaded at.
func saveState(ctx context.Context, s contextos.CheckpointStore, st *contextos.CheckpointState) error {
	c, err := contextos.EncodeCheckpoint(st)
	if err != nil {
		return err
	}
	return s.Save(ctx, c)
}

// rawMemory is a memory store that recalls every item it was seeded with,
// promoted or not, as a store may: the compiler omits what is not
// promoted (a ledger omission), which the tests and the replay corpus pin.
type rawMemory struct {
	*contextos.InMemoryMemory
	items compiler.StaticMemory
}

func newRawMemory(items ...compiler.MemoryItem) rawMemory {
	return rawMemory{InMemoryMemory: contextos.NewInMemoryMemory(), items: items}
}

func (m rawMemory) Recall(ctx context.Context, q compiler.MemoryQuery) ([]compiler.MemoryItem, error) {
	return m.items.Recall(ctx, q)
}
