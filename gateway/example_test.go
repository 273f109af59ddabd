package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	fixtures "github.com/contextos/contextos/internal/fixture"
	"log"
	"time"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// A host registers an in-process adapter, binds a run of the support pack
// to the gateway, and calls through it: a surfaced lookup runs, a
// capability the compiled context does not surface is rejected before any
// adapter runs, and both are in the run's hash-chained transcript.
func Example() {
	ctx := context.Background()
	read := func(name string, v any) {
		b, err := fixtures.Bytes(name)
		if err != nil {
			log.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			log.Fatal(err)
		}
	}
	var p pack.Pack
	var req runcontext.InvokeRequest
	var rc runcontext.RunContext
	read("ctxpack.support-1.0.0.json", &p)
	read("invoke.support-refund.json", &req)
	read("run-context.support.json", &rc)

	orders := gateway.AdapterFunc(func(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
		id, _ := call.Envelope.Args["order_id"].(string)
		return &gateway.Outcome{Output: map[string]any{"order_id": id, "status": "delivered"}}, nil
	})
	transcript := gateway.NewMemoryTranscript()
	now := time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)
	gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: orders, Capabilities: map[string]gateway.Capability{
		"lookup": {ArgsSchema: json.RawMessage(`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"}}}`)},
	}}}, &gateway.Options{Transcript: transcript, Now: func() time.Time { return now }})
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

	lookup, err := run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_orders.lookup", Step: gateway.StepID{Turn: 0, Index: 0}, Args: map[string]any{"order_id": "ord_881"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("lookup:", lookup.Status, lookup.Output["status"])

	cancel, err := run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_orders.cancel", Step: gateway.StepID{Turn: 0, Index: 1}, Args: map[string]any{"order_id": "ord_881"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("cancel:", cancel.Status, cancel.Error.Code)

	entries, err := transcript.RunEntries(ctx, rc.RunID)
	if err != nil {
		log.Fatal(err)
	}
	chain, err := gateway.VerifyTranscript(entries)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.Seq, e.Kind)
	}
	fmt.Println("chain verifies:", chain == run.ChainState().Hash)
	// Output:
	// lookup: ok delivered
	// cancel: rejected unsupported_tool
	// 0 call
	// 1 result
	// 2 result
	// chain verifies: true
}

// An approval log that binds each use to its action lets the same action
// present an approval again (a takeover going on with a call its dead
// runtime had approved) and refuses it to any other.
func ExampleMemoryApprovalLog_ConsumeAction() {
	ctx := context.Background()
	log := gateway.NewMemoryApprovalLog()
	fmt.Println(log.ConsumeAction(ctx, "tenant_1/apr_1", "ik_refund"))
	fmt.Println(log.ConsumeAction(ctx, "tenant_1/apr_1", "ik_refund"))
	fmt.Println(errors.Is(log.ConsumeAction(ctx, "tenant_1/apr_1", "ik_other"), gateway.ErrApprovalUsed))
	// Output:
	// <nil>
	// <nil>
	// true
}
