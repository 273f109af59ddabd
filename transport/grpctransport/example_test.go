package grpctransport_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/grpctransport"
)

// A host serves its refund tool over gRPC (Register, here on an
// in-process server on loopback), points a grpc adapter at it and
// registers the adapter with the gateway. Each attempt of a governed call
// carries the tool call id as request_id, the attempt and the idempotency
// key; a refusal from the tool comes back as a *gateway.ToolError.
func ExampleNew() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	server := grpc.NewServer()
	grpctransport.Register(server, transport.ExecutorFunc(func(_ context.Context, req *transport.Request) *transport.Response {
		if amount, _ := req.Input["amount_inr"].(float64); amount > 5000 {
			return &transport.Response{Status: transport.StatusDenied, Error: &transport.Failure{Code: gateway.CodePermissionDenied, Message: "above the refund limit"}}
		}
		return &transport.Response{Status: transport.StatusOK, Output: map[string]any{
			"transaction_id": "txn_q9", "request_id": req.RequestID, "attempt": req.Attempt, "idempotency_key": req.IdempotencyKey}}
	}))
	served := make(chan error, 1)
	go func() { served <- server.Serve(lis) }()

	payments, err := grpctransport.New(transport.Endpoint{
		Transport: transport.TransportGRPC, URL: "grpc://" + lis.Addr().String(), AllowPrivate: true,
		Timeout: 2 * time.Second, Retry: transport.Retry{MaxAttempts: 2, Backoff: 10 * time.Millisecond},
	}, &grpctransport.Options{Plaintext: true}) // grpcs:// (TLS) unless the host allows plaintext
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
	call := func(amount float64) *gateway.Call {
		return &gateway.Call{Envelope: &gateway.ToolCallEnvelope{ToolCallID: "tool_0123456789abcdef", RunID: "run_1",
			CapabilityID: "adp_payments.issue_refund", Args: map[string]any{"order_id": "ord_881", "amount_inr": amount}},
			Capability: "issue_refund", Attempt: 1, IdempotencyKey: "ik_77aa"}
	}
	out, err := payments.Call(context.Background(), call(1200))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Output["transaction_id"], out.Output["request_id"], out.Output["attempt"], out.Output["idempotency_key"])

	_, err = payments.Call(context.Background(), call(9000))
	var te *gateway.ToolError
	if !errors.As(err, &te) {
		log.Fatalf("a refusal is a *gateway.ToolError, got %v", err)
	}
	fmt.Println(te.Code, te.Retryable)

	if err := payments.Close(); err != nil {
		log.Fatal(err)
	}
	server.Stop()
	if err := <-served; err != nil {
		log.Fatal(err)
	}
	// Output:
	// txn_q9 tool_0123456789abcdef 1 ik_77aa
	// permission_denied false
}
