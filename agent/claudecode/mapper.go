package claudecode

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"hash"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/internal/facet"
)

// Bounds the mapper keeps its state within.
const (
	// maxSessionIDBytes bounds a session id; a longer one is omitted.
	maxSessionIDBytes = 1024
	// maxToolFieldBytes bounds a tool name or tool_use_id put in a facet;
	// a longer one is left out (null).
	maxToolFieldBytes = 256
	// maxTrackedTools bounds the tool_use ids remembered for pairing and
	// de-duplication; past it, new ids are neither paired nor de-duplicated.
	maxTrackedTools = 4096
	// maxStreamedBlocks bounds the content blocks of the current streamed
	// message remembered for text de-duplication.
	maxStreamedBlocks = 256
)

// Fixed event messages.
const (
	msgSessionHandle  = "session handle"
	msgSessionOmitted = "session handle omitted: id exceeds 1024 bytes"
	msgUserMessage    = "user message"
	parseErrorPrefix  = "claude_code stream parse error (redacted): "
)

// The fixed descriptions of a line that cannot be mapped. A parse error
// event says which rule the line broke and its length, never its content
// (Go's JSON errors can quote input, so they are never used).
const (
	descInvalidJSON = "invalid JSON"
	descNotObject   = "not a JSON object"
	descType        = "missing string field type"
	descSessionID   = "missing string field session_id (or sessionId)"
	descSubtype     = "missing string field subtype"
	descEvent       = "stream_event missing object field event"
	descEventType   = "stream_event event missing string field type"
	descIsError     = "result field is_error must be a bool"
	descLineTooLong = "line too long"
)

// rawLine is one stdout line's top level. Every field is kept raw so that
// its JSON type can be checked without Go's error texts.
type rawLine struct {
	Type           json.RawMessage `json:"type"`
	Subtype        json.RawMessage `json:"subtype"`
	SessionID      json.RawMessage `json:"session_id"`
	SessionIDAlt   json.RawMessage `json:"sessionId"`
	Message        json.RawMessage `json:"message"`
	Event          json.RawMessage `json:"event"`
	IsError        json.RawMessage `json:"is_error"`
	Errors         json.RawMessage `json:"errors"`
	Usage          json.RawMessage `json:"usage"`
	TotalCostUSD   json.RawMessage `json:"total_cost_usd"`
	NumTurns       json.RawMessage `json:"num_turns"`
	DurationMS     json.RawMessage `json:"duration_ms"`
	APIErrorStatus json.RawMessage `json:"api_error_status"`
	ToolUseResult  json.RawMessage `json:"tool_use_result"`
	// Error is an assistant line's error kind ("authentication_failed").
	Error json.RawMessage `json:"error"`
}

// rawMessage is the message of an assistant or user line, and of a
// message_start stream event.
type rawMessage struct {
	ID      json.RawMessage `json:"id"`
	Content json.RawMessage `json:"content"`
}

// rawBlock is one content block.
type rawBlock struct {
	Type      json.RawMessage `json:"type"`
	Text      json.RawMessage `json:"text"`
	ID        json.RawMessage `json:"id"`
	Name      json.RawMessage `json:"name"`
	ToolUseID json.RawMessage `json:"tool_use_id"`
	IsError   json.RawMessage `json:"is_error"`
	Content   json.RawMessage `json:"content"`
}

// rawStreamEvent is the Anthropic streaming event of a stream_event line.
type rawStreamEvent struct {
	Type         json.RawMessage `json:"type"`
	Index        json.RawMessage `json:"index"`
	Message      json.RawMessage `json:"message"`
	ContentBlock json.RawMessage `json:"content_block"`
	Delta        json.RawMessage `json:"delta"`
}

// rawDelta is a content_block_delta's delta.
type rawDelta struct {
	Type json.RawMessage `json:"type"`
	Text json.RawMessage `json:"text"`
}

// rawUsage is a result line's usage (other keys are ignored).
type rawUsage struct {
	InputTokens              json.RawMessage `json:"input_tokens"`
	OutputTokens             json.RawMessage `json:"output_tokens"`
	CacheReadInputTokens     json.RawMessage `json:"cache_read_input_tokens"`
	CacheCreationInputTokens json.RawMessage `json:"cache_creation_input_tokens"`
}

