package codex

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/internal/facet"
)

// maxIDBytes bounds a session id and any id put in a facet.
const maxIDBytes = 1024

// mapper maps the CLI's stdout lines to universal events, one line at a
// time, keeping the context the lines need (thread, turn, session, usage).
// Its events are unbounded; the run's Emitter bounds them.
type mapper struct {
	resume bool // a resume run: top-level errors are not forwarded

	thread, turn string
	turns        int // synthetic turn ids handed out

	sessionSeen bool   // a non-blank thread_id was seen
	session     string // the session id ("" when oversize)

	usage *usage // the last turn.completed's

	parseErrors      bool // a line could not be parsed
	notFoundReported bool // a suppressed error event names a missing session
}

// usage is the token usage of turn.completed.
type usage struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	CacheWriteInputTokens int64 `json:"cache_write_input_tokens"`
	OutputTokens          int64 `json:"output_tokens"`
	ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
}

func newMapper(resume bool) *mapper { return &mapper{resume: resume} }

// object is one parsed JSON object.
type object map[string]json.RawMessage

// fieldError is a field of the wrong type; its text names only the field.
type fieldError struct{ what string }

// str returns o[k] as a string: ok is false when it is absent or null, err
// set when it is something else.
func (o object) str(k string) (s string, ok bool, err *fieldError) {
	raw, present := o[k]
	if !present || isNull(raw) {
		return "", false, nil
	}
	if json.Unmarshal(raw, &s) != nil {
		return "", false, &fieldError{"field `" + k + "` is not a string"}
	}
	return s, true, nil
}

// obj returns o[k] as an object (nil when absent or null).
func (o object) obj(k string) (object, *fieldError) {
	raw, present := o[k]
	if !present || isNull(raw) {
		return nil, nil
	}
	var v object
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &v) != nil {
		return nil, &fieldError{"field `" + k + "` is not an object"}
	}
	return v, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// parseError is the error event of a line that cannot be mapped. It never
// carries the line, only a fixed description and the line's length.
func parseError(what string, lineBytes int) agent.Event {
	return agent.Event{
		Kind:    agent.EventError,
		Channel: "error",
		Message: "codex stream parse error (redacted): " + what + " (line_bytes=" + strconv.Itoa(lineBytes) + ")",
	}
}

// tooLong maps a line the reader skipped for its size.
func (m *mapper) tooLong(n int) []agent.Event {
	m.parseErrors = true
	return []agent.Event{parseError("line too long", n)}
}

// line maps one stdout line (without its line ending).
func (m *mapper) line(b []byte) []agent.Event {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	n := len(b)
	var o object
	if json.Unmarshal(b, &o) != nil || o == nil {
		m.parseErrors = true
		if !json.Valid(b) {
			return []agent.Event{parseError("invalid JSON", n)}
		}
		return []agent.Event{parseError("not a JSON object", n)}
	}
	evs, ferr := m.event(o)
	if ferr != nil {
		m.parseErrors = true
		return []agent.Event{parseError(ferr.what, n)}
	}
	return evs
}

// event maps one parsed line: its events, then the session handle.
func (m *mapper) event(o object) ([]agent.Event, *fieldError) {
	typ, ok, ferr := o.str("type")
	if ferr != nil {
		return nil, ferr
	}
	if !ok {
		return nil, &fieldError{"missing string field `type`"}
	}
	if err := flatten(o); err != nil {
		return nil, err
	}
	threadID, _, ferr := o.str("thread_id")
	if ferr != nil {
		return nil, ferr
	}
	turnID, _, ferr := o.str("turn_id")
	if ferr != nil {
		return nil, ferr
	}

	var evs []agent.Event
	switch typ {
	case "thread.started", "thread.resumed":
		if strings.TrimSpace(threadID) == "" {
			return nil, &fieldError{"missing string field `thread_id`"}
		}
		m.thread, m.turn = threadID, ""
		evs = []agent.Event{status("")}
	case "turn.started":
		if turnID == "" {
			m.turns++
			turnID = "synthetic-turn-" + strconv.Itoa(m.turns)
		}
		m.turn = turnID
		if threadID != "" && m.thread == "" {
			m.thread = threadID
		}
		evs = []agent.Event{status("")}
	case "turn.completed":
		if u, uerr := o.obj("usage"); uerr == nil && u != nil {
			m.usage = parseUsage(u)
		}
		evs = []agent.Event{status("")}
	case "turn.failed":
		evs = []agent.Event{status("turn failed")}
	case "error":
		msg, ok, ferr := o.str("message")
		if ferr != nil {
			return nil, ferr
		}
		if !ok {
			return nil, &fieldError{"missing string field `message`"}
		}
		if m.resume {
			// Upstream does not forward a resume's top-level errors; they
			// only classify a missing session.
			if namesMissingSession(msg) {
				m.notFoundReported = true
			}
		} else {
			evs = []agent.Event{errorEvent(msg)}
		}
	case "item.started", "item.created":
		evs, ferr = m.item(o, phaseStart, threadID, turnID)
	case "item.updated", "item.delta":
		evs, ferr = m.item(o, phaseDelta, threadID, turnID)
	case "item.completed":
		evs, ferr = m.item(o, phaseComplete, threadID, turnID)
	case "item.failed":
		evs, ferr = m.item(o, phaseFail, threadID, turnID)
	default:
		evs = []agent.Event{{Kind: agent.EventUnknown}}
	}
	if ferr != nil {
		return nil, ferr
	}
	return m.attachSession(evs, threadID), nil
}

