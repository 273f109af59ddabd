package schemas_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/decision/decisiontest"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/schemas"
)

// Every envelope a gateway writes, call and result, in every status it
// produces here, validates against tool-envelope.v1; records validate
// against decision-record.v1.
func TestEnvelopesAndRecordsValidate(t *testing.T) {
	ctx := context.Background()
	read := func(n string) []byte { return fixture.Read(t, n) }
	p, _ := pack.Decode(read("ctxpack.support-1.0.0.json"))
	req, _ := runcontext.DecodeInvokeRequest(read("invoke.support-refund.json"))
	rc, _ := runcontext.DecodeRunContext(read("run-context.support.json"))
	prepared, err := compiler.Prepare([]compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: p}}, &compiler.Options{Ontologies: []string{"ont.support@1.0.0"}})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := prepared.Compile(ctx, req, rc)
	if err != nil {
		t.Fatal(err)
	}
	ad := gatewaytest.NewScriptedAdapter()
	ad.On("lookup").ReturnOutput(map[string]any{"ok": true})
	ad.On("issue_refund").Fail("declined")
	rec := &gatewaytest.Recorder{}
	now := time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)
	gw, _ := gateway.New([]gateway.Registration{
		{AdapterID: "adp_orders", Adapter: ad, Capabilities: map[string]gateway.Capability{"lookup": {}}},
		{AdapterID: "adp_payments", Adapter: ad, Capabilities: map[string]gateway.Capability{"issue_refund": {}}},
	}, &gateway.Options{Transcript: rec, Now: func() time.Time { return now }})
	run, err := gw.NewRun(gateway.RunConfig{Prepared: prepared, Compiled: cc, Request: req, RunContext: rc, Meter: runcontext.NewMeter(rc.RunBudget, now)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var results []*gateway.ToolResultEnvelope
	for _, c := range []gateway.CallRequest{
		{CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_881"}},
		{CapabilityID: "adp_crm.profile", Args: map[string]any{}},
		{CapabilityID: "adp_payments.issue_refund", Args: map[string]any{"order_id": "ord_881", "amount_inr": 4200, "currency": "INR"}},
		{CapabilityID: "adp_payments.issue_refund", Args: map[string]any{"order_id": "ord_881", "amount_inr": 60000, "currency": "INR"}},
	} {
		r, err := run.Call(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
	}
	statuses := map[gateway.Status]bool{}
	for _, r := range results {
		statuses[r.Status] = true
		b, _ := json.Marshal(r)
		if err := schemas.Validate("tool-envelope", b); err != nil {
			t.Errorf("%s result: %v", r.Status, err)
		}
	}
	if len(statuses) < 3 {
		t.Errorf("want several statuses, got %v", statuses)
	}
	for _, c := range rec.Calls() {
		b, _ := json.Marshal(c)
		if err := schemas.Validate("tool-envelope", b); err != nil {
			t.Errorf("call envelope: %v", err)
		}
	}
	store := decision.NewMemoryStore()
	stored, err := store.Append(ctx, decisiontest.Sample("dr_1", decision.Decided))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(stored)
	if err := schemas.Validate("decision-record", b); err != nil {
		t.Errorf("record: %v", err)
	}
}
