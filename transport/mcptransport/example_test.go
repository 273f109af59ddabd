package mcptransport_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/mcptransport"
)

// A host connects to an MCP server in memory (here a go-sdk server in the
// same process; any mcp.Transport works the same), registers the server's
// tools with the gateway, and makes governed calls through a run of its
// pack: a read, and a write to a tool whose go-sdk schema is strict. The
// write's idempotency key travels in _meta, not in the arguments.
func ExampleConnect_inMemory() {
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "v1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "lookup"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		OrderID string `json:"order_id"`
	}) (*mcp.CallToolResult, map[string]any, error) {
		return nil, map[string]any{"order_id": in.OrderID, "status": "delivered"}, nil
	})
	mcp.AddTool(server, &mcp.Tool{Name: "issue_refund"}, func(_ context.Context, req *mcp.CallToolRequest, in refundIn) (*mcp.CallToolResult, map[string]any, error) {
		key, _ := req.Params.Meta[mcptransport.MetaIdempotencyKey].(string)
		return nil, map[string]any{"transaction_id": "txn_" + in.OrderID, "key": key, "arguments": string(req.Params.Arguments)}, nil
	})
	serverEnd, clientEnd := mcp.NewInMemoryTransports()
	session, err := server.Connect(ctx, serverEnd, nil)
	if err != nil {
		log.Fatal(err)
	}

	tools, err := mcptransport.Connect(ctx, transport.Endpoint{Transport: transport.TransportMCP, Timeout: 10 * time.Second},
		&mcptransport.Options{Transport: clientEnd})
	if err != nil {
		log.Fatal(err)
	}
	caps, err := tools.Capabilities()
	if err != nil {
		log.Fatal(err)
	}
	refund := caps["issue_refund"]
	refund.Scopes = []string{"payments.refund"}
	gw, err := gateway.New([]gateway.Registration{
		{AdapterID: "adp_orders", Adapter: tools, Capabilities: map[string]gateway.Capability{"lookup": caps["lookup"]}},
		{AdapterID: "adp_payments", Adapter: tools, Capabilities: map[string]gateway.Capability{"issue_refund": refund}},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	// A run of the support pack (internal/fixture), compiled for a refund request.
	run, err := supportRun(gw, nil)
	if err != nil {
		log.Fatal(err)
	}

	res, err := run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_orders.lookup", Step: gateway.StepID{Index: 1}, Args: map[string]any{"order_id": "ord_881"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Output["status"])
	res, err = run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_payments.issue_refund", Step: gateway.StepID{Index: 2},
		Args: map[string]any{"order_id": "ord_881", "amount_inr": 1200, "currency": "INR"}})
	if err != nil {
		log.Fatal(err)
	}
	// The governed call's result: the gateway's status, the tool's output,
	// and the call's metadata (attempts, idempotency key).
	fmt.Println(res.Status, res.Output["transaction_id"], "attempts:", res.Metadata.Attempts)
	fmt.Println("key in _meta:", res.Output["key"] == res.Metadata.IdempotencyKey,
		"in the arguments:", strings.Contains(res.Output["arguments"].(string), "idempotency_key"))

	// Closing the adapter ends the session; the server side then ends too.
	if err := tools.Close(); err != nil {
		log.Fatal(err)
	}
	if err := session.Wait(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// ok delivered
	// completed txn_ord_881 attempts: 1
	// key in _meta: true in the arguments: false
}
