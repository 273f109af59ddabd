package mcptransport_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/mcptransport"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const card = "4111 1111 1111 1111"

// media is deterministic binary data of n bytes.
func media(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*131 + i/7)
	}
	return b
}

// mediaServer's lookup answers with every kind of content block the MCP
// tool result defines. The order id picks the case: ord_881 every kind
// (an embedded text resource and a small blob holding a card number, a
// blob larger than the inline bound); ord_mid a 30 KB image (kept inline);
// ord_big a 300 KB image (kept as its digest); ord_struct structured
// content that already has a "content" member, beside an image.
func mediaServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "media", Version: "v1"}, nil)
	size := int64(48213)
	s.AddTool(&mcp.Tool{Name: "lookup", InputSchema: map[string]any{"type": "object", "required": []any{"order_id"},
		"properties": map[string]any{"order_id": map[string]any{"type": "string"}}, "additionalProperties": false}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				OrderID string `json:"order_id"`
			}
			json.Unmarshal(req.Params.Arguments, &in)
			switch in.OrderID {
			case "ord_mid":
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: media(30 << 10)}}}, nil
			case "ord_big":
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the scan"}, &mcp.ImageContent{MIMEType: "image/png", Data: media(300 << 10)}}}, nil
			case "ord_struct":
				return &mcp.CallToolResult{StructuredContent: map[string]any{"content": "the tool's own member", "status": "delivered"},
					Content: []mcp.Content{&mcp.TextContent{Text: `{"content":"the tool's own member","status":"delivered"}`}, &mcp.ImageContent{MIMEType: "image/gif", Data: media(16)}}}, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "order ord_881: delivered"},
				&mcp.ImageContent{MIMEType: "image/png", Data: media(64)},
				&mcp.AudioContent{MIMEType: "audio/wav", Data: media(24)},
				&mcp.TextContent{Text: "receipt attached"},
				&mcp.ResourceLink{URI: "file:///receipts/ord_881.pdf", Name: "receipt", Title: "Receipt", MIMEType: "application/pdf", Size: &size},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "note://ord_881", MIMEType: "text/plain", Text: "customer card " + card + " on file"}},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "blob://card", MIMEType: "application/octet-stream", Blob: []byte(strings.ReplaceAll(card, " ", ""))}},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "blob://scan", MIMEType: "image/tiff", Blob: media(100 << 10)}},
			}}, nil
		})
	return s
}

// Non-text content blocks reach the governed result as typed blocks, in
// the server's order, with their media type, size, uri and data (or, past
// the inline bound, a digest in its place); the gateway's redaction
// reaches into them (an embedded text resource and a blob carrying a card
// number) and the output is the same on every run (golden file).
func TestContentBlocksThroughGateway(t *testing.T) {
	var outs [2][]byte
	for i := range outs {
		a := memAdapter(t, mediaServer(), transport.Endpoint{}, nil)
		res, err := governed(t, a, nil).Call(bg, lookupCall())
		if err != nil || res.Status != gateway.StatusOK {
			t.Fatalf("%s %+v %v", res.Status, res.Error, err)
		}
		if !res.Metadata.RedactionApplied {
			t.Error("redaction_applied is false")
		}
		outs[i], _ = json.MarshalIndent(res.Output, "", "  ")
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatalf("two runs differ:\n%s\n%s", outs[0], outs[1])
	}
	out := string(outs[0])
	for _, leak := range []string{card, strings.ReplaceAll(card, " ", ""), "NDExMTExMTExMTExMTExMQ"} {
		if strings.Contains(out, leak) {
			t.Errorf("the output holds %q", leak)
		}
	}
	golden(t, "lookup-content.golden.json", outs[0])
}

