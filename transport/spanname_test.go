package transport_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/contextos/contextos/transport"
)

// TestSpanNamesAreToolNames: each attempt's span is named "tool_contract"
// and the tool.name its request carried, whichever capability (declared
// with a wire name or not) and however many distinct tools one adapter
// calls, concurrently, on their first calls and on later ones; and an
// Execute of a request whose tool name has surrounding space names its
// span with the name as given.
func TestSpanNamesAreToolNames(t *testing.T) {
	ts := newToolServer(t, func(_ int, r *http.Request, body []byte) (int, string) {
		var req transport.Request
		json.Unmarshal(body, &req)
		return 200, `{"status":"ok","request_id":"` + req.RequestID + `","output":{"tool":"` + req.Tool.Name + `"}}`
	})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tools := map[string]transport.ToolInfo{}
	const capabilities = 150
	for i := 0; i < capabilities; i += 3 {
		tools[fmt.Sprintf("cap_%d", i)] = transport.ToolInfo{Name: fmt.Sprintf("wire_tool_%d", i)}
	}
	a := newAdapter(t, transport.Endpoint{Transport: "external", URL: ts.URL, Tools: tools}, &transport.Options{TracerProvider: tp})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := range capabilities {
				c := call(1)
				c.Capability = fmt.Sprintf("cap_%d", (i+w*7)%capabilities)
				env := *c.Envelope
				env.CapabilityID = "adp_many." + c.Capability
				c.Envelope = &env
				if _, err := a.Call(bg, c); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	resp := a.Execute(bg, &transport.Request{RequestID: "tool_0123456789abcdef", Tool: transport.Tool{Name: "  spaced.tool "}})
	if resp.Status != transport.StatusOK {
		t.Fatalf("%+v", resp)
	}
	spans := rec.Ended()
	if len(spans) != 3*capabilities+1 {
		t.Fatalf("%d spans", len(spans))
	}
	names := map[string]int{}
	for _, s := range spans {
		tool := ""
		for _, kv := range s.Attributes() {
			if kv.Key == "tool.name" {
				tool = kv.Value.AsString()
			}
		}
		if want := "tool_contract " + tool; s.Name() != want {
			if tool != "spaced.tool" || s.Name() != "tool_contract   spaced.tool " {
				t.Fatalf("span %q of tool %q", s.Name(), tool)
			}
		}
		names[s.Name()]++
	}
	for i := range capabilities {
		want := fmt.Sprintf("tool_contract adp_many.cap_%d", i)
		if i%3 == 0 {
			want = fmt.Sprintf("tool_contract wire_tool_%d", i)
		}
		if names[want] != 3 {
			t.Fatalf("%d spans named %q", names[want], want)
		}
	}
}
