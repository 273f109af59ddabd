package planner_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/planner"
	"github.com/contextos/contextos/planner/internal/plannertest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// lookupAndEval is the canonical first plan.
func lookupAndEval() *contextos.Plan {
	return &contextos.Plan{Steps: []contextos.Step{
		{CapabilityID: plannertest.Lookup, Args: map[string]any{"order_id": plannertest.OrderID}},
		{CapabilityID: plannertest.Eval, Args: map[string]any{"order_id": plannertest.OrderID}},
	}}
}

// refundAndDecide is the canonical last plan.
func refundAndDecide() *contextos.Plan {
	return &contextos.Plan{
		Steps: []contextos.Step{{CapabilityID: plannertest.Refund, Args: map[string]any{"order_id": plannertest.OrderID, "amount_inr": 4200, "currency": "INR"}}},
		Decision: &contextos.DecisionProposal{DecisionKey: plannertest.DecisionKey, Outcome: "approved", Rationale: "delivered, in window, verified",
			EvidenceRefs: []string{plannertest.OrderEvidence}},
	}
}

// canonicalRequests runs the canonical refund with a scripted planner
// whose second turn asks to be replanned, and returns the plan requests
// of its three turns: turn 0, turn 1 (the results of lookup and eval,
// "continue: …") and turn 2 (the same results, "planner_replan: …").
func canonicalRequests(t testing.TB) []*contextos.PlanRequest {
	t.Helper()
	p := contextostest.NewPlanner(lookupAndEval(),
		&contextos.Plan{Replan: "no_tool_call: the model answered in text without calling a tool; act by calling a tool, or decide with propose_decision"},
		refundAndDecide())
	h := plannertest.New(t, p, nil)
	res := h.Invoke()
	contextostest.AssertPending(t, res, plannertest.FinanceGate)
	reqs := p.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d plan requests, want 3", len(reqs))
	}
	return reqs
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file (run with -update to accept):\n%s", name, got)
	}
}

// conversationJSON is c as its golden file holds it, with its
// name-to-capability table.
func conversationJSON(t testing.TB, c *planner.Conversation) []byte {
	t.Helper()
	table := map[string]string{}
	for _, tool := range c.Tools {
		if id, ok := c.Capability(tool.Name); ok {
			table[tool.Name] = id
		}
	}
	b, err := json.MarshalIndent(struct {
		*planner.Conversation
		Capabilities map[string]string
	}{c, table}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// render renders req and fails the test on an error.
func render(t testing.TB, req *contextos.PlanRequest, opts *planner.Options) *planner.Conversation {
	t.Helper()
	c, err := planner.Render(req, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