// rawToolUseResult is a user line's tool_use_result (Bash's shape).
type rawToolUseResult struct {
	Stdout json.RawMessage `json:"stdout"`
	Stderr json.RawMessage `json:"stderr"`
}

// toolState is what the mapper remembers of one tool_use id.
type toolState struct {
	name     string
	resulted bool
}

// streamedBlock is one content block of the message being streamed
// (stream_event lines): a text block remembers the length and digest of
// the text its deltas carried, so the assistant line that repeats the
// whole block emits only what the deltas did not.
type streamedBlock struct {
	index    int64
	isTool   bool
	toolID   string
	toolName string
	n        int
	h        hash.Hash
	matched  bool
}

// result is what the mapper keeps of the last result line.
type result struct {
	failed   bool
	notFound bool
	data     completionData
}

// mapper maps claude's stream-json lines to universal events, one line at
// a time, and keeps what the completion needs. It is not safe for
// concurrent use.
type mapper struct {
	out     []agent.Event
	pending []agent.Event // a result line's events, held until the next line or the end

	sessionID    string
	sessionDone  bool // the first non-blank session id was seen (kept or omitted)
	sessionFacet json.RawMessage
	msgID        string
	blocks       []streamedBlock
	tools        map[string]*toolState
	finalText    string
	sawAssistant bool
	// authFailed: an assistant line said its error is
	// authentication_failed (claude is not logged in).
	authFailed    bool
	parseErrors   int
	last          *result
	compactBuffer bytes.Buffer
}

func newMapper() *mapper { return &mapper{tools: make(map[string]*toolState)} }

// mapLine maps one non-blank line (without its line ending). The events
// returned are valid until the next call; a result line's events are held
// back and come first in the next call's events, or from finish.
func (m *mapper) mapLine(line []byte) []agent.Event {
	m.out = append(m.out[:0], m.pending...)
	m.pending = m.pending[:0]
	start := len(m.out)

	var l rawLine
	if err := json.Unmarshal(line, &l); err != nil {
		if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return m.parseError(descNotObject, len(line))
		}
		return m.parseError(descInvalidJSON, len(line))
	}
	typ, ok := jsonString(l.Type)
	if !ok {
		return m.parseError(descType, len(line))
	}
	switch typ {
	case "system", "user", "assistant", "result", "stream_event":
	default:
		// An outer type this backend does not know (rate_limit_event,
		// tool_progress, …) is not an error.
		m.out = append(m.out, agent.Event{Kind: agent.EventUnknown})
		return m.out
	}
	sid, ok := jsonString(l.SessionID)
	if !ok {
		if sid, ok = jsonString(l.SessionIDAlt); !ok {
			return m.parseError(descSessionID, len(line))
		}
	}

	// Check everything that can fail before any state changes.
	var subtype string
	var ev rawStreamEvent
	var evType string
	var isError, hasIsError bool
	switch typ {
	case "system", "result":
		if subtype, ok = jsonString(l.Subtype); !ok {
			return m.parseError(descSubtype, len(line))
		}
		if typ == "result" && !isNull(l.IsError) {
			switch string(l.IsError) {
			case "true":
				isError, hasIsError = true, true
			case "false":
				hasIsError = true
			default:
				return m.parseError(descIsError, len(line))
			}
		}
	case "stream_event":
		if !isObject(l.Event) {
			return m.parseError(descEvent, len(line))
		}
		_ = json.Unmarshal(l.Event, &ev) // an object of a valid line: cannot fail
		if evType, ok = jsonString(ev.Type); !ok {
			return m.parseError(descEventType, len(line))
		}
	}

	switch typ {
	case "system":
		m.out = append(m.out, status(systemMessage(subtype)))
	case "user":
		m.mapUser(&l)
	case "assistant":
		m.mapAssistant(&l)
	case "stream_event":
		m.mapStreamEvent(evType, &ev)
	case "result":
		m.mapResult(&l, subtype, isError, hasIsError)
	}
	m.captureSession(sid, start)
	if typ == "result" {
		m.pending = append(m.pending, m.out[start:]...)
		m.out = m.out[:start]
	}
	return m.out
}