// The inline bound and the run's max_payload_bytes: a 300 KB image is kept
// as its size and digest; a 30 KB image is kept inline, and refused with
// the gateway's typed payload error when the run allows less; a smaller
// inline bound keeps the digest instead, and the call passes.
func TestContentBlockBounds(t *testing.T) {
	t.Parallel()
	small := func(rc *runcontext.RunContext, _ *runcontext.InvokeRequest) { rc.RunBudget.MaxPayloadBytes = 16 << 10 }
	tests := []struct {
		name      string
		order     string
		edit      func(*runcontext.RunContext, *runcontext.InvokeRequest)
		maxInline int
		code      string // the result's error code ("" when it succeeds)
		want      map[string]any
	}{
		{name: "past the inline bound: digest", order: "ord_big",
			want: map[string]any{"index": 1.0, "type": "image", "mime_type": "image/png", "size": float64(300 << 10), "sha256": "sha256:" + sha(media(300<<10))}},
		{name: "inline", order: "ord_mid", want: map[string]any{"index": 0.0, "type": "image", "mime_type": "image/png", "size": float64(30 << 10), "data": b64(media(30 << 10))}},
		{name: "inline, larger than max_payload_bytes", order: "ord_mid", edit: small, code: gateway.CodeExecutionFailed},
		{name: "a smaller inline bound under max_payload_bytes", order: "ord_mid", edit: small, maxInline: 8 << 10,
			want: map[string]any{"index": 0.0, "type": "image", "mime_type": "image/png", "size": float64(30 << 10), "sha256": "sha256:" + sha(media(30<<10))}},
		{name: "no data inline", order: "ord_mid", maxInline: -1,
			want: map[string]any{"index": 0.0, "type": "image", "mime_type": "image/png", "size": float64(30 << 10), "sha256": "sha256:" + sha(media(30<<10))}},
		{name: "structured content with its own content member", order: "ord_struct",
			want: map[string]any{"index": 1.0, "type": "image", "mime_type": "image/gif", "size": 16.0, "data": b64(media(16))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := memAdapter(t, mediaServer(), transport.Endpoint{}, &mcptransport.Options{MaxInlineBytes: tc.maxInline})
			call := lookupCall()
			call.Args["order_id"] = tc.order
			res, err := governed(t, a, tc.edit).Call(bg, call)
			if err != nil {
				t.Fatal(err)
			}
			if tc.code != "" {
				if res.Status != gateway.StatusFailed || res.Error == nil || res.Error.Code != tc.code || res.Error.Details["max_payload_bytes"] == nil {
					t.Fatalf("%s %+v, want failed %s naming max_payload_bytes", res.Status, res.Error, tc.code)
				}
				return
			}
			if res.Status != gateway.StatusOK {
				t.Fatalf("%s %+v", res.Status, res.Error)
			}
			blocks, _ := res.Output[mcptransport.OutputContent].([]any)
			if len(blocks) != 1 {
				t.Fatalf("output %v", res.Output)
			}
			got, _ := json.Marshal(blocks[0])
			want, _ := json.Marshal(tc.want)
			if !bytes.Equal(got, want) {
				t.Errorf("block\n %.300s\nwant\n %.300s", got, want)
			}
			if tc.order == "ord_struct" {
				inner, _ := res.Output["result"].(map[string]any)
				if inner["content"] != "the tool's own member" || inner["status"] != "delivered" {
					t.Errorf("the tool's structured content was not kept whole under result: %v", res.Output)
				}
			}
		})
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(bytes.TrimSpace(want), bytes.TrimSpace(got)) {
		t.Errorf("%s differs (run with -update to accept):\n%s", name, got)
	}
}

// A card number inside a tool's binary content, whatever the bytes around
// it (UTF-8 text, a byte order mark, a PNG text chunk, UTF-16 text), never
// reaches the governed output or the transcript: the block keeps its type,
// media type and size and is marked redacted, with neither data nor a
// digest. Binary data with nothing in it is kept inline.
func TestContentBlocksCardInBinaryData(t *testing.T) {
	t.Parallel()
	const pan = "4111111111111111"
	utf16le := []byte{0xff, 0xfe}
	for _, c := range "Karte " + pan {
		utf16le = append(utf16le, byte(c), 0)
	}
	payloads := map[string][]byte{
		"utf-8 text":      []byte("Zahlung für Müller, Karte " + pan + ", gültig"),
		"byte order mark": []byte("\xef\xbb\xbfcard " + pan),
		"png text chunk":  append([]byte{0x89, 'P', 'N', 'G', 0, 0}, []byte("tEXtcard "+pan)...),
		"utf-16 text":     utf16le,
	}
	for name, data := range payloads {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := mcp.NewServer(&mcp.Implementation{Name: "media", Version: "v1"}, nil)
			s.AddTool(&mcp.Tool{Name: "lookup", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}}}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{
						&mcp.TextContent{Text: "ok"},
						&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "blob://r", MIMEType: "text/plain", Blob: data}},
						&mcp.ImageContent{MIMEType: "image/png", Data: data},
						&mcp.AudioContent{MIMEType: "audio/wav", Data: media(24)},
					}}, nil
				})
			a := memAdapter(t, s, transport.Endpoint{}, nil)
			run, mt := lookupRun(t, a)
			res, err := run.Call(bg, lookupCall())
			if err != nil || res.Status != gateway.StatusOK {
				t.Fatalf("%v %+v %v", res.Status, res.Error, err)
			}
			blocks, _ := res.Output[mcptransport.OutputContent].([]any)
			if len(blocks) != 3 {
				t.Fatalf("output %v", res.Output)
			}
			for _, b := range blocks[:2] {
				m := b.(map[string]any)
				if m["data"] != nil || m["sha256"] != nil || m["redacted"] != true || m["size"] != float64(len(data)) {
					t.Errorf("block %v: want neither data nor digest, redacted, its size", m)
				}
			}
			if m := blocks[2].(map[string]any); m["data"] != b64(media(24)) || m["redacted"] != nil {
				t.Errorf("a block with nothing sensitive: %v", m)
			}
			entries, err := mt.RunEntries(bg, res.RunID)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := json.Marshal(res.Output)
			tr, _ := json.Marshal(entries)
			for _, surface := range [][]byte{out, tr} {
				for _, leak := range []string{pan, b64(data)[:20], strings.TrimRight(base64.URLEncoding.EncodeToString(data), "=")[:20]} {
					if bytes.Contains(surface, []byte(leak)) {
						t.Errorf("%.300s holds %q", surface, leak)
					}
				}
			}
		})
	}
}
