package facet

import (
	"testing"

	"github.com/contextos/contextos/agent"
)

func TestEncodings(t *testing.T) {
	name, code := "Bash<&>", int64(2)
	ev := ToolEvent(agent.EventToolResult, Tool{Kind: "tool_use", Phase: "complete", Status: "completed", ExitCode: &code, ToolName: &name, Bytes: Bytes{Stdout: 3}})
	const want = `{"schema":"agent_api.tools.structured.v1","tool":{"backend_item_id":null,"thread_id":null,"turn_id":null,"kind":"tool_use","phase":"complete","status":"completed","exit_code":2,"bytes":{"stdout":3,"stderr":0,"diff":0,"result":0},"tool_name":"Bash<&>","tool_use_id":null}}`
	if ev.Kind != agent.EventToolResult || ev.Channel != "tool" || string(ev.Data) != want {
		t.Fatalf("ToolEvent = %+v\n data %s", ev, ev.Data)
	}
	if got := string(SessionData("s-1")); got != `{"schema":"agent_api.session.handle.v1","session":{"id":"s-1"}}` {
		t.Fatalf("SessionData = %s", got)
	}
}