// tooLong maps a stdout line longer than the reader's bound.
func (m *mapper) tooLong(n int) []agent.Event {
	m.out = append(m.out[:0], m.pending...)
	m.pending = m.pending[:0]
	return m.parseError(descLineTooLong, n)
}

// finish returns the events still held back (a result line's).
func (m *mapper) finish() []agent.Event {
	out := m.pending
	m.pending = nil
	return out
}

func (m *mapper) parseError(desc string, n int) []agent.Event {
	m.parseErrors++
	m.out = append(m.out, agent.Event{
		Kind:    agent.EventError,
		Channel: "error",
		Message: parseErrorPrefix + desc + " (line_bytes=" + strconv.Itoa(n) + ")",
	})
	return m.out
}

// captureSession records the first non-blank session id and attaches the
// session facet once: to the first data-less Status among the line's
// events, else to a Status appended after them.
func (m *mapper) captureSession(sid string, start int) {
	if m.sessionDone {
		return
	}
	sid = strings.TrimSpace(sid)
	if sid == "" {
		return
	}
	m.sessionDone = true
	if len(sid) > maxSessionIDBytes {
		m.out = append(m.out, status(msgSessionOmitted))
		return
	}
	m.sessionID = sid
	m.sessionFacet = facet.JSON(completionData{Schema: agent.CapSessionHandle, Session: &facet.Session{ID: sid}})
	for i := start; i < len(m.out); i++ {
		if m.out[i].Kind == agent.EventStatus && m.out[i].Data == nil {
			m.out[i].Data = m.sessionFacet
			return
		}
	}
	ev := status(msgSessionHandle)
	ev.Data = m.sessionFacet
	m.out = append(m.out, ev)
}

// systemMessage is a system line's Status message: "system <subtype>"
// when the subtype is a plain token, else "system other".
func systemMessage(subtype string) string {
	if isToken(subtype) {
		return "system " + subtype
	}
	return "system other"
}

func (m *mapper) mapAssistant(l *rawLine) {
	m.sawAssistant = true
	if bytes.Equal(l.Error, []byte(`"authentication_failed"`)) {
		m.authFailed = true
	}
	var msg rawMessage
	if !isObject(l.Message) || json.Unmarshal(l.Message, &msg) != nil || !isArray(msg.Content) {
		m.out = append(m.out, agent.Event{Kind: agent.EventUnknown})
		return
	}
	msgID, _ := jsonString(msg.ID)
	var blocks []json.RawMessage
	_ = json.Unmarshal(msg.Content, &blocks) // an array of a valid line
	var texts []string
	for _, raw := range blocks {
		var b rawBlock
		if !isObject(raw) || json.Unmarshal(raw, &b) != nil {
			m.out = append(m.out, agent.Event{Kind: agent.EventUnknown})
			continue
		}
		bt, _ := jsonString(b.Type)
		switch bt {
		case "text":
			text, ok := jsonString(b.Text)
			if !ok {
				m.out = append(m.out, agent.Event{Kind: agent.EventUnknown})
				continue
			}
			texts = append(texts, text)
			if rest, emit := m.unstreamed(msgID, text); emit {
				m.out = append(m.out, agent.Event{Kind: agent.EventTextOutput, Channel: "assistant", Text: rest})
			}
		case "tool_use":
			m.toolCall(&b)
		case "tool_result":
			m.toolResult(&b, facet.Bytes{})
		default:
			m.out = append(m.out, agent.Event{Kind: agent.EventUnknown})
		}
	}
	if len(texts) > 0 {
		m.finalText = boundFinalText(strings.Join(texts, "\n"))
	}
}

