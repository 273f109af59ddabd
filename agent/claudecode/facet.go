package claudecode

import (
	"bytes"
	"encoding/json"

	"github.com/contextos/contextos/agent"
)

// completionData is a completion's Data, and (Schema and Session only) the
// session handle facet of a Status event. Field order is the JSON order.
type completionData struct {
	Schema     string      `json:"schema,omitempty"`
	Session    *sessionRef `json:"session,omitempty"`
	Usage      *usage      `json:"usage,omitempty"`
	CostUSD    *float64    `json:"cost_usd,omitempty"`
	NumTurns   *int64      `json:"num_turns,omitempty"`
	DurationMS *int64      `json:"duration_ms,omitempty"`
}

type sessionRef struct {
	ID string `json:"id"`
}

// usage is the result line's token usage: the four counts, 0 when absent,
// and cached_input_tokens (the cache reads) under the name agent.Usage
// reads.
type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CachedInputTokens        int64 `json:"cached_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// toolFacet is the agent_api.tools.structured.v1 facet: metadata only,
// never a tool's input or output.
type toolFacet struct {
	Schema string   `json:"schema"`
	Tool   toolInfo `json:"tool"`
}

type toolInfo struct {
	BackendItemID *string   `json:"backend_item_id"`
	ThreadID      *string   `json:"thread_id"`
	TurnID        *string   `json:"turn_id"`
	Kind          string    `json:"kind"`
	Phase         string    `json:"phase"`
	Status        string    `json:"status"`
	ExitCode      *int      `json:"exit_code"`
	Bytes         toolBytes `json:"bytes"`
	ToolName      *string   `json:"tool_name"`
	ToolUseID     *string   `json:"tool_use_id"`
}

type toolBytes struct {
	Stdout int64 `json:"stdout"`
	Stderr int64 `json:"stderr"`
	Diff   int64 `json:"diff"`
	Result int64 `json:"result"`
}

// toolEvent is a ToolCall or ToolResult event with its tools facet; an
// empty name or id is null.
func toolEvent(kind agent.EventKind, toolKind, phase, stat, name, id string, b toolBytes) agent.Event {
	f := toolFacet{Schema: toolFacetSchema, Tool: toolInfo{
		Kind: toolKind, Phase: phase, Status: stat, Bytes: b,
		ToolName: nilIfEmpty(name), ToolUseID: nilIfEmpty(id),
	}}
	return agent.Event{Kind: kind, Channel: "tool", Data: mustJSON(f)}
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// mustJSON encodes v compactly without HTML escaping (the bounds measure
// that form). v is one of this package's own types, which always encode.
func mustJSON(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("claudecode: cannot encode " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
