package mcptransport_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
)

type refundIn struct {
	OrderID   string  `json:"order_id"`
	AmountINR float64 `json:"amount_inr"`
	Currency  string  `json:"currency"`
}

type refundOut struct {
	TransactionID string `json:"transaction_id"`
}

// received is what a test server's tool saw of each call.
type received struct {
	mu    sync.Mutex
	args  []string
	metas []map[string]any
}

func (r *received) add(req *mcp.CallToolRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.args = append(r.args, string(req.Params.Arguments))
	r.metas = append(r.metas, map[string]any(req.Params.Meta))
}

func (r *received) calls() ([]string, []map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.args), slices.Clone(r.metas)
}

// paymentsServer is an MCP server built the go-sdk way: typed tools, whose
// input schemas the SDK infers from Go structs (additionalProperties
// false) and enforces on every call.
func paymentsServer(seen *received) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "v1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "issue_refund", Description: "refund an order"}, func(_ context.Context, req *mcp.CallToolRequest, in refundIn) (*mcp.CallToolResult, refundOut, error) {
		seen.add(req)
		return nil, refundOut{TransactionID: "txn_" + in.OrderID}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "lookup"}, func(_ context.Context, req *mcp.CallToolRequest, in struct {
		OrderID string `json:"order_id"`
	}) (*mcp.CallToolResult, map[string]any, error) {
		seen.add(req)
		return nil, map[string]any{"order_id": in.OrderID, "status": "delivered"}, nil
	})
	return s
}

// A governed write to a go-sdk tool with a strict input schema runs: the
// derived idempotency key rides in _meta and in the result's mutations,
// not in the arguments (the schema does not declare it, and the server
// would refuse it); a retry within the run is deduplicated by the gateway
// and never reaches the server again.
func TestGovernedWriteToStrictTool(t *testing.T) {
	seen := &received{}
	a := memAdapter(t, paymentsServer(seen), transport.Endpoint{}, nil)
	caps, err := a.Capabilities()
	if err != nil {
		t.Fatal(err)
	}
	if s := string(caps["issue_refund"].ArgsSchema); !strings.Contains(s, `"additionalProperties":false`) || strings.Contains(s, "idempotency_key") {
		t.Fatalf("the go-sdk schema is not the strict one this test is about: %s", s)
	}
	run := governed(t, a, nil)
	res, err := run.Call(bg, refundCall())
	if err != nil || res.Status != gateway.StatusCompleted {
		t.Fatalf("%s %+v %v", res.Status, res.Error, err)
	}
	key := res.Metadata.IdempotencyKey
	args, metas := seen.calls()
	if len(args) != 1 {
		t.Fatalf("the server saw %d calls", len(args))
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(args[0]), &got); err != nil {
		t.Fatal(err)
	}
	if _, has := got["idempotency_key"]; has || got["order_id"] != "ord_881" || len(got) != 3 {
		t.Errorf("arguments %s: want the caller's three, without the gateway's key", args[0])
	}
	if !strings.HasPrefix(key, "ik_") || metas[0]["contextos/idempotency_key"] != key || metas[0]["contextos/request_id"] != res.ToolCallID {
		t.Errorf("_meta %v, want the derived key %s", metas[0], key)
	}
	if !slices.Contains(res.Mutations, "adp_payments.issue_refund:"+key) || res.Output["transaction_id"] != "txn_ord_881" {
		t.Errorf("mutations %v output %v", res.Mutations, res.Output)
	}
	again, err := run.Call(bg, refundCall())
	if err != nil || !again.Metadata.Duplicate || again.Metadata.IdempotencyKey != key {
		t.Errorf("retry: duplicate %v key %s, %v", again.Metadata.Duplicate, again.Metadata.IdempotencyKey, err)
	}
	if args, _ := seen.calls(); len(args) != 1 {
		t.Errorf("the server saw %d calls, want the first only", len(args))
	}
	// A read carries no key anywhere.
	res, err = run.Call(bg, lookupCall())
	if err != nil || res.Status != gateway.StatusOK || res.Output["status"] != "delivered" {
		t.Fatalf("lookup: %s %+v %v", res.Status, res.Error, err)
	}
	if _, metas := seen.calls(); metas[1]["contextos/idempotency_key"] != nil {
		t.Errorf("a read's _meta has a key: %v", metas[1])
	}
}
