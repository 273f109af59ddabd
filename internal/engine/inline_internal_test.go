package engine

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/runcontext"
)

// A PlanRequest's wire form keeps what a planner in another
// process reads: the compiled context, request, run, results, turn,
// replan reason, and the tool schemas and decision options behind Tools
// and Decisions.
func TestPlanRequestWire(t *testing.T) {
	in, err := runcontext.DecodeInvokeRequest(fixture.Invoke())
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(fixture.RunContext())
	if err != nil {
		t.Fatal(err)
	}
	req := &PlanRequest{
		Compiled: &compiler.CompiledContext{Manifests: compiler.Manifests{ToolManifest: []compiler.ToolManifestEntry{{
			AdapterID: "adp_orders", Capabilities: []string{"lookup"},
			CapabilityMetadata: map[string]compiler.CapabilityMetadata{"lookup": {Kind: "read", RiskLevel: "read_only", ApprovalMode: runcontext.ApprovalMode("read_only")}},
		}}}},
		Request:      in,
		Run:          rc,
		Results:      []StepResult{{Turn: 0, Index: 0, Step: Step{CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_1"}}}},
		Turn:         1,
		ReplanReason: "planner_replan: more",
		call:         3,
		schemas:      map[string]json.RawMessage{"adp_orders.lookup": json.RawMessage(`{"type":"object"}`)},
		decisions:    []DecisionOption{{DecisionKey: "support.refund.execute", AllowedOutcomes: []string{"approved", "denied"}, RefusalOutcomes: []string{"denied"}}},
	}
	b, err := EncodePlanRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodePlanRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(req.Tools(), got.Tools()); diff != "" {
		t.Errorf("Tools (-sent +received):\n%s", diff)
	}
	if diff := cmp.Diff(req.Decisions(), got.Decisions()); diff != "" {
		t.Errorf("Decisions (-sent +received):\n%s", diff)
	}
	if got.call != 3 || got.Turn != 1 || got.ReplanReason != req.ReplanReason || got.Request.RequestID != in.RequestID || got.Run.RunID != rc.RunID ||
		len(got.Results) != 1 || got.Results[0].Step.Args["order_id"] != "ord_1" {
		t.Errorf("received %+v", got)
	}
	if _, err := DecodePlanRequest([]byte(`{"turn":"x"}`)); err == nil {
		t.Error("DecodePlanRequest accepted a turn that is not a number")
	}
}
