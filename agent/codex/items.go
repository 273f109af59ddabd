package codex

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/internal/facet"
)

// phase is where an item event is in the item's life.
type phase int

const (
	phaseStart phase = iota
	phaseDelta
	phaseComplete
	phaseFail
)

var phaseNames = [...]string{"start", "delta", "complete", "fail"}

// toolKinds are the item types mapped to tool events.
var toolKinds = map[string]bool{
	"command_execution": true,
	"file_change":       true,
	"mcp_tool_call":     true,
	"web_search":        true,
	"collab_tool_call":  true,
}

// Field aliases of a tool item's outputs (nested, flat and legacy names).
var (
	stdoutKeys = []string{"stdout", "aggregated_output", "output"}
	stderrKeys = []string{"stderr", "error_output", "err"}
	diffKeys   = []string{"diff", "patch"}
	resultKeys = []string{"result", "results"}
)

// item maps an item event (already flattened).
func (m *mapper) item(o object, ph phase, threadID, turnID string) ([]agent.Event, *fieldError) {
	itemType, hasType, ferr := o.str("item_type")
	if ferr != nil {
		return nil, ferr
	}
	itemID, hasID, ferr := o.str("item_id")
	if ferr != nil {
		return nil, ferr
	}
	if !hasID {
		if itemID, _, ferr = o.str("id"); ferr != nil {
			return nil, ferr
		}
	}
	content, ferr := o.obj("content")
	if ferr != nil {
		return nil, ferr
	}
	// sources are where an item's fields are looked up, first wins.
	sources := []object{content, o}
	var deltaText string
	var hasDeltaText bool
	if ph == phaseDelta {
		if raw, ok := o["delta"]; ok && len(raw) > 0 && raw[0] == '"' {
			hasDeltaText = json.Unmarshal(raw, &deltaText) == nil
		} else if d, ferr := o.obj("delta"); ferr != nil {
			return nil, ferr
		} else if d != nil {
			sources = []object{d, content, o}
		}
	}
	if threadID == "" {
		threadID = m.thread
	}
	if turnID == "" {
		turnID = m.turn
	}

	if ph == phaseFail {
		if toolKinds[itemType] {
			return []agent.Event{facet.ToolEvent(agent.EventToolResult, facet.Tool{
				BackendItemID: idOrNil(itemID), ThreadID: idOrNil(threadID), TurnID: idOrNil(turnID),
				Kind: itemType, Phase: phaseNames[ph], Status: "failed",
			})}, nil
		}
		msg := "item failed"
		if e, ferr := o.obj("error"); ferr == nil && e != nil {
			if s, ok, _ := e.str("message"); ok && strings.TrimSpace(s) != "" {
				msg = s
			}
		}
		return []agent.Event{errorEvent(msg)}, nil
	}
	if !hasType {
		return nil, &fieldError{"missing string field `item_type` (or `item.type`)"}
	}

	switch {
	case itemType == "agent_message" || itemType == "reasoning":
		text, ok := deltaText, hasDeltaText
		if !ok {
			text, ok = lookupString(sources, "text")
		}
		if !ok {
			return nil, &fieldError{"missing string field `text`"}
		}
		return []agent.Event{{Kind: agent.EventTextOutput, Channel: "assistant", Text: text}}, nil
	case toolKinds[itemType]:
		f := facet.Tool{
			BackendItemID: idOrNil(itemID), ThreadID: idOrNil(threadID), TurnID: idOrNil(turnID),
			Kind: itemType, Phase: phaseNames[ph], Status: "running",
			ExitCode: lookupInt(sources, "exit_code"),
		}
		f.Bytes = facet.Bytes{
			Stdout: int64(lookupLen(sources, stdoutKeys)),
			Stderr: int64(lookupLen(sources, stderrKeys)),
			Diff:   int64(lookupLen(sources, diffKeys)),
			Result: int64(lookupJSONLen(sources, resultKeys)),
		}
		kind := agent.EventToolCall
		if ph == phaseComplete {
			kind, f.Status = agent.EventToolResult, "completed"
		}
		return []agent.Event{facet.ToolEvent(kind, f)}, nil
	case itemType == "todo_list":
		return []agent.Event{status("")}, nil
	case itemType == "error":
		msg, ok := lookupString(sources, "message")
		if !ok {
			return nil, &fieldError{"missing string field `message`"}
		}
		return []agent.Event{errorEvent(msg)}, nil
	}
	return []agent.Event{{Kind: agent.EventUnknown}}, nil
}

// idOrNil is a facet id: nil when blank or longer than maxIDBytes.
func idOrNil(s string) *string {
	if s == "" || len(s) > maxIDBytes {
		return nil
	}
	return &s
}

// lookupString returns the first string field key in sources.
func lookupString(sources []object, key string) (string, bool) {
	for _, src := range sources {
		if s, ok, ferr := src.str(key); ok && ferr == nil {
			return s, true
		}
	}
	return "", false
}

// lookupLen is the byte length of the first string among keys in sources
// (0 when none).
func lookupLen(sources []object, keys []string) int {
	for _, src := range sources {
		for _, k := range keys {
			if s, ok, ferr := src.str(k); ok && ferr == nil {
				return len(s)
			}
		}
	}
	return 0
}

// lookupJSONLen is the compact JSON length of the first non-null value
// among keys in sources (0 when none).
func lookupJSONLen(sources []object, keys []string) int {
	for _, src := range sources {
		for _, k := range keys {
			if raw, ok := src[k]; ok && !isNull(raw) {
				var buf bytes.Buffer
				if json.Compact(&buf, raw) == nil {
					return buf.Len()
				}
			}
		}
	}
	return 0
}

// lookupInt returns the first integer field key in sources (nil when
// none).
func lookupInt(sources []object, key string) *int64 {
	for _, src := range sources {
		if raw, ok := src[key]; ok && !isNull(raw) {
			var n int64
			if json.Unmarshal(raw, &n) == nil {
				return &n
			}
		}
	}
	return nil
}
