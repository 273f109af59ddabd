package transport_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
)

// A host points the payments adapter at a Tool Contract v1 endpoint (here
// a loopback server built with NewHandler) and registers it with the
// gateway: the endpoint's timeout and retry policy become the
// capability's.
func ExampleNewAdapter() {
	tool := httptest.NewServer(transport.NewHandler(transport.ExecutorFunc(func(ctx context.Context, req *transport.Request) *transport.Response {
		return &transport.Response{Status: transport.StatusOK, Output: map[string]any{"transaction_id": "txn_q9", "idempotency_key": req.IdempotencyKey}}
	})))
	defer tool.Close()

	payments, err := transport.NewAdapter(transport.Endpoint{
		Transport: transport.TransportExternal, URL: tool.URL, AllowPrivate: true,
		Auth:    &transport.Auth{Profile: transport.ProfileBearer, SecretRef: "payments-token"},
		Timeout: 2 * time.Second, Retry: transport.Retry{MaxAttempts: 3, Backoff: 10 * time.Millisecond, Jitter: transport.JitterEqual},
	}, &transport.Options{Secrets: transport.MapSecrets{"payments-token": "s3cr3t"}})
	if err != nil {
		log.Fatal(err)
	}
	refund := payments.Capability()
	refund.Scopes = []string{"payments.refund"}
	if _, err := gateway.New([]gateway.Registration{{AdapterID: "adp_payments", Adapter: payments,
		Capabilities: map[string]gateway.Capability{"issue_refund": refund}}}, nil); err != nil {
		log.Fatal(err)
	}

	// What the gateway does on each attempt of a governed call:
	out, err := payments.Call(context.Background(), &gateway.Call{
		Envelope: &gateway.ToolCallEnvelope{ToolCallID: "tool_0123456789abcdef", RunID: "run_1", CapabilityID: "adp_payments.issue_refund",
			Args: map[string]any{"order_id": "ord_881", "amount_inr": 4200}},
		Capability: "issue_refund", Attempt: 1, IdempotencyKey: "ik_77aa",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Output["transaction_id"], out.Output["idempotency_key"], out.Mutations)
	fmt.Println("attempts:", refund.MaxAttempts, "wait after attempt 1:", refund.Backoff("tool_0123456789abcdef", 1) <= 10*time.Millisecond)
	// Output:
	// txn_q9 ik_77aa [adp_payments.issue_refund:ik_77aa]
	// attempts: 3 wait after attempt 1: true
}
