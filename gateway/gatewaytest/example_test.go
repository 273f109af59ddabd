package gatewaytest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// A host unit-tests its refund agent's tool use with the fakes: scripted
// adapters stand in for the order and payment services, a Recorder keeps
// every envelope, and the real gateway enforces the canonical pack.
func Example() {
	ctx := context.Background()
	read := func(b []byte, v any) {
		if err := json.Unmarshal(b, v); err != nil {
			log.Fatal(err)
		}
	}
	var p pack.Pack
	var req runcontext.InvokeRequest
	var rc runcontext.RunContext
	read(fixture.SupportPack(), &p)
	read(fixture.Invoke(), &req)
	read(fixture.RunContext(), &rc)

	orders := gatewaytest.NewScriptedAdapter()
	orders.On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "total_inr": 4200})
	payments := gatewaytest.NewScriptedAdapter()
	payments.On("issue_refund").FailRetryable("payment gateway busy").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
	recorder := &gatewaytest.Recorder{}
	now := time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)
	gw, err := gateway.New([]gateway.Registration{
		{AdapterID: "adp_orders", Adapter: orders, Capabilities: map[string]gateway.Capability{"lookup": {}}},
		{AdapterID: "adp_payments", Adapter: payments, Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
	}, &gateway.Options{Transcript: recorder, Now: func() time.Time { return now }, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		log.Fatal(err)
	}
	prepared, err := compiler.Prepare([]compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: &p}}, &compiler.Options{Ontologies: []string{"ont.support@1.0.0"}})
	if err != nil {
		log.Fatal(err)
	}
	cc, err := prepared.Compile(ctx, &req, &rc)
	if err != nil {
		log.Fatal(err)
	}
	run, err := gw.NewRun(gateway.RunConfig{Prepared: prepared, Compiled: cc, Request: &req, RunContext: &rc, Meter: runcontext.NewMeter(rc.RunBudget, now)}, nil)
	if err != nil {
		log.Fatal(err)
	}

	lookup, err := run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_881"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("lookup:", lookup.Status)

	refund := gateway.CallRequest{CapabilityID: "adp_payments.issue_refund", Step: gateway.StepID{Index: 1}, Args: map[string]any{"order_id": "ord_881", "amount_inr": 4200, "currency": "INR"}}
	paused, err := run.Call(ctx, refund)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("refund:", paused.Status, paused.Approval.GateID, "by", paused.Approval.ApproverRole)

	refund.Approval = &gateway.Approval{ApprovalID: "apr_1", GateID: paused.Approval.GateID, ActionDigest: paused.Approval.ActionDigest,
		Approver: "user_finance_lead_77", ApproverRole: "finance_lead", DecidedAt: now}
	done, err := run.Call(ctx, refund)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("approved refund:", done.Status, done.Mutations, "attempts:", done.Metadata.Attempts)
	fmt.Println("payment service calls:", payments.CallCount("issue_refund"), "transcript entries:", len(recorder.Entries()))
	// Output:
	// lookup: ok
	// refund: paused GATE_FINANCE_APPROVAL by finance_lead
	// approved refund: completed [refund:txn_q9] attempts: 2
	// payment service calls: 2 transcript entries: 5
}
