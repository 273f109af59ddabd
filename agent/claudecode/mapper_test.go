package claudecode

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/internal/facet"
)

// mapAll maps lines (one per element) and returns every event, the held
// result events included.
func mapAll(m *mapper, lines ...string) []agent.Event {
	var out []agent.Event
	for _, l := range lines {
		out = append(out, m.mapLine([]byte(l))...)
	}
	return append(out, m.finish()...)
}

// brief renders events compactly for comparisons: kind, then the text or
// message, then the tool facet's phase/status/name/id when there is one.
func brief(t *testing.T, evs []agent.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		s := string(ev.Kind)
		switch {
		case ev.Kind == agent.EventTextOutput:
			s += " " + strconv.Quote(ev.Text)
		case ev.Message != "":
			s += " " + strconv.Quote(ev.Message)
		}
		if ev.Kind == agent.EventToolCall || ev.Kind == agent.EventToolResult {
			var f struct {
				Tool struct {
					Phase, Status    string
					ToolName         *string `json:"tool_name"`
					ToolUseID        *string `json:"tool_use_id"`
					Bytes            facet.Bytes
					Kind             string
					BackendItemID    *string `json:"backend_item_id"`
					ExitCode         *int    `json:"exit_code"`
					ThreadID, TurnID *string
				}
			}
			if err := json.Unmarshal(ev.Data, &f); err != nil {
				t.Fatal(err)
			}
			s += " " + f.Tool.Kind + "/" + f.Tool.Phase + "/" + f.Tool.Status + " " + deref(f.Tool.ToolName) + " " + deref(f.Tool.ToolUseID)
			if f.Tool.Bytes != (facet.Bytes{}) {
				s += " " + strconv.FormatInt(f.Tool.Bytes.Stdout, 10) + "," + strconv.FormatInt(f.Tool.Bytes.Stderr, 10) + "," + strconv.FormatInt(f.Tool.Bytes.Result, 10)
			}
		} else if ev.Data != nil {
			s += " " + string(ev.Data)
		}
		out = append(out, s)
	}
	return out
}

func deref(p *string) string {
	if p == nil {
		return "null"
	}
	return *p
}

func line(typ string, kv ...string) string {
	var b strings.Builder
	b.WriteString(`{"type":"` + typ + `","session_id":"s1"`)
	for i := 0; i < len(kv); i += 2 {
		b.WriteString(`,"` + kv[i] + `":` + kv[i+1])
	}
	b.WriteString("}")
	return b.String()
}

func streamEvent(ev string) string { return line("stream_event", "event", ev) }

func assistant(id string, blocks ...string) string {
	return line("assistant", "message", `{"id":"`+id+`","content":[`+strings.Join(blocks, ",")+`]}`)
}

const facetS1 = `{"schema":"agent_api.session.handle.v1","session":{"id":"s1"}}`