// unstreamed returns the part of an assistant text block its stream
// deltas did not already emit: the first not yet matched text block of
// the same streamed message is its stream; when that stream's text is a
// prefix of the block, only the rest is emitted (nothing when it is all
// of it). A block without a matching stream is emitted whole.
func (m *mapper) unstreamed(msgID, text string) (string, bool) {
	if msgID != m.msgID {
		return text, true
	}
	for i := range m.blocks {
		b := &m.blocks[i]
		if b.isTool || b.matched {
			continue
		}
		b.matched = true
		if b.n == 0 || b.n > len(text) {
			return text, true
		}
		h := sha256.Sum256([]byte(text[:b.n]))
		if !bytes.Equal(h[:], b.h.Sum(nil)) {
			return text, true
		}
		rest := text[b.n:]
		return rest, rest != ""
	}
	return text, true
}

func (m *mapper) mapUser(l *rawLine) {
	var msg rawMessage
	var blocks []json.RawMessage
	if isObject(l.Message) && json.Unmarshal(l.Message, &msg) == nil && isArray(msg.Content) {
		_ = json.Unmarshal(msg.Content, &blocks)
	}
	var results []rawBlock
	for _, raw := range blocks {
		var b rawBlock
		if isObject(raw) && json.Unmarshal(raw, &b) == nil {
			if bt, _ := jsonString(b.Type); bt == "tool_result" {
				results = append(results, b)
			}
		}
	}
	// Bash's tool_use_result gives stdout and stderr sizes, attributable
	// only when the line carries exactly one tool result.
	var tb facet.Bytes
	if len(results) == 1 && isObject(l.ToolUseResult) {
		var r rawToolUseResult
		if json.Unmarshal(l.ToolUseResult, &r) == nil {
			if s, ok := jsonString(r.Stdout); ok {
				tb.Stdout = int64(len(s))
			}
			if s, ok := jsonString(r.Stderr); ok {
				tb.Stderr = int64(len(s))
			}
		}
	}
	start := len(m.out)
	for i := range results {
		m.toolResult(&results[i], tb)
	}
	if len(m.out) == start {
		m.out = append(m.out, status(msgUserMessage))
	}
}

// toolCall maps a tool_use block (from an assistant line or a
// content_block_start): one ToolCall start per tool_use id.
func (m *mapper) toolCall(b *rawBlock) (id, name string) {
	id, _ = jsonString(b.ID)
	name, _ = jsonString(b.Name)
	id, name = toolField(id), toolField(name)
	if id != "" {
		if _, seen := m.tools[id]; seen {
			return id, name
		}
		if len(m.tools) < maxTrackedTools {
			m.tools[id] = &toolState{name: name}
		}
	}
	m.out = append(m.out, toolEvent(agent.EventToolCall, "tool_use", "start", "running", name, id, facet.Bytes{}))
	return id, name
}

// toolResult maps a tool_result block: a ToolResult when its tool_use_id
// pairs with a ToolCall already emitted (once per id), else Unknown.
func (m *mapper) toolResult(b *rawBlock, tb facet.Bytes) {
	id, _ := jsonString(b.ToolUseID)
	st, ok := m.tools[id]
	if id == "" || !ok || st.resulted {
		m.out = append(m.out, agent.Event{Kind: agent.EventUnknown})
		return
	}
	st.resulted = true
	if len(b.Content) > 0 && !isNull(b.Content) {
		m.compactBuffer.Reset()
		if json.Compact(&m.compactBuffer, b.Content) == nil {
			tb.Result = int64(m.compactBuffer.Len())
		}
	}
	phase, stat := "complete", "completed"
	if string(b.IsError) == "true" {
		phase, stat = "fail", "failed"
	}
	m.out = append(m.out, toolEvent(agent.EventToolResult, "tool_result", phase, stat, st.name, id, tb))
}

