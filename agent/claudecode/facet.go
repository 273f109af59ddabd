package claudecode

import (
	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/internal/facet"
)

// completionData is a completion's Data, and (Schema and Session only) the
// session handle facet of a Status event. Field order is the JSON order.
type completionData struct {
	Schema     string         `json:"schema,omitempty"`
	Session    *facet.Session `json:"session,omitempty"`
	Usage      *usage         `json:"usage,omitempty"`
	CostUSD    *float64       `json:"cost_usd,omitempty"`
	NumTurns   *int64         `json:"num_turns,omitempty"`
	DurationMS *int64         `json:"duration_ms,omitempty"`
}

// usage is the result line's token usage in the shape agent.Usage reads.
// Claude reports input_tokens without the prompt-cache reads and writes,
// which are input tokens too (and billed): input_tokens here is all three
// (claude's input_tokens, cache_read_input_tokens and
// cache_creation_input_tokens, saturating), so every input token is
// charged; cached_input_tokens is the cache reads; the two cache counts
// are kept as claude reported them. Absent counts are 0.
type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CachedInputTokens        int64 `json:"cached_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// toolEvent is a ToolCall or ToolResult event with its tools facet; an
// empty name or id is null.
func toolEvent(kind agent.EventKind, toolKind, phase, stat, name, id string, b facet.Bytes) agent.Event {
	return facet.ToolEvent(kind, facet.Tool{
		Kind: toolKind, Phase: phase, Status: stat, Bytes: b,
		ToolName: nilIfEmpty(name), ToolUseID: nilIfEmpty(id),
	})
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
