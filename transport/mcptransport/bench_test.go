package mcptransport_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkAdapterCall: one gateway call through the MCP adapter to the
// test server (a stdio subprocess) answering at once.
func BenchmarkAdapterCall(b *testing.B) {
	a := stdioAdapter(b)
	c := call("lookup", map[string]any{"order_id": "ord_881"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Call(bg, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainMCP: the same tool call on a plain go-sdk client session
// to the same kind of subprocess: the floor.
func BenchmarkPlainMCP(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), serverEnv+"=1")
	session, err := mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "v1"}, nil).Connect(bg, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer session.Close()
	params := &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "ord_881"}}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := session.CallTool(bg, params); err != nil || res.IsError {
			b.Fatal(res, err)
		}
	}
}