func (m *mapper) mapStreamEvent(evType string, ev *rawStreamEvent) {
	unknown := agent.Event{Kind: agent.EventUnknown}
	switch evType {
	case "message_start":
		var msg rawMessage
		if isObject(ev.Message) && json.Unmarshal(ev.Message, &msg) == nil {
			m.msgID, _ = jsonString(msg.ID)
		} else {
			m.msgID = ""
		}
		m.blocks = m.blocks[:0]
		m.out = append(m.out, unknown)
	case "content_block_start":
		index, _ := jsonInt(ev.Index)
		var b rawBlock
		if !isObject(ev.ContentBlock) || json.Unmarshal(ev.ContentBlock, &b) != nil {
			m.out = append(m.out, unknown)
			return
		}
		switch bt, _ := jsonString(b.Type); bt {
		case "tool_use":
			id, name := m.toolCall(&b)
			if blk := m.block(index); blk != nil {
				blk.isTool, blk.toolID, blk.toolName = true, id, name
			}
		case "tool_result":
			m.toolResult(&b, facet.Bytes{})
		case "text":
			text, _ := jsonString(b.Text)
			if text == "" {
				m.out = append(m.out, unknown)
				return
			}
			m.streamText(index, text)
		default:
			m.out = append(m.out, unknown)
		}
	case "content_block_delta":
		index, _ := jsonInt(ev.Index)
		var d rawDelta
		if !isObject(ev.Delta) || json.Unmarshal(ev.Delta, &d) != nil {
			m.out = append(m.out, unknown)
			return
		}
		switch dt, _ := jsonString(d.Type); dt {
		case "text_delta":
			text, ok := jsonString(d.Text)
			if !ok {
				m.out = append(m.out, unknown)
				return
			}
			m.streamText(index, text)
		case "input_json_delta":
			var id, name string
			if blk := m.findBlock(index); blk != nil && blk.isTool {
				id, name = blk.toolID, blk.toolName
			}
			m.out = append(m.out, toolEvent(agent.EventToolCall, "tool_use", "delta", "running", name, id, facet.Bytes{}))
		default:
			m.out = append(m.out, unknown)
		}
	default:
		m.out = append(m.out, unknown)
	}
}

// streamText emits a streamed text piece and remembers it for the
// assistant line that will repeat the whole block.
func (m *mapper) streamText(index int64, text string) {
	if blk := m.block(index); blk != nil && !blk.isTool && !blk.matched {
		if blk.h == nil {
			blk.h = sha256.New()
		}
		blk.h.Write([]byte(text))
		blk.n += len(text)
	}
	m.out = append(m.out, agent.Event{Kind: agent.EventTextOutput, Channel: "assistant", Text: text})
}

func (m *mapper) findBlock(index int64) *streamedBlock {
	for i := range m.blocks {
		if m.blocks[i].index == index {
			return &m.blocks[i]
		}
	}
	return nil
}

// block returns the streamed block at index, adding it when there is
// room (nil when there is none).
func (m *mapper) block(index int64) *streamedBlock {
	if b := m.findBlock(index); b != nil {
		return b
	}
	if len(m.blocks) >= maxStreamedBlocks {
		return nil
	}
	m.blocks = append(m.blocks, streamedBlock{index: index})
	return &m.blocks[len(m.blocks)-1]
}

// Result subtypes claude 2.1 prints; "error" is upstream's own form.
var knownResultSubtypes = map[string]bool{
	"success":                             true,
	"error":                               true,
	"error_max_turns":                     true,
	"error_during_execution":              true,
	"error_max_budget_usd":                true,
	"error_max_structured_output_retries": true,
}

