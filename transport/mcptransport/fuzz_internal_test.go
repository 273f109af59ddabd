package mcptransport

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzOutput: whatever tool result a server sends (decoded by the SDK),
// its output has a JSON form and is the same every time; its blocks are
// in the result's order, each typed, none with both data and a digest,
// and an embedded text is valid UTF-8 within the inline bound.
func FuzzOutput(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"hi"}]}`,
		`{"content":[{"type":"image","data":"AAEC","mimeType":"image/png"},{"type":"audio","data":"AAEC","mimeType":"audio/wav"}]}`,
		`{"content":[{"type":"resource_link","uri":"file:///a","name":"a","size":12}],"structuredContent":{"content":1}}`,
		`{"content":[{"type":"resource","resource":{"uri":"note://1","text":"card 4111 1111 1111 1111 ` + "\xff" + `"}}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"blob://1","blob":"AAECAwQFBgcICQ=="}}],"structuredContent":[1,2]}`,
	} {
		f.Add([]byte(s), 8)
	}
	f.Fuzz(func(t *testing.T, data []byte, maxInline int) {
		var res mcp.CallToolResult
		if json.Unmarshal(data, &res) != nil {
			return
		}
		if maxInline > 1<<20 {
			maxInline = 1 << 20
		}
		clean := func(s string) string { return s }
		out := output(&res, maxInline, clean)
		a, err := json.Marshal(out)
		if err != nil {
			t.Fatalf("no JSON form: %v", err)
		}
		if b, _ := json.Marshal(output(&res, maxInline, clean)); !bytes.Equal(a, b) {
			t.Fatalf("two conversions differ:\n%s\n%s", a, b)
		}
		blocks, _ := out[OutputContent].([]any)
		last := -1.0
		for _, x := range blocks {
			b := x.(map[string]any)
			i, _ := b["index"].(float64)
			if i <= last || int(i) >= len(res.Content) {
				t.Fatalf("block index %v after %v (of %d)", i, last, len(res.Content))
			}
			last = i
			if b["type"] == nil || b["type"] == "text" {
				t.Fatalf("block %v", b)
			}
			if b["data"] != nil && b["sha256"] != nil {
				t.Fatalf("data and a digest: %v", b)
			}
			if s, ok := b["text"].(string); ok && b["truncated"] == true && (len(s) > max(maxInline, 0) || !utf8.ValidString(s)) {
				t.Fatalf("clipped text of %d bytes (bound %d)", len(s), maxInline)
			}
		}
	})
}