// flatten lifts a nested `item` to the top level: item.type becomes
// item_type, item.id item_id, other fields are copied unless the top level
// has them.
func flatten(o object) *fieldError {
	item, ferr := o.obj("item")
	if ferr != nil || item == nil {
		return ferr
	}
	delete(o, "item")
	for k, v := range item {
		switch k {
		case "type":
			k = "item_type"
		case "id":
			k = "item_id"
		}
		if _, exists := o[k]; !exists {
			o[k] = v
		}
	}
	return nil
}

// attachSession attaches the session handle the first time a non-blank
// thread_id is seen: to the first data-less status event of evs, else to
// a status event appended after them.
func (m *mapper) attachSession(evs []agent.Event, threadID string) []agent.Event {
	if m.sessionSeen || strings.TrimSpace(threadID) == "" {
		return evs
	}
	m.sessionSeen = true
	if len(threadID) > maxIDBytes {
		return append(evs, status("session handle id oversize: len_bytes="+strconv.Itoa(len(threadID))))
	}
	m.session = threadID
	facet := facet.SessionData(threadID)
	for i := range evs {
		if evs[i].Kind == agent.EventStatus && evs[i].Data == nil {
			evs[i].Data = facet
			return evs
		}
	}
	ev := status("")
	ev.Data = facet
	return append(evs, ev)
}

// errorEvent is an error event with the CLI's message ("codex error" when
// it is blank).
func errorEvent(msg string) agent.Event {
	if strings.TrimSpace(msg) == "" {
		msg = "codex error"
	}
	return agent.Event{Kind: agent.EventError, Channel: "error", Message: msg}
}

func status(msg string) agent.Event {
	return agent.Event{Kind: agent.EventStatus, Channel: "status", Message: msg}
}

// completionData is the completion's data: the session facet and the
// last usage, nil when neither is known.
func (m *mapper) completionData() json.RawMessage {
	if m.session == "" && m.usage == nil {
		return nil
	}
	var d struct {
		Schema  string         `json:"schema,omitempty"`
		Session *facet.Session `json:"session,omitempty"`
		Usage   *usage         `json:"usage,omitempty"`
	}
	if m.session != "" {
		d.Schema, d.Session = agent.CapSessionHandle, &facet.Session{ID: m.session}
	}
	d.Usage = m.usage
	return facet.JSON(d)
}

// parseUsage reads the token counters; a counter that is absent or not a
// non-negative integer counts 0.
func parseUsage(u object) *usage {
	get := func(k string) int64 {
		var n int64
		if raw, ok := u[k]; ok && json.Unmarshal(raw, &n) == nil && n >= 0 {
			return n
		}
		return 0
	}
	return &usage{
		InputTokens:           get("input_tokens"),
		CachedInputTokens:     get("cached_input_tokens"),
		CacheWriteInputTokens: get("cache_write_input_tokens"),
		OutputTokens:          get("output_tokens"),
		ReasoningOutputTokens: get("reasoning_output_tokens"),
	}
}

// resumeNotFound classifies a failed resume (the exit was non-zero) as a
// missing session: no thread id and no parse error were seen, and stderr
// or a suppressed error event names a missing session.
func (m *mapper) resumeNotFound(stderr []byte) bool {
	if m.sessionSeen || m.parseErrors {
		return false
	}
	return m.notFoundReported || namesMissingSession(string(stderr))
}

// namesMissingSession matches upstream's not-found phrases, plus the real
// CLI's "no rollout found" (for `resume <id>` with an unknown id).
func namesMissingSession(s string) bool {
	s = strings.ToLower(s)
	if strings.Contains(s, "not found") && (strings.Contains(s, "session") || strings.Contains(s, "thread")) {
		return true
	}
	for _, p := range []string{"no session", "unknown session", "no thread", "unknown thread", "no rollout found"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
