package contextos_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/replay"
)

// A run's call envelopes carry arg_schema_ref, protocol and version; its
// packet replays equal on a host whose adapters speak other protocols (the
// replay takes them from the packet), and stays stable: the recorded ones.
func TestCallEnvelopeMetadataReplays(t *testing.T) {
	ctx := context.Background()
	scripted := map[string]*gatewaytest.ScriptedAdapter{"adp_orders": gatewaytest.NewScriptedAdapter(), "adp_policy": gatewaytest.NewScriptedAdapter(), "adp_payments": gatewaytest.NewScriptedAdapter()}
	var o contextostest.Options
	o.Runtime.Adapters = []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: scripted["adp_orders"], Protocol: "http", Version: "v1", Capabilities: map[string]gateway.Capability{"lookup": {}}},
		{AdapterID: "adp_policy", Adapter: scripted["adp_policy"], Protocol: "grpc", Version: "v1", Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: scripted["adp_payments"], Protocol: "webhook-callback", Version: "v1",
			Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
	}
	scripted["adp_orders"].On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200})
	scripted["adp_policy"].On("eval").ReturnOutput(map[string]any{"eligible": true})
	scripted["adp_payments"].On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &o)
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	want := map[string][2]string{"adp_orders.lookup": {"http", "v1"}, "adp_policy.eval": {"grpc", "v1"}, "adp_payments.issue_refund": {"webhook-callback", "v1"}}
	calls := h.Transcript.Calls()
	if len(calls) != 3 {
		t.Fatalf("%d calls", len(calls))
	}
	for _, c := range calls {
		w := want[c.CapabilityID]
		if c.Metadata["protocol"] != w[0] || c.Metadata["version"] != w[1] || c.Metadata["arg_schema_ref"] == nil {
			t.Errorf("%s metadata = %v, want protocol %s version %s and an arg_schema_ref", c.CapabilityID, c.Metadata, w[0], w[1])
		}
	}
	p, err := h.Replays.Get(ctx, res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	// Another host, whose adapters are in process, replays the packet.
	other := harness(t, contextostest.NewPlanner(), nil)
	out, err := other.Runtime.Replay(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != replay.ReplayEqual {
		t.Errorf("replay = %s %+v", out.Status, out.Diffs)
	}
	contextostest.AssertReplayEqual(t, h.Replay(res))

	// A host whose refund schema is another one is a mismatch at that call:
	// its argument checks are not the recorded ones.
	var so contextostest.Options
	so.Runtime.Adapters = []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: scripted["adp_orders"], Capabilities: map[string]gateway.Capability{"lookup": {}}},
		{AdapterID: "adp_policy", Adapter: scripted["adp_policy"], Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: scripted["adp_payments"],
			Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}, ArgSchemaRef: "schema://adp_payments.issue_refund.v4"}}},
	}
	changed := bareHarness(t, contextostest.NewPlanner(), &so)
	out, err = changed.Runtime.Replay(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != replay.ReplayMismatch || len(out.Diffs) == 0 || out.Diffs[0].Kind != replay.DiffToolTranscript || out.Diffs[0].Step != 4 {
		t.Errorf("replay with another schema = %s %+v, want a mismatch at the refund call (step 4)", out.Status, out.Diffs)
	}
}

// A run whose adapter registered an argument schema (an MCP server's tool
// list, as `contextos run --endpoints` registers it) replays equal on a
// host that registers the adapter without one (as `contextos replay`
// does): the replay takes the arg_schema_ref the recorded envelopes carry
// for a capability the host gives no schema, and leaves the host's own
// registrations as they were.
func TestReplayTakesRecordedSchemaRef(t *testing.T) {
	ctx := context.Background()
	orders, pol, pay := gatewaytest.NewScriptedAdapter(), gatewaytest.NewScriptedAdapter(), gatewaytest.NewScriptedAdapter()
	orders.On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200})
	pol.On("eval").ReturnOutput(map[string]any{"eligible": true})
	pay.On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
	schema := json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}}}`)
	var o contextostest.Options
	o.Runtime.Adapters = []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: orders, Protocol: "mcp", Version: "2025-06-18", Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: schema}}},
		{AdapterID: "adp_policy", Adapter: pol, Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: pay, Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
	}
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &o)
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	p, err := h.Replays.Get(ctx, res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	// The replaying host registers every adapter with no schema.
	var ro contextostest.Options
	ro.Runtime.Adapters = []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: orders, Capabilities: map[string]gateway.Capability{"lookup": {}}},
		{AdapterID: "adp_policy", Adapter: pol, Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: pay, Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
	}
	for _, opts := range []*contextostest.Options{nil, &ro} {
		hb := bareHarness(t, contextostest.NewPlanner(), opts)
		out, err := hb.Runtime.Replay(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != replay.ReplayEqual {
			t.Errorf("offline replay = %s: %+v", out.Status, out.Diffs)
		}
	}
	if c := ro.Runtime.Adapters[0].Capabilities["lookup"]; c.ArgSchemaRef != "" {
		t.Errorf("the replay changed the host's registration: %+v", c)
	}
}
