package transport_test

import (
	"context"
	"encoding/json"
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

// A tool's output.result that is not a string travels as its JSON text,
// marked by result_encoding, so a peer that types output as
// {"result": string} decodes the reply; our clients read the value back.
// A string result travels, and reads back, as itself.
func ExampleResponse_MarshalJSON() {
	resp := &transport.Response{ToolContractVersion: transport.ContractVersion, RequestID: "req-123", Status: transport.StatusOK,
		Output: map[string]any{"result": map[string]any{"amount_inr": 4200, "refund": "issued"}}}
	wire, err := json.Marshal(resp)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(wire))

	back, err := transport.DecodeResponse(wire)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(back.Output["result"])

	text, _ := transport.DecodeResponse([]byte(`{"status":"ok","output":{"result":"{\"amount_inr\":4200}"}}`))
	fmt.Printf("%q\n", text.Output["result"])
	// Output:
	// {"tool_contract_version":"v1","request_id":"req-123","status":"ok","output":{"result":"{\"amount_inr\":4200,\"refund\":\"issued\"}"},"result_encoding":"json"}
	// map[amount_inr:4200 refund:issued]
	// "{\"amount_inr\":4200}"
}

// An upstream tool known by its own name (web_search) serves capability
// adp_search.web_search: the endpoint names it, and the adapter sends that
// name as tool.name; results keep naming the capability.
func ExampleToolInfo() {
	tool := httptest.NewServer(transport.NewHandler(transport.ExecutorFunc(func(ctx context.Context, req *transport.Request) *transport.Response {
		return &transport.Response{Status: transport.StatusOK, Output: map[string]any{"result": "served by " + req.Tool.Name}}
	})))
	defer tool.Close()

	search, err := transport.NewAdapter(transport.Endpoint{Transport: transport.TransportExternal, URL: tool.URL, AllowPrivate: true,
		Tools: map[string]transport.ToolInfo{"web_search": {Name: "web_search", Capabilities: []string{"network.read"}}}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	out, err := search.Call(context.Background(), &gateway.Call{
		Envelope:   &gateway.ToolCallEnvelope{ToolCallID: "tool_0123456789abcdef", RunID: "run_1", CapabilityID: "adp_search.web_search", Args: map[string]any{"query": "refund policy"}},
		Capability: "web_search", Attempt: 1, IdempotencyKey: "ik_1",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Output["result"], out.Mutations)
	// Output:
	// served by web_search [adp_search.web_search:ik_1]
}
