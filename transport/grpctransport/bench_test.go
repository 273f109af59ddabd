package grpctransport_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/grpctransport"
	"github.com/contextos/contextos/transport/internal/kit"
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

// BenchmarkPlainGRPC: the adapter's request (the same envelope, built
// the same way) as a plain unary call on the same kind of connection to
// the same server, encoded and decoded with encoding/json (the reply into
// a struct of its members): the floor the adapter's overhead is measured
// from. The package's codec is not used on the client side: its request
// encoding and reply reading are the code measured against this floor.
func BenchmarkPlainGRPC(b *testing.B) {
	url := serveTools(b, okTool)
	conn, err := grpc.NewClient(strings.TrimPrefix(url, "grpc://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	req := kit.RequestFor(call(1, map[string]any{"order_id": "ord_881"}), transport.TransportGRPC, &transport.Endpoint{Transport: transport.TransportGRPC})
	b.ReportAllocs()
	for b.Loop() {
		var resp plainReply
		if err := conn.Invoke(bg, grpctransport.FullMethod, req, &resp, grpc.ForceCodec(plainJSON{})); err != nil {
			b.Fatal(err)
		}
		if resp.Status != "ok" {
			b.Fatalf("%+v", resp)
		}
	}
}

// plainJSON is encoding/json as a gRPC codec, under the content subtype
// the tool service serves ("json").
type plainJSON struct{}

func (plainJSON) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (plainJSON) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
func (plainJSON) Name() string                       { return grpctransport.CodecName }

// plainReply is a contract reply's members, as a plain client declares
// them.
type plainReply struct {
	ToolContractVersion string         `json:"tool_contract_version"`
	RequestID           string         `json:"request_id"`
	Status              string         `json:"status"`
	Output              map[string]any `json:"output"`
	ResultEncoding      string         `json:"result_encoding"`
	Usage               *struct {
		DurationMS int64 `json:"duration_ms"`
		Attempt    int   `json:"attempt"`
	} `json:"usage"`
	Trace *struct {
		TraceID string `json:"trace_id"`
		SpanID  string `json:"span_id"`
	} `json:"trace"`
	Error *struct {
		Code      string         `json:"code"`
		Reason    string         `json:"reason"`
		Retryable bool           `json:"retryable"`
		Message   string         `json:"message"`
		Details   map[string]any `json:"details"`
	} `json:"error"`
}