// mapResult maps the result line: a Status "result success" for a
// successful run, else an Error "result <subtype>[ is_error=true][
// api_error_status=<n>]"; and keeps usage, cost, turns and duration for
// the completion, and whether its error texts say a session was not found.
func (m *mapper) mapResult(l *rawLine, subtype string, isError, hasIsError bool) {
	name := subtype
	if !knownResultSubtypes[subtype] {
		name = "other"
	}
	var failed bool
	switch {
	case subtype == "success":
		failed = isError
	case name == "other":
		failed = !hasIsError || isError
	default:
		failed = true
	}
	r := &result{failed: failed}
	r.data.Usage = parseUsage(l.Usage)
	if f, ok := jsonNonNegFloat(l.TotalCostUSD); ok {
		r.data.CostUSD = &f
	}
	if n, ok := jsonInt(l.NumTurns); ok && n >= 0 {
		r.data.NumTurns = &n
	}
	if n, ok := jsonInt(l.DurationMS); ok && n >= 0 {
		r.data.DurationMS = &n
	}
	if failed {
		if s, ok := jsonString(l.Message); ok && notFoundPhrase(s) {
			r.notFound = true
		}
		var errs []json.RawMessage
		if isArray(l.Errors) && json.Unmarshal(l.Errors, &errs) == nil {
			for _, e := range errs {
				if s, ok := jsonString(e); ok && notFoundPhrase(s) {
					r.notFound = true
				}
			}
		}
	}
	m.last = r
	if !failed {
		m.out = append(m.out, status("result "+name))
		return
	}
	msg := "result " + name
	if subtype == "success" {
		msg += " is_error=true"
	}
	if n, ok := jsonInt(l.APIErrorStatus); ok && n >= 100 && n <= 599 {
		msg += " api_error_status=" + strconv.FormatInt(n, 10)
	}
	m.out = append(m.out, agent.Event{Kind: agent.EventError, Channel: "error", Message: msg})
}

func parseUsage(raw json.RawMessage) *usage {
	var u rawUsage
	if !isObject(raw) || json.Unmarshal(raw, &u) != nil {
		return nil
	}
	count := func(r json.RawMessage) int64 {
		if n, ok := jsonInt(r); ok && n >= 0 {
			return n
		}
		return 0
	}
	read, write := count(u.CacheReadInputTokens), count(u.CacheCreationInputTokens)
	return &usage{
		InputTokens:              addCount(addCount(count(u.InputTokens), read), write),
		OutputTokens:             count(u.OutputTokens),
		CachedInputTokens:        read,
		CacheReadInputTokens:     read,
		CacheCreationInputTokens: write,
	}
}

// addCount adds two counts ≥ 0, saturating: hostile counts never wrap.
func addCount(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// notFoundPhrase reports whether an error text says a session was not
// found (case-insensitive): "not found" with session, thread or
// conversation; "no session|thread|conversation"; "unknown
// session|thread|conversation". Claude 2.1 says "No conversation found
// with session ID: <id>".
func notFoundPhrase(s string) bool {
	s = strings.ToLower(s)
	for _, noun := range []string{"session", "thread", "conversation"} {
		if strings.Contains(s, "no "+noun) || strings.Contains(s, "unknown "+noun) ||
			strings.Contains(s, "not found") && strings.Contains(s, noun) {
			return true
		}
	}
	return false
}

// completion returns the completion's final text and data.
func (m *mapper) completion() (string, json.RawMessage) {
	var d completionData
	if m.last != nil {
		d = m.last.data
	}
	if m.sessionID != "" {
		d.Schema, d.Session = agent.CapSessionHandle, &facet.Session{ID: m.sessionID}
	}
	if d == (completionData{}) {
		return m.finalText, nil
	}
	return m.finalText, facet.JSON(d)
}

// boundFinalText truncates s as the run bounds a completion's final text.
func boundFinalText(s string) string {
	if len(s) <= agent.MaxFinalTextBytes {
		return s
	}
	cut := agent.MaxFinalTextBytes - len(agent.TruncatedSuffix)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + agent.TruncatedSuffix
}

// toolField returns an id or name fit for a facet: at most
// maxToolFieldBytes, else "" (null).
func toolField(s string) string {
	if len(s) > maxToolFieldBytes {
		return ""
	}
	return s
}

func status(msg string) agent.Event {
	return agent.Event{Kind: agent.EventStatus, Channel: "status", Message: msg}
}

// isToken reports whether s is a lowercase identifier of at most 64 bytes.
func isToken(s string) bool {
	if s == "" || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

func isObject(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '{' }

func isArray(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '[' }

// jsonString decodes raw when it is a JSON string.
func jsonString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// jsonInt decodes raw when it is a JSON integer that fits an int64.
func jsonInt(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 || !(raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

// jsonNonNegFloat decodes raw when it is a non-negative JSON number.
func jsonNonNegFloat(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 || !(raw[0] >= '0' && raw[0] <= '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return f, err == nil && f >= 0
}