func TestMapper(t *testing.T) {
	t.Parallel()
	msgStart := func(id string) string {
		return streamEvent(`{"type":"message_start","message":{"id":"` + id + `"}}`)
	}
	textStart := func(i int) string {
		return streamEvent(`{"type":"content_block_start","index":` + strconv.Itoa(i) + `,"content_block":{"type":"text","text":""}}`)
	}
	delta := func(i int, text string) string {
		return streamEvent(`{"type":"content_block_delta","index":` + strconv.Itoa(i) + `,"delta":{"type":"text_delta","text":` + strconv.Quote(text) + `}}`)
	}
	text := func(s string) string { return `{"type":"text","text":` + strconv.Quote(s) + `}` }
	toolUse := func(id, name string) string {
		return `{"type":"tool_use","id":"` + id + `","name":"` + name + `","input":{"command":"SECRET-INPUT"}}`
	}
	toolResult := func(id string, isErr bool, content string) string {
		return `{"type":"tool_result","tool_use_id":"` + id + `","is_error":` + strconv.FormatBool(isErr) + `,"content":` + content + `}`
	}
	user := func(blocks ...string) string {
		return line("user", "message", `{"role":"user","content":[`+strings.Join(blocks, ",")+`]}`)
	}
	init := line("system", "subtype", `"init"`)
	sess := "status \"session handle\" " + facetS1
	tests := []struct {
		name      string
		lines     []string
		want      []string
		finalText string
	}{
		{
			name:      "deltas then the whole block: text once",
			lines:     []string{init, msgStart("m1"), textStart(0), delta(0, "Hel"), delta(0, "lo"), assistant("m1", text("Hello"))},
			want:      []string{`status "system init" ` + facetS1, "unknown", "unknown", `text_output "Hel"`, `text_output "lo"`},
			finalText: "Hello",
		},
		{
			name:      "deltas that stopped short: the rest is emitted",
			lines:     []string{init, msgStart("m1"), textStart(0), delta(0, "Hel"), assistant("m1", text("Hello"))},
			want:      []string{`status "system init" ` + facetS1, "unknown", "unknown", `text_output "Hel"`, `text_output "lo"`},
			finalText: "Hello",
		},
		{
			name:      "deltas that differ: the whole block is emitted",
			lines:     []string{init, msgStart("m1"), textStart(0), delta(0, "Bye"), assistant("m1", text("Hello"))},
			want:      []string{`status "system init" ` + facetS1, "unknown", "unknown", `text_output "Bye"`, `text_output "Hello"`},
			finalText: "Hello",
		},
		{
			name:      "another message's deltas do not match",
			lines:     []string{init, msgStart("m1"), textStart(0), delta(0, "Hello"), assistant("m2", text("Hello"))},
			want:      []string{`status "system init" ` + facetS1, "unknown", "unknown", `text_output "Hello"`, `text_output "Hello"`},
			finalText: "Hello",
		},
		{
			name: "two text blocks matched in order",
			lines: []string{init, msgStart("m1"), textStart(0), delta(0, "one"), assistant("m1", text("one")),
				textStart(1), delta(1, "two"), assistant("m1", text("two"))},
			want:      []string{`status "system init" ` + facetS1, "unknown", "unknown", `text_output "one"`, "unknown", `text_output "two"`},
			finalText: "two",
		},
		{
			name:      "final text joins the latest line's text blocks",
			lines:     []string{assistant("m1", text("a")), assistant("m2", text("b"), `{"type":"thinking","thinking":"x"}`, text("c")), assistant("m3", toolUse("t1", "Bash"))},
			want:      []string{`text_output "a"`, sess, `text_output "b"`, "unknown", `text_output "c"`, "tool_call tool_use/start/running Bash t1"},
			finalText: "b\nc",
		},
		{
			name: "tool call once, input deltas, paired result with sizes",
			lines: []string{
				msgStart("m1"),
				streamEvent(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"Bash","input":{}}}`),
				streamEvent(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"SECRET"}}`),
				streamEvent(`{"type":"content_block_delta","index":5,"delta":{"type":"input_json_delta","partial_json":"x"}}`),
				assistant("m1", toolUse("t1", "Bash")),
				line("user", "message", `{"content":[`+toolResult("t1", false, `"SECRET-OUT"`)+`]}`, "tool_use_result", `{"stdout":"SECRET-OUT","stderr":"e"}`),
			},
			want: []string{"unknown", sess, "tool_call tool_use/start/running Bash t1", "tool_call tool_use/delta/running Bash t1",
				"tool_call tool_use/delta/running null null", "tool_result tool_result/complete/completed Bash t1 10,1,12"},
		},
		{
			name:  "failed tool result; unpaired and repeated results are unknown",
			lines: []string{assistant("m1", toolUse("t1", "Read")), user(toolResult("t1", true, `[{"type":"text","text":"no"}]`), toolResult("t9", false, `"x"`)), user(toolResult("t1", false, `"again"`))},
			want:  []string{"tool_call tool_use/start/running Read t1", sess, "tool_result tool_result/fail/failed Read t1 0,0,29", "unknown", "unknown"},
		},
		{
			name:  "tool result in an assistant line and a stream event",
			lines: []string{assistant("m1", toolUse("t1", "A"), toolUse("t2", "B")), assistant("m1", toolResult("t1", false, `"x"`)), streamEvent(`{"type":"content_block_start","index":0,"content_block":` + toolResult("t2", false, `null`) + `}`)},
			want:  []string{"tool_call tool_use/start/running A t1", "tool_call tool_use/start/running B t2", sess, "tool_result tool_result/complete/completed A t1 0,0,3", "tool_result tool_result/complete/completed B t2"},
		},
		{
			name:  "user line without tool results",
			lines: []string{user(text("[Request interrupted by user]")), line("user", "message", `{"content":"plain"}`)},
			want:  []string{`status "user message" ` + facetS1, `status "user message"`},
		},
		{
			name:  "oversize tool ids and names are null and untracked",
			lines: []string{assistant("m1", toolUse(strings.Repeat("i", 257), strings.Repeat("n", 257))), user(toolResult(strings.Repeat("i", 257), false, `"x"`))},
			want:  []string{"tool_call tool_use/start/running null null", sess, "unknown"},
		},
		{
			name: "result subtypes",
			lines: []string{
				line("result", "subtype", `"success"`),
				line("result", "subtype", `"success"`, "is_error", `false`),
				line("result", "subtype", `"success"`, "is_error", `true`, "api_error_status", `401`),
				line("result", "subtype", `"error_max_turns"`, "is_error", `true`),
				line("result", "subtype", `"error_during_execution"`, "is_error", `true`, "api_error_status", `null`),
				line("result", "subtype", `"error_max_budget_usd"`, "is_error", `true`),
				line("result", "subtype", `"error_max_structured_output_retries"`, "is_error", `true`),
				line("result", "subtype", `"error"`, "is_error", `false`),
				line("result", "subtype", `"Weird SECRET"`, "is_error", `false`),
				line("result", "subtype", `"new_kind"`),
				line("result", "subtype", `"success"`, "is_error", `true`, "api_error_status", `99999`),
			},
			want: []string{`status "result success" ` + facetS1, `status "result success"`,
				`error "result success is_error=true api_error_status=401"`, `error "result error_max_turns"`,
				`error "result error_during_execution"`, `error "result error_max_budget_usd"`,
				`error "result error_max_structured_output_retries"`, `error "result error"`,
				`status "result other"`, `error "result other"`, `error "result success is_error=true"`},
		},
		{
			name:  "system subtypes",
			lines: []string{line("system", "subtype", `"api_retry"`), line("system", "subtype", `"Has Spaces"`), line("system", "subtype", `"`+strings.Repeat("x", 65)+`"`)},
			want:  []string{`status "system api_retry" ` + facetS1, `status "system other"`, `status "system other"`},
		},
		{
			name:  "unknown outer types and stream events",
			lines: []string{`{"type":"rate_limit_event","session_id":"s1"}`, `{"type":"tool_progress"}`, streamEvent(`{"type":"ping"}`), streamEvent(`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"x"}}`)},
			want:  []string{"unknown", "unknown", "unknown", sess, "unknown"},
		},
		{
			name:  "sessionId alias; a blank id is not a session",
			lines: []string{`{"type":"system","subtype":"init","session_id":"  "}`, `{"type":"system","subtype":"init","sessionId":"s1"}`},
			want:  []string{`status "system init"`, `status "system init" ` + facetS1},
		},
		{
			name:  "a result line's events come with the next line",
			lines: []string{line("result", "subtype", `"success"`), "garbage"},
			want:  []string{`status "result success" ` + facetS1, `error "claude_code stream parse error (redacted): invalid JSON (line_bytes=7)"`},
		},
		{
			name:  "assistant line without content",
			lines: []string{line("assistant", "message", `{"content":"x"}`), line("assistant"), assistant("m", `7`, `{"type":"text","text":7}`)},
			want:  []string{"unknown", sess, "unknown", "unknown", "unknown"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newMapper()
			got := brief(t, mapAll(m, tt.lines...))
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("events\n got %q\nwant %q", got, tt.want)
			}
			if ft, _ := m.completion(); ft != tt.finalText {
				t.Errorf("final text %q, want %q", ft, tt.finalText)
			}
			for _, g := range got {
				if strings.Contains(g, "SECRET") {
					t.Errorf("payload leaked: %s", g)
				}
			}
		})
	}
}

