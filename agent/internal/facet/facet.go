// Package facet holds the structured payloads the built-in backends put in
// event and completion data: the tools facet (agent_api.tools.structured.v1,
// metadata only, never a tool's input or output) and the session handle
// facet (agent_api.session.handle.v1), and the one JSON encoding they use
// (compact, no HTML escaping: the form the event bounds measure).
package facet

import (
	"bytes"
	"encoding/json"

	"github.com/contextos/contextos/agent"
)

// Tool is the tools facet's tool object.
type Tool struct {
	BackendItemID *string `json:"backend_item_id"`
	ThreadID      *string `json:"thread_id"`
	TurnID        *string `json:"turn_id"`
	Kind          string  `json:"kind"`
	Phase         string  `json:"phase"`
	Status        string  `json:"status"`
	ExitCode      *int64  `json:"exit_code"`
	Bytes         Bytes   `json:"bytes"`
	ToolName      *string `json:"tool_name"`
	ToolUseID     *string `json:"tool_use_id"`
}

// Bytes are the sizes of a tool's streams, 0 when unknown.
type Bytes struct {
	Stdout int64 `json:"stdout"`
	Stderr int64 `json:"stderr"`
	Diff   int64 `json:"diff"`
	Result int64 `json:"result"`
}

// ToolFacet is the whole tools facet.
type ToolFacet struct {
	Schema string `json:"schema"`
	Tool   Tool   `json:"tool"`
}

// ToolEvent is a tool_call or tool_result event on channel "tool"
// carrying t's facet.
func ToolEvent(kind agent.EventKind, t Tool) agent.Event {
	return agent.Event{Kind: kind, Channel: "tool", Data: JSON(ToolFacet{agent.CapToolsStructured, t})}
}

// Session is the session handle facet's session object.
type Session struct {
	ID string `json:"id"`
}

// SessionData is the session handle facet of id.
func SessionData(id string) json.RawMessage {
	return JSON(struct {
		Schema  string  `json:"schema"`
		Session Session `json:"session"`
	}{agent.CapSessionHandle, Session{id}})
}

// JSON encodes v compactly without HTML escaping. v is one of the
// backends' own fixed types, which always encode.
func JSON(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("facet: cannot encode: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
