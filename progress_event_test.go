package contextos_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
)

// A tool's progress reports (gateway.ReportProgress, as the MCP transport
// relays an MCP server's notifications) are progress events of a Stream,
// between the call's tool_call and tool_result events, in order; Invoke
// runs the same call without a listener.
func TestStreamSurfacesToolProgress(t *testing.T) {
	var listened []bool
	orders := gateway.AdapterFunc(func(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
		listened = append(listened, gateway.ProgressWanted(ctx))
		gateway.ReportProgress(ctx, call, gateway.Progress{Progress: 1, Total: 2, Message: "reading the order"})
		gateway.ReportProgress(ctx, call, gateway.Progress{Progress: 2, Total: 2})
		return &gateway.Outcome{Output: map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}}, nil
	})
	policy, payments := gatewaytest.NewScriptedAdapter(), gatewaytest.NewScriptedAdapter()
	policy.On("eval").ReturnOutput(map[string]any{"eligible": true})
	regs := []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: orders, Capabilities: map[string]gateway.Capability{"lookup": {}}},
		{AdapterID: "adp_policy", Adapter: policy, Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: payments, Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
	}
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), deniedPlan(), lookupPlan(), deniedPlan()), &contextostest.Options{Runtime: contextos.Options{Adapters: regs}})
	req, rc := refundRequest(t, 1200, false)
	var kinds []contextos.EventKind
	var reports []gateway.Progress
	for e, err := range h.Runtime.Stream(context.Background(), req, rc) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == contextos.EventProgress && e.Progress != nil {
			reports = append(reports, *e.Progress)
		}
		kinds = append(kinds, e.Kind)
	}
	want := []contextos.EventKind{contextos.EventCompiled, contextos.EventPlan, contextos.EventVerdict,
		contextos.EventToolCall, contextos.EventProgress, contextos.EventProgress, contextos.EventToolResult}
	if len(kinds) < len(want) {
		t.Fatalf("events %v", kinds)
	}
	for i, k := range want {
		if kinds[i] != k {
			t.Fatalf("events %v, want them to start %v", kinds, want)
		}
	}
	if len(reports) != 2 || reports[0].CapabilityID != "adp_orders.lookup" || reports[0].Message != "reading the order" || reports[1].Progress != 2 || reports[0].ToolCallID == "" {
		t.Errorf("reports %+v", reports)
	}
	req, rc = refundRequest(t, 1200, false)
	rc.RunID = "run_b1b2c3d4e5f60718"
	h.Invoke(req, rc)
	if len(listened) != 2 || !listened[0] || listened[1] {
		t.Errorf("the adapter saw a listener %v, want under Stream only", listened)
	}
}
