package mcptransport

import (
	ebin "encoding/binary"
	"testing"
	"unicode/utf16"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func utf16LE(s string) []byte {
	b := []byte{0xff, 0xfe}
	for _, r := range utf16.Encode([]rune(s)) {
		b = ebin.LittleEndian.AppendUint16(b, r)
	}
	return b
}

// A small blob holding a card number whose groups are split by bytes a
// reader sees as spaces (a Latin-1 no-break space, a unit separator, in
// UTF-16, in fullwidth digits) is dropped: no data, no digest, redacted.
func TestBlobCardSplitByBinaryDropped(t *testing.T) {
	blobs := map[string][]byte{
		"latin-1 nbsp":       []byte("Kartennummer 4111\xa01111\xa01111\xa01111 g\xfcltig"),
		"utf-16le nbsp":      utf16LE("card 4111\u00a01111\u00a01111\u00a01111"),
		"utf-16le fullwidth": utf16LE("card ４１１１１１１１１１１１１１１１"),
		"record fields":      []byte("\x01\x004111\x1f1111\x1f1111\x1f1111\x00"),
	}
	for name, data := range blobs {
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: data}}}
		out := output(res, 1<<16, func(s string) string { return s })
		b := out[OutputContent].([]any)[0].(map[string]any)
		if _, ok := b["data"]; ok {
			t.Errorf("%s: blob holding a card kept inline", name)
		}
		if _, ok := b["sha256"]; ok {
			t.Errorf("%s: blob holding a card kept as a digest", name)
		}
		if b["redacted"] != true {
			t.Errorf("%s: redacted = %v, want true", name, b["redacted"])
		}
	}
}
