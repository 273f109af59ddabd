package agent

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// EventKind classifies an event.
type EventKind string

// The six event kinds. A backend event that cannot be classified is
// EventUnknown.
const (
	EventTextOutput EventKind = "text_output"
	EventToolCall   EventKind = "tool_call"
	EventToolResult EventKind = "tool_result"
	EventStatus     EventKind = "status"
	EventError      EventKind = "error"
	EventUnknown    EventKind = "unknown"
)

// Event is one event of a run. Payload rules, which the run enforces on
// every event it forwards: a text_output event has Text and no Message; a
// status event has no Text (Message is usual); an error event has a safe
// Message and no Text; tool_call, tool_result and unknown events have no
// Text. Data may be on any kind: compact JSON of at most MaxDataBytes
// (else the oversize marker), never a raw backend line.
type Event struct {
	// AgentKind is the backend's kind; the run sets it.
	AgentKind Kind      `json:"agent_kind"`
	Kind      EventKind `json:"kind"`
	// Channel is an optional stream name (assistant, tool, status, error,
	// …), at most MaxChannelBytes (a longer one is dropped).
	Channel string `json:"channel,omitempty"`
	// Text is the payload of a text_output event, at most MaxTextBytes (a
	// longer text is split into several events, in order).
	Text string `json:"text,omitempty"`
	// Message is the payload of status and error events, at most
	// MaxMessageBytes (a longer one is truncated with TruncatedSuffix).
	Message string `json:"message,omitempty"`
	// Data is structured, bounded JSON (facets, counts).
	Data json.RawMessage `json:"data,omitempty"`
}

// The event bounds, in bytes of UTF-8.
const (
	MaxChannelBytes = 128
	MaxTextBytes    = 65536
	MaxMessageBytes = 4096
	// MaxDataBytes bounds an event's or a completion's Data as compact
	// JSON without HTML escaping.
	MaxDataBytes = 65536
	// MaxFinalTextBytes bounds a completion's FinalText (truncated with
	// TruncatedSuffix).
	MaxFinalTextBytes = 65536
)

// TruncatedSuffix ends a truncated message or final text.
const TruncatedSuffix = "…(truncated)"

// oversizeData replaces data over MaxDataBytes.
var oversizeData = json.RawMessage(`{"dropped":{"reason":"oversize"}}`)

// invalidData replaces data that is not JSON.
var invalidData = json.RawMessage(`{"dropped":{"reason":"invalid"}}`)

// truncate bounds s to max bytes at a character boundary, ending it with
// TruncatedSuffix when it was cut; when max is not larger than the suffix,
// the result is "…" cut to max.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	if max <= len(TruncatedSuffix) {
		return cutRunes("…", max)
	}
	return cutRunes(s, max-len(TruncatedSuffix)) + TruncatedSuffix
}

// cutRunes returns the longest prefix of s of at most max bytes that ends
// at a character boundary.
func cutRunes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}

// splitText splits s into pieces of at most max bytes at character
// boundaries; their concatenation is s.
func splitText(s string, max int) []string {
	if len(s) <= max {
		return []string{s}
	}
	var out []string
	for len(s) > max {
		head := cutRunes(s, max)
		if head == "" { // a single character longer than max cannot happen for max ≥ 4
			head = s[:max]
		}
		out = append(out, head)
		s = s[len(head):]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// boundData compacts raw (no HTML escaping, invalid UTF-8 in strings
// replaced by U+FFFD) and replaces it with the oversize marker when it
// exceeds MaxDataBytes, or with the invalid marker when it is not JSON.
func boundData(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return invalidData
	}
	out := buf.Bytes()
	if !utf8.Valid(out) {
		// Invalid bytes can only sit inside strings: U+FFFD keeps it JSON.
		out = bytes.ToValidUTF8(out, []byte("\uFFFD"))
	}
	// The bound is on the value as JSON serialises it (escapes decoded,
	// compact, no HTML escaping, U+2028/U+2029 escaped), not on how the
	// backend happened to spell it: re-encode when the spelling may
	// differ (an escape in a string) or the bytes are over the bound.
	if len(out) > MaxDataBytes || bytes.IndexByte(out, '\\') >= 0 || bytes.Contains(out, lineSep) || bytes.Contains(out, paraSep) {
		re, err := reencode(out)
		if err != nil {
			return invalidData
		}
		out = re
	}
	if len(out) > MaxDataBytes {
		return oversizeData
	}
	if string(out) == "null" {
		return nil
	}
	return json.RawMessage(out)
}

var lineSep, paraSep = []byte("\u2028"), []byte("\u2029")

// reencode decodes compact JSON (numbers kept exactly) and encodes it
// again without HTML escaping.
func reencode(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return marshalNoEscape(v)
}

// bound applies the payload rules and bounds to ev, splitting an oversize
// text into several events.
func bound(kind Kind, ev Event) []Event {
	ev.AgentKind = kind
	// Secrets are redacted before any bound cuts a string: a cut never
	// leaves part of a secret behind.
	ev.Channel, ev.Message, ev.Text = redactText(ev.Channel), redactText(ev.Message), redactText(ev.Text)
	switch ev.Kind {
	case EventTextOutput, EventToolCall, EventToolResult, EventStatus, EventError, EventUnknown:
	default:
		ev.Kind = EventUnknown
	}
	if len(ev.Channel) > MaxChannelBytes || !utf8.ValidString(ev.Channel) {
		ev.Channel = ""
	}
	ev.Data = redactData(boundData(ev.Data))
	switch ev.Kind {
	case EventTextOutput:
		ev.Message = ""
	case EventError:
		ev.Text = ""
		if strings.TrimSpace(ev.Message) == "" {
			ev.Message = "error"
		}
	default:
		ev.Text = ""
	}
	if ev.Message != "" {
		ev.Message = clipSafe(ev.Message)
	}
	if ev.Kind != EventTextOutput {
		return []Event{ev}
	}
	text := strings.ToValidUTF8(ev.Text, "\uFFFD")
	if len(text) <= MaxTextBytes {
		ev.Text = text
		return []Event{ev}
	}
	parts := splitText(text, MaxTextBytes)
	out := make([]Event, len(parts))
	for i, p := range parts {
		out[i] = ev
		out[i].Text = p
	}
	return out
}

// MarshalJSON writes a text_output event's text even when it is empty, and
// does not escape HTML. (json.Marshal escapes <, > and & in whatever a
// MarshalJSON returns; encode with a json.Encoder and SetEscapeHTML(false)
// to keep the form the bounds measure.)
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	if e.Kind != EventTextOutput || e.Text != "" {
		return marshalNoEscape(plain(e))
	}
	return marshalNoEscape(struct {
		plain
		Text string `json:"text"`
	}{plain: plain(e)})
}

// marshalNoEscape is json.Marshal without HTML escaping and without the
// trailing newline.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
