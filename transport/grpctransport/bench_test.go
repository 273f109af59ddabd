package grpctransport_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/grpctransport"
)

var okTool = transport.ExecutorFunc(func(_ context.Context, _ *transport.Request) *transport.Response {
	return &transport.Response{Status: "ok", Output: map[string]any{"ok": true}}
})

// BenchmarkAdapterCall: one gateway call through the gRPC adapter to a
// loopback server that answers at once.
func BenchmarkAdapterCall(b *testing.B) {
	a := newAdapter(b, serveTools(b, okTool), nil, nil)
	c := call(1, map[string]any{"order_id": "ord_881"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Call(bg, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainGRPC: the same request as a plain unary call on the same
// kind of connection: the floor the adapter's overhead is measured from.
func BenchmarkPlainGRPC(b *testing.B) {
	url := serveTools(b, okTool)
	conn, err := grpc.NewClient(strings.TrimPrefix(url, "grpc://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	req := &transport.Request{ToolContractVersion: "v1", RequestID: "tool_0123456789abcdef", Tool: transport.Tool{Name: "adp_orders.lookup"}, Input: map[string]any{"order_id": "ord_881"}, Attempt: 1}
	b.ReportAllocs()
	for b.Loop() {
		var resp transport.Response
		if err := conn.Invoke(bg, grpctransport.FullMethod, req, &resp, grpc.CallContentSubtype("json")); err != nil {
			b.Fatal(err)
		}
	}
}
