package contextos_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/runcontext"
)

// PlanRequest.Tools lists the surfaced capabilities, sorted, with their
// manifest metadata and the argument schema of their registration
// (compacted; nil when the registration declares none); a withheld
// capability is not listed; the specs are the caller's copy.
func TestPlanRequestTools(t *testing.T) {
	planner := contextostest.NewPlanner(&contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "denied"}})
	noop := gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) { return &gateway.Outcome{}, nil })
	regs := []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: noop, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: json.RawMessage("{\n  \"type\": \"object\",\n  \"required\": [\"order_id\"]\n}")}}},
		{AdapterID: "adp_policy", Adapter: noop, Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: noop, Capabilities: map[string]gateway.Capability{"issue_refund": {ArgsSchema: json.RawMessage(`{"type":"object"}`)}}},
	}
	h := contextostest.New(t, planner, [][]byte{fixture.SupportPack()}, &contextostest.Options{Runtime: contextos.Options{Adapters: regs}})
	req, _ := runcontext.DecodeInvokeRequest(fixture.Invoke())
	rc, _ := runcontext.DecodeRunContext(fixture.RunContext())
	rc.SafetyMode = runcontext.Network // the destructive refund is withheld
	h.Invoke(req, rc)
	reqs := planner.Requests()
	if len(reqs) == 0 {
		t.Fatal("the planner was not asked")
	}
	tools := reqs[0].Tools()
	got, _ := json.Marshal(tools)
	want := `[{"name":"adp_orders.lookup","kind":"read","risk_level":"read_only","approval_mode":"read_only","args_schema":{"type":"object","required":["order_id"]}},` +
		`{"name":"adp_policy.eval","kind":"read","risk_level":"read_only","approval_mode":"read_only"}]`
	if string(got) != want {
		t.Fatalf("tools\n got %s\nwant %s", got, want)
	}
	tools[0].ArgsSchema[0] = 'X'
	if again := reqs[0].Tools(); again[0].ArgsSchema[0] != '{' {
		t.Error("a caller's change reached the runtime's schema")
	}
	if (&contextos.PlanRequest{}).Tools() != nil || (*contextos.PlanRequest)(nil).Tools() != nil {
		t.Error("a request without a compiled context lists tools")
	}
	// A request a host builds itself lists the manifest without schemas.
	own := &contextos.PlanRequest{Compiled: reqs[0].Compiled}
	if ts := own.Tools(); len(ts) != 2 || ts[0].ArgsSchema != nil {
		t.Errorf("host-built request: %+v", ts)
	}
}