func TestMapperSessionOversize(t *testing.T) {
	long := strings.Repeat("s", maxSessionIDBytes+1)
	m := newMapper()
	got := brief(t, mapAll(m,
		`{"type":"system","subtype":"init","session_id":"`+long+`"}`,
		`{"type":"system","subtype":"init","session_id":"s2"}`,
		`{"type":"result","subtype":"success","session_id":"s2","num_turns":1}`))
	want := []string{`status "system init"`, `status "session handle omitted: id exceeds 1024 bytes"`, `status "system init"`, `status "result success"`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events\n got %q\nwant %q", got, want)
	}
	if _, data := m.completion(); string(data) != `{"num_turns":1}` {
		t.Errorf("completion data %s", data)
	}
	// Exactly 1024 bytes is kept.
	m = newMapper()
	id := strings.Repeat("s", maxSessionIDBytes)
	mapAll(m, `{"type":"system","subtype":"init","session_id":"`+id+`"}`)
	if _, data := m.completion(); !bytes.Contains(data, []byte(id)) {
		t.Error("a 1024-byte id was not kept")
	}
}

func TestMapperCompletionData(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, line, want string
	}{
		{"none", `{"type":"system","subtype":"init","session_id":""}`, ``},
		{"usage with bad members", `{"type":"result","subtype":"success","session_id":"","usage":{"input_tokens":-1,"output_tokens":2.5,"cache_read_input_tokens":"7","cache_creation_input_tokens":3},"total_cost_usd":-1,"num_turns":-2,"duration_ms":1.5}`,
			`{"usage":{"input_tokens":3,"output_tokens":0,"cached_input_tokens":0,"cache_read_input_tokens":0,"cache_creation_input_tokens":3}}`},
		// Cache reads and writes are input tokens: input_tokens counts them.
		{"cache reads and writes", `{"type":"result","subtype":"success","session_id":"","usage":{"input_tokens":120,"output_tokens":25,"cache_read_input_tokens":2000,"cache_creation_input_tokens":300}}`,
			`{"usage":{"input_tokens":2420,"output_tokens":25,"cached_input_tokens":2000,"cache_read_input_tokens":2000,"cache_creation_input_tokens":300}}`},
		{"hostile counts saturate", `{"type":"result","subtype":"success","session_id":"","usage":{"input_tokens":9223372036854775807,"cache_read_input_tokens":9223372036854775807,"cache_creation_input_tokens":5}}`,
			`{"usage":{"input_tokens":9223372036854775807,"output_tokens":0,"cached_input_tokens":9223372036854775807,"cache_read_input_tokens":9223372036854775807,"cache_creation_input_tokens":5}}`},
		{"cost overflow", `{"type":"result","subtype":"success","session_id":"","total_cost_usd":1e999}`, ``},
		{"usage not an object", `{"type":"result","subtype":"success","session_id":"<s>","usage":[1],"total_cost_usd":1.5e-3}`,
			`{"schema":"agent_api.session.handle.v1","session":{"id":"<s>"},"cost_usd":0.0015}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newMapper()
			mapAll(m, tt.line)
			if _, data := m.completion(); string(data) != tt.want {
				t.Errorf("data %s, want %s", data, tt.want)
			}
		})
	}
}

func TestMapperParseErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ line, desc string }{
		{`not json SECRET`, descInvalidJSON},
		{`{"type":"assistant","SECRET"`, descInvalidJSON},
		{`"SECRET"`, descNotObject},
		{`[1,"SECRET"]`, descNotObject},
		{`42`, descNotObject},
		{`null`, descType},
		{`{"type":null,"x":"SECRET"}`, descType},
		{`{"type":1}`, descType},
		{`{"type":"user","message":"SECRET"}`, descSessionID},
		{`{"type":"result","subtype":"success","session_id":7}`, descSessionID},
		{`{"type":"system","session_id":"s"}`, descSubtype},
		{`{"type":"result","session_id":"s","subtype":["SECRET"]}`, descSubtype},
		{`{"type":"result","session_id":"s","subtype":"success","is_error":"SECRET"}`, descIsError},
		{`{"type":"result","session_id":"s","subtype":"success","is_error":1}`, descIsError},
		{`{"type":"stream_event","session_id":"s"}`, descEvent},
		{`{"type":"stream_event","session_id":"s","event":["SECRET"]}`, descEvent},
		{`{"type":"stream_event","session_id":"s","event":{"kind":"SECRET"}}`, descEventType},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			m := newMapper()
			got := m.mapLine([]byte(tt.line))
			want := parseErrorPrefix + tt.desc + " (line_bytes=" + strconv.Itoa(len(tt.line)) + ")"
			if len(got) != 1 || got[0].Kind != agent.EventError || got[0].Channel != "error" || got[0].Message != want {
				t.Fatalf("events %+v, want one error %q", got, want)
			}
			if m.parseErrors != 1 || m.sessionDone || m.sawAssistant || m.last != nil {
				t.Error("a bad line changed the mapper's state")
			}
		})
	}
	m := newMapper()
	got := m.tooLong(17 << 20)
	if len(got) != 1 || got[0].Message != parseErrorPrefix+"line too long (line_bytes=17825792)" || m.parseErrors != 1 {
		t.Errorf("too long: %+v", got)
	}
}

func TestNotFoundPhrase(t *testing.T) {
	for s, want := range map[string]bool{
		"No conversation found with session ID: 0b6c": true,
		"session not found":                           true,
		"Thread NOT FOUND":                            true,
		"no sessions":                                 true,
		"unknown conversation id":                     true,
		"Reached maximum number of turns (1)":         false,
		"file not found: /tmp/x":                      false,
		"":                                            false,
	} {
		if got := notFoundPhrase(s); got != want {
			t.Errorf("notFoundPhrase(%q) = %v", s, got)
		}
	}
}

// messageRE is every message the mapper may put on an event: fixed texts,
// plain tokens and numbers only.
var messageRE = regexp.MustCompile(`^(system [a-z][a-z0-9_]*|user message|session handle|session handle omitted: id exceeds 1024 bytes|` +
	`result (success|other|error|error_[a-z_]+)( is_error=true)?( api_error_status=\d+)?|` +
	`claude_code stream parse error \(redacted\): (invalid JSON|not a JSON object|missing string field type|missing string field session_id \(or sessionId\)|missing string field subtype|stream_event missing object field event|stream_event event missing string field type|result field is_error must be a bool|line too long) \(line_bytes=\d+\))$`)

// FuzzMapLines: the mapper never panics; every event keeps the payload
// rules and a message from the fixed set; a line that does not parse gives
// exactly one parse error event and nothing of its content; tool events
// carry the facet and no more than the tool's name and id.
func FuzzMapLines(f *testing.F) {
	entries, err := scenarioFS.ReadDir("testdata/scenarios")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		b, err := scenarioFS.ReadFile("testdata/scenarios/" + e.Name())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		for l := range bytes.SplitSeq(b, []byte("\n")) {
			f.Add(l)
		}
	}
	f.Add([]byte(`{"type":"result","subtype":"success","session_id":"x","is_error":true,"api_error_status":401}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := newMapper()
		check := func(evs []agent.Event, raw []byte) {
			for _, ev := range evs {
				switch ev.Kind {
				case agent.EventTextOutput:
					if ev.Message != "" {
						t.Fatalf("text event with a message: %+v", ev)
					}
				case agent.EventToolCall, agent.EventToolResult:
					var tf facet.ToolFacet
					if ev.Text != "" || ev.Message != "" || json.Unmarshal(ev.Data, &tf) != nil || tf.Schema != agent.CapToolsStructured {
						t.Fatalf("tool event %+v", ev)
					}
					for _, s := range []*string{tf.Tool.ToolName, tf.Tool.ToolUseID} {
						if s != nil && len(*s) > maxToolFieldBytes {
							t.Fatalf("oversize tool field in %s", ev.Data)
						}
					}
				case agent.EventStatus, agent.EventError:
					if ev.Text != "" || !messageRE.MatchString(ev.Message) {
						t.Fatalf("message %q not from the fixed set", ev.Message)
					}
				case agent.EventUnknown:
					if ev.Text != "" || ev.Message != "" || ev.Data != nil {
						t.Fatalf("unknown event with payload: %+v", ev)
					}
				default:
					t.Fatalf("event kind %q", ev.Kind)
				}
				if ev.Data != nil && !json.Valid(ev.Data) {
					t.Fatalf("invalid data %q", ev.Data)
				}
			}
		}
		for l := range bytes.SplitSeq(data, []byte("\n")) {
			held := len(m.pending)
			before := m.parseErrors
			evs := m.mapLine(l)
			check(evs, l)
			if m.parseErrors > before {
				if len(evs) != held+1 || evs[held].Kind != agent.EventError {
					t.Fatalf("a bad line gave %d events", len(evs)-held)
				}
				if !strings.HasSuffix(evs[held].Message, "(line_bytes="+strconv.Itoa(len(l))+")") {
					t.Fatalf("parse error %q", evs[held].Message)
				}
			}
		}
		check(m.finish(), nil)
		ft, data2 := m.completion()
		if len(ft) > agent.MaxFinalTextBytes || data2 != nil && !json.Valid(data2) {
			t.Fatalf("completion %d bytes of text, data %q", len(ft), data2)
		}
	})
}

// BenchmarkMapLines measures the mapper's throughput on the happy-path
// scenarios' lines (partial text and a tool round trip).
func BenchmarkMapLines(b *testing.B) {
	var lines [][]byte
	for _, name := range []string{"partial_text.jsonl", "tool_roundtrip.jsonl"} {
		data, err := scenarioFS.ReadFile("testdata/scenarios/" + name)
		if err != nil {
			b.Fatal(err)
		}
		for l := range bytes.SplitSeq(bytes.TrimSpace(data), []byte("\n")) {
			lines = append(lines, l)
		}
	}
	total := 0
	for _, l := range lines {
		total += len(l)
	}
	b.ReportAllocs()
	b.SetBytes(int64(total))
	n := 0
	for b.Loop() {
		m := newMapper()
		for _, l := range lines {
			m.mapLine(l)
		}
		m.finish()
		n += len(lines)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "lines/s")
}
