package mcptransport_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/mcptransport"
)

// TestEverythingServer runs the MCP reference server
// @modelcontextprotocol/server-everything over stdio (through npx, so it
// needs node and the npm registry) and makes governed calls to it through
// the gateway: its echo tool (a read with text content) and its tiny-image
// tool (an image block, kept as a typed block). Optional: it runs only
// with CONTEXTOS_MCP_NPX=1 and npx on the PATH.
func TestEverythingServer(t *testing.T) {
	if os.Getenv("CONTEXTOS_MCP_NPX") != "1" {
		t.Skip("set CONTEXTOS_MCP_NPX=1 to run the reference MCP server through npx")
	}
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Skip("npx is not on the PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, err := mcptransport.Connect(ctx, transport.Endpoint{Transport: transport.TransportMCP, Timeout: time.Minute,
		Command: []string{npx, "-y", "@modelcontextprotocol/server-everything", "stdio"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	tools := a.Tools()
	t.Logf("tools: %s", strings.Join(tools, ", "))
	pick := func(names ...string) string {
		for _, n := range names {
			if slices.Contains(tools, n) {
				return n
			}
		}
		t.Fatalf("the server has none of %v", names)
		return ""
	}
	echo, image := pick("echo"), pick("get-tiny-image", "getTinyImage")
	links, ref, long := pick("get-resource-links"), pick("get-resource-reference"), pick("trigger-long-running-operation")
	names := []string{echo, image, links, ref, long}
	caps, err := a.Capabilities()
	if err != nil {
		t.Fatal(err)
	}

	gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: a,
		Capabilities: map[string]gateway.Capability{echo: caps[echo], image: caps[image], links: caps[links], ref: caps[ref], long: caps[long]}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The support pack with the server's tools as read-only
	// capabilities of adp_orders.
	run, err := supportRunOf(gw, func(p *pack.Pack) {
		for i := range p.ToolingLayer.AdapterRegistry {
			if r := &p.ToolingLayer.AdapterRegistry[i]; r.AdapterID == "adp_orders" {
				r.Capabilities = append(r.Capabilities, names...)
			}
		}
		for _, c := range names {
			p.ToolingLayer.Permissions = append(p.ToolingLayer.Permissions, pack.Permission{PermissionID: "p_orders_" + strings.ReplaceAll(c, "-", "_"), AdapterID: "adp_orders", Capability: c, Allow: true})
		}
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_orders." + echo, Step: gateway.StepID{Index: 1}, Args: map[string]any{"message": "hello from contextos"}})
	if err != nil || res.Status != gateway.StatusOK {
		t.Fatalf("%s: %s %+v %v", echo, res.Status, res.Error, err)
	}
	if r, _ := res.Output["result"].(string); !strings.Contains(r, "hello from contextos") {
		t.Errorf("%s output %v", echo, res.Output)
	}
	res, err = run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_orders." + image, Step: gateway.StepID{Index: 2}, Args: map[string]any{}})
	if err != nil || res.Status != gateway.StatusOK {
		t.Fatalf("%s: %s %+v %v", image, res.Status, res.Error, err)
	}
	blocks, _ := res.Output[mcptransport.OutputContent].([]any)
	var images int
	for _, b := range blocks {
		m := b.(map[string]any)
		if m["type"] == "image" {
			images++
			if m["mime_type"] != "image/png" || m["size"].(float64) <= 0 || m["data"] == nil && m["sha256"] == nil {
				t.Errorf("image block %v", m)
			}
		}
	}
	if images != 1 {
		t.Errorf("%d image blocks in %v", images, res.Output)
	}
	t.Logf("%s output: result %q, %d content blocks", image, res.Output["result"], len(blocks))

	// Resource links and an embedded resource, as typed blocks.
	kinds := func(res *gateway.ToolResultEnvelope) map[string]int {
		n := map[string]int{}
		blocks, _ := res.Output[mcptransport.OutputContent].([]any)
		for _, b := range blocks {
			m := b.(map[string]any)
			n[m["type"].(string)]++
			if m["type"] != "image" && m["uri"] == nil {
				t.Errorf("a %s block without a uri: %v", m["type"], m)
			}
		}
		return n
	}
	res, err = run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_orders." + links, Step: gateway.StepID{Index: 3}, Args: map[string]any{"count": 2}})
	if err != nil || res.Status != gateway.StatusOK || kinds(res)["resource_link"] != 2 {
		t.Errorf("%s: %s %+v %v: %v", links, res.Status, res.Error, err, res.Output)
	}
	res, err = run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_orders." + ref, Step: gateway.StepID{Index: 4}, Args: map[string]any{"resourceType": "Text", "resourceId": 1}})
	if err != nil || res.Status != gateway.StatusOK || kinds(res)["resource"] != 1 {
		t.Errorf("%s: %s %+v %v: %v", ref, res.Status, res.Error, err, res.Output)
	}
	t.Logf("%s output: %v", ref, res.Output)

	// A long-running operation reports progress, relayed to the listener.
	var reports []gateway.Progress
	pctx := gateway.WithProgress(ctx, func(p gateway.Progress) { reports = append(reports, p) })
	res, err = run.Call(pctx, gateway.CallRequest{CapabilityID: "adp_orders." + long, Step: gateway.StepID{Index: 5}, Args: map[string]any{"duration": 2, "steps": 4}})
	if err != nil || res.Status != gateway.StatusOK {
		t.Fatalf("%s: %s %+v %v", long, res.Status, res.Error, err)
	}
	if len(reports) == 0 || reports[0].CapabilityID != "adp_orders."+long {
		t.Errorf("progress reports %+v", reports)
	}
	t.Logf("%s: %d progress reports, the last %+v", long, len(reports), reports[len(reports)-1])
}
