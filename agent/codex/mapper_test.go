package codex

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/internal/facet"
)

// mapLines maps lines with a fresh mapper and renders the events compactly:
// kind, channel, text/message, data.
func mapLines(m *mapper, lines ...string) []string {
	var out []string
	for _, l := range lines {
		for _, ev := range m.line([]byte(l)) {
			s := string(ev.Kind) + "|" + ev.Channel + "|" + ev.Text + ev.Message
			if ev.Data != nil {
				s += "|" + string(ev.Data)
			}
			out = append(out, s)
		}
	}
	return out
}

// tool renders a tools facet as mapLines does.
func tool(kind, channel, facet string) string {
	return kind + "|" + channel + "||{\"schema\":\"agent_api.tools.structured.v1\",\"tool\":" + facet + "}"
}

func TestMapperLines(t *testing.T) {
	t.Parallel()
	const thread = `{"type":"thread.started","thread_id":"th"}`
	const sessionTh = `status|status||{"schema":"agent_api.session.handle.v1","session":{"id":"th"}}`
	tests := []struct {
		name   string
		resume bool
		lines  []string
		want   []string
	}{{
		name:  "thread.resumed alias and synthetic turns never reset",
		lines: []string{`{"type":"thread.resumed","thread_id":"th"}`, `{"type":"turn.started"}`, `{"type":"turn.completed"}`, `{"type":"turn.started"}`, `{"type":"item.started","item":{"id":"i","type":"web_search","query":"q","action":{"type":"search","query":"q"}}}`},
		want: []string{sessionTh, "status|status|", "status|status|", "status|status|",
			tool("tool_call", "tool", `{"backend_item_id":"i","thread_id":"th","turn_id":"synthetic-turn-2","kind":"web_search","phase":"start","status":"running","exit_code":null,"bytes":{"stdout":0,"stderr":0,"diff":0,"result":0},"tool_name":null,"tool_use_id":null}`)},
	}, {
		name:  "thread.started clears the turn",
		lines: []string{thread, `{"type":"turn.started","turn_id":"t1"}`, `{"type":"thread.started","thread_id":"th2"}`, `{"type":"item.completed","item":{"id":"x","type":"file_change","changes":[],"status":"completed","patch":"+a\n"}}`},
		want: []string{sessionTh, "status|status|", "status|status|",
			tool("tool_result", "tool", `{"backend_item_id":"x","thread_id":"th2","turn_id":null,"kind":"file_change","phase":"complete","status":"completed","exit_code":null,"bytes":{"stdout":0,"stderr":0,"diff":3,"result":0},"tool_name":null,"tool_use_id":null}`)},
	}, {
		name:  "mcp tool call: result bytes, failed status is still completed",
		lines: []string{thread, `{"type":"item.completed","item":{"id":"m","type":"mcp_tool_call","server":"s","tool":"t","arguments":{"a":"SECRET-ARG"},"result":{"content":[ {"type":"text","text":"SECRET-OUT"} ],"structured_content":null},"error":null,"status":"failed"}}`},
		want: []string{sessionTh,
			tool("tool_result", "tool", `{"backend_item_id":"m","thread_id":"th","turn_id":null,"kind":"mcp_tool_call","phase":"complete","status":"completed","exit_code":null,"bytes":{"stdout":0,"stderr":0,"diff":0,"result":75},"tool_name":null,"tool_use_id":null}`)},
	}, {
		name:  "web search results bytes, collab tool call",
		lines: []string{`{"type":"item.completed","item_id":"w","item_type":"web_search","results":[1,2]}`, `{"type":"item.started","item":{"id":"c","type":"collab_tool_call","tool":"spawn","prompt":"SECRET-PROMPT","status":"in_progress"}}`},
		want: []string{
			tool("tool_result", "tool", `{"backend_item_id":"w","thread_id":null,"turn_id":null,"kind":"web_search","phase":"complete","status":"completed","exit_code":null,"bytes":{"stdout":0,"stderr":0,"diff":0,"result":5},"tool_name":null,"tool_use_id":null}`),
			tool("tool_call", "tool", `{"backend_item_id":"c","thread_id":null,"turn_id":null,"kind":"collab_tool_call","phase":"start","status":"running","exit_code":null,"bytes":{"stdout":0,"stderr":0,"diff":0,"result":0},"tool_name":null,"tool_use_id":null}`)},
	}, {
		name: "legacy aliases: item.created, item.delta with output/err, id, patch",
		lines: []string{
			`{"type":"item.created","id":"a","item_type":"command_execution","content":{"command":"x"}}`,
			`{"type":"item.delta","id":"a","item_type":"command_execution","delta":{"output":"12345","err":"12"}}`,
			`{"type":"item.updated","id":"a","item_type":"command_execution","delta":{"error_output":"1234"}}`,
			`{"type":"item.completed","id":"p","item_type":"file_change","content":{"file_path":"/a","patch":"1234567"}}`,
		},
		want: []string{
			tool("tool_call", "tool", `{"backend_item_id":"a","thread_id":null,"turn_id":null,"kind":"command_execution","phase":"start","status":"running","exit_code":null,"bytes":{"stdout":0,"stderr":0,"diff":0,"result":0},"tool_name":null,"tool_use_id":null}`),
			tool("tool_call", "tool", `{"backend_item_id":"a","thread_id":null,"turn_id":null,"kind":"command_execution","phase":"delta","status":"running","exit_code":null,"bytes":{"stdout":5,"stderr":2,"diff":0,"result":0},"tool_name":null,"tool_use_id":null}`),
			tool("tool_call", "tool", `{"backend_item_id":"a","thread_id":null,"turn_id":null,"kind":"command_execution","phase":"delta","status":"running","exit_code":null,"bytes":{"stdout":0,"stderr":4,"diff":0,"result":0},"tool_name":null,"tool_use_id":null}`),
			tool("tool_result", "tool", `{"backend_item_id":"p","thread_id":null,"turn_id":null,"kind":"file_change","phase":"complete","status":"completed","exit_code":null,"bytes":{"stdout":0,"stderr":0,"diff":7,"result":0},"tool_name":null,"tool_use_id":null}`),
		},
	}, {
		name: "text: snapshots, deltas, the 2025 in-item item_type",
		lines: []string{
			`{"type":"item.started","item":{"id":"r","type":"reasoning","text":"think"}}`,
			`{"type":"item.delta","item_id":"m","item_type":"agent_message","delta":"Hel"}`,
			`{"type":"item.delta","item_id":"m","item_type":"agent_message","delta":{"text":"lo"}}`,
			`{"type":"item.completed","item_id":"m","item_type":"agent_message","content":{"text":"Hello"}}`,
			`{"type":"item.completed","item":{"id":"o","item_type":"agent_message","text":"old"}}`,
		},
		want: []string{"text_output|assistant|think", "text_output|assistant|Hel", "text_output|assistant|lo", "text_output|assistant|Hello", "text_output|assistant|old"},
	}, {
		name: "todo list, error item, unknown item, unknown types",
		lines: []string{
			`{"type":"item.updated","item":{"id":"t","type":"todo_list","items":[{"text":"x","completed":false}]}}`,
			`{"type":"item.completed","item":{"id":"e","type":"error","message":"careful"}}`,
			`{"type":"item.completed","item":{"id":"z","type":"image_generation","SECRET":1}}`,
			`{"type":"item.plan.delta","item_id":"p","delta":"SECRET-PLAN"}`,
			`{"type":"request_user_input","id":"q","call_id":"c","questions":["SECRET-Q"]}`,
		},
		want: []string{"status|status|", "error|error|careful", "unknown||", "unknown||", "unknown||"},
	}, {
		name: "item.failed: tool and otherwise",
		lines: []string{
			`{"type":"item.failed","item_id":"f","item_type":"mcp_tool_call","error":{"message":"SECRET"}}`,
			`{"type":"item.failed","item_id":"g","error":{"message":"it broke"}}`,
			`{"type":"item.failed","item_id":"h"}`,
		},
		want: []string{
			tool("tool_result", "tool", `{"backend_item_id":"f","thread_id":null,"turn_id":null,"kind":"mcp_tool_call","phase":"fail","status":"failed","exit_code":null,"bytes":{"stdout":0,"stderr":0,"diff":0,"result":0},"tool_name":null,"tool_use_id":null}`),
			"error|error|it broke", "error|error|item failed",
		},
	}, {
		name:  "top-level error and turn.failed",
		lines: []string{`{"type":"error","message":"Reconnecting... 2/5"}`, `{"type":"turn.failed","error":{"message":"boom"}}`},
		want:  []string{"error|error|Reconnecting... 2/5", "status|status|turn failed"},
	}, {
		name:  "blank error messages get a fixed one",
		lines: []string{`{"type":"error","message":" "}`, `{"type":"item.completed","item":{"id":"e","type":"error","message":""}}`, `{"type":"item.failed","error":{"message":""}}`},
		want:  []string{"error|error|codex error", "error|error|codex error", "error|error|item failed"},
	}, {
		name:   "a resume keeps top-level errors back",
		resume: true,
		lines:  []string{`{"type":"error","message":"thread not found"}`, `{"type":"turn.failed","error":{"message":"boom"}}`},
		want:   []string{"status|status|turn failed"},
	}, {
		name: "parse errors name only a fixed description and the length",
		lines: []string{
			`not json SECRET`, `[1,2]`, `"SECRET"`, `{"SECRET":1}`, `{"type":5}`, `{"type":"thread.started"}`,
			`{"type":"thread.started","thread_id":7}`, `{"type":"item.completed","item":"SECRET"}`,
			`{"type":"item.completed","item":{"id":"a"}}`, `{"type":"item.completed","item":{"type":"agent_message"}}`,
			`{"type":"error"}`, `{"type":"item.completed","item":{"type":"error"}}`, `{"type":"item.completed","item":{"id":5,"type":"reasoning","text":"x"}}`,
			`{"type":"item.completed","content":"SECRET","item_type":"command_execution"}`, `{"type":"item.delta","delta":7,"item_type":"command_execution"}`,
			`{"type":"turn.started","turn_id":{"SECRET":1}}`, `{"type":"error","message":"x"} SECRET`,
		},
		want: []string{
			"error|error|codex stream parse error (redacted): invalid JSON (line_bytes=15)",
			"error|error|codex stream parse error (redacted): not a JSON object (line_bytes=5)",
			"error|error|codex stream parse error (redacted): not a JSON object (line_bytes=8)",
			"error|error|codex stream parse error (redacted): missing string field `type` (line_bytes=12)",
			"error|error|codex stream parse error (redacted): field `type` is not a string (line_bytes=10)",
			"error|error|codex stream parse error (redacted): missing string field `thread_id` (line_bytes=25)",
			"error|error|codex stream parse error (redacted): field `thread_id` is not a string (line_bytes=39)",
			"error|error|codex stream parse error (redacted): field `item` is not an object (line_bytes=41)",
			"error|error|codex stream parse error (redacted): missing string field `item_type` (or `item.type`) (line_bytes=43)",
			"error|error|codex stream parse error (redacted): missing string field `text` (line_bytes=57)",
			"error|error|codex stream parse error (redacted): missing string field `message` (line_bytes=16)",
			"error|error|codex stream parse error (redacted): missing string field `message` (line_bytes=49)",
			"error|error|codex stream parse error (redacted): field `item_id` is not a string (line_bytes=71)",
			"error|error|codex stream parse error (redacted): field `content` is not an object (line_bytes=76)",
			"error|error|codex stream parse error (redacted): field `delta` is not an object (line_bytes=63)",
			"error|error|codex stream parse error (redacted): field `turn_id` is not a string (line_bytes=46)",
			"error|error|codex stream parse error (redacted): invalid JSON (line_bytes=37)",
		},
	}, {
		name:  "blank lines map to nothing; a blank session id is ignored",
		lines: []string{"", "  \t", `{"type":"turn.started","thread_id":"  "}`, thread},
		want:  []string{"status|status|", sessionTh},
	}, {
		name:  "the session facet goes on the first data-less status only once",
		lines: []string{thread, `{"type":"thread.started","thread_id":"other"}`},
		want:  []string{sessionTh, "status|status|"},
	}, {
		name:  "an oversize session id is omitted with one warning; facet ids are nulled",
		lines: []string{`{"type":"item.started","thread_id":"` + strings.Repeat("x", 1025) + `","item_id":"` + strings.Repeat("i", 1025) + `","item_type":"command_execution"}`, thread},
		want: []string{
			tool("tool_call", "tool", `{"backend_item_id":null,"thread_id":null,"turn_id":null,"kind":"command_execution","phase":"start","status":"running","exit_code":null,"bytes":{"stdout":0,"stderr":0,"diff":0,"result":0},"tool_name":null,"tool_use_id":null}`),
			"status|status|session handle id oversize: len_bytes=1025",
			"status|status|",
		},
	}, {
		name:  "a session id of exactly 1024 bytes is kept",
		lines: []string{`{"type":"thread.started","thread_id":"` + strings.Repeat("y", 1024) + `"}`},
		want:  []string{`status|status||{"schema":"agent_api.session.handle.v1","session":{"id":"` + strings.Repeat("y", 1024) + `"}}`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mapLines(newMapper(tt.resume), tt.lines...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMapperTooLong(t *testing.T) {
	t.Parallel()
	m := newMapper(false)
	evs := m.tooLong(17 << 20)
	if len(evs) != 1 || evs[0].Message != "codex stream parse error (redacted): line too long (line_bytes=17825792)" {
		t.Errorf("events %+v", evs)
	}
	if !m.parseErrors {
		t.Error("a too-long line does not count as a parse error")
	}
}

func TestCompletionData(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"nothing known", []string{`{"type":"turn.started"}`}, ""},
		{"usage only, old three-key shape", []string{`{"type":"turn.completed","usage":{"input_tokens":5,"cached_input_tokens":1,"output_tokens":2}}`},
			`{"usage":{"input_tokens":5,"cached_input_tokens":1,"cache_write_input_tokens":0,"output_tokens":2,"reasoning_output_tokens":0}}`},
		{"the last usage wins; bad counters count 0", []string{
			`{"type":"thread.started","thread_id":"th"}`,
			`{"type":"turn.completed","usage":{"input_tokens":5}}`,
			`{"type":"turn.completed","usage":{"input_tokens":-1,"output_tokens":"7","reasoning_output_tokens":1.5,"cached_input_tokens":3}}`,
		}, `{"schema":"agent_api.session.handle.v1","session":{"id":"th"},"usage":{"input_tokens":0,"cached_input_tokens":3,"cache_write_input_tokens":0,"output_tokens":0,"reasoning_output_tokens":0}}`},
		{"usage that is no object is ignored", []string{`{"type":"turn.completed","usage":[1]}`}, ""},
		{"an oversize session is not in the data", []string{`{"type":"thread.started","thread_id":"` + strings.Repeat("x", 2000) + `"}`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newMapper(false)
			mapLines(m, tt.lines...)
			if got := string(m.completionData()); got != tt.want {
				t.Errorf("data %s, want %s", got, tt.want)
			}
		})
	}
}

func TestResumeNotFoundClassifier(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		lines  []string
		stderr string
		want   bool
	}{
		{"real 0.169 text", nil, "Error: thread/resume: thread/resume failed: no rollout found for thread id 0199 (code -32600)", true},
		{"upstream fake", nil, "session not found", true},
		{"case-insensitive thread", nil, "THREAD abc NOT FOUND", true},
		{"no sessions", nil, "No sessions in this directory", true},
		{"unknown thread", nil, "unknown thread x", true},
		{"suppressed error event", []string{`{"type":"error","message":"Session not found: x"}`}, "", true},
		{"file not found is not a session", nil, "config file not found", false},
		{"plain failure", nil, "Error: boom", false},
		{"a thread was seen", []string{`{"type":"thread.started","thread_id":"th"}`}, "session not found", false},
		{"a parse error was seen", []string{`garbage`}, "session not found", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newMapper(true)
			mapLines(m, tt.lines...)
			if got := m.resumeNotFound([]byte(tt.stderr)); got != tt.want {
				t.Errorf("resumeNotFound = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestArgsBuilderCheckArgv(t *testing.T) {
	t.Parallel()
	// The fake's own assertion must refuse what the CLI would refuse, or
	// the argv tests prove nothing.
	bad := [][]string{
		{"exec", "--json"},
		{"--sandbox", "workspace-write", "exec", "--color", "never", "--json", "--skip-git-repo-check", "--output-last-message", "/x"},
		{"--ask-for-approval", "sometimes", "--sandbox", "workspace-write", "exec", "--color", "never", "--skip-git-repo-check", "--json", "--output-last-message", "/x"},
		{"--sandbox", "workspace-write", "exec", "--color", "never", "--skip-git-repo-check", "--json"},
		{"--dangerously-bypass-approvals-and-sandbox", "--sandbox", "read-only", "exec", "--color", "never", "--skip-git-repo-check", "--json", "--output-last-message", "/x"},
	}
	for _, a := range bad {
		if checkArgv(a) == "" {
			t.Errorf("fake accepts %q", a)
		}
	}
	good := invocation{Approval: "never", Sandbox: "workspace-write", LastMessage: "/tmp/x"}.args()
	if why := checkArgv(good); why != "" {
		t.Errorf("fake refuses %q: %s", good, why)
	}
}

// checkPayload asserts the payload rules on one unbounded mapper event.
func checkPayload(t *testing.T, ev agent.Event) {
	t.Helper()
	switch ev.Kind {
	case agent.EventTextOutput:
		if ev.Message != "" || ev.Channel != "assistant" {
			t.Fatalf("text event %+v", ev)
		}
	case agent.EventStatus, agent.EventUnknown:
		if ev.Text != "" {
			t.Fatalf("%s with text", ev.Kind)
		}
	case agent.EventError:
		if ev.Text != "" || ev.Message == "" || ev.Data != nil {
			t.Fatalf("error event %+v", ev)
		}
	case agent.EventToolCall, agent.EventToolResult:
		if ev.Text != "" || ev.Message != "" {
			t.Fatalf("tool event %+v", ev)
		}
		var d struct {
			Schema string          `json:"schema"`
			Tool   json.RawMessage `json:"tool"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.Schema != agent.CapToolsStructured || d.Tool == nil {
			t.Fatalf("tool event without the facet: %s", ev.Data)
		}
		// Metadata only: exactly the facet's fields.
		dec := json.NewDecoder(bytes.NewReader(d.Tool))
		dec.DisallowUnknownFields()
		var f facet.Tool
		if err := dec.Decode(&f); err != nil || f.Kind == "" || f.Phase == "" || f.Status == "" {
			t.Fatalf("facet %s: %v", d.Tool, err)
		}
	default:
		t.Fatalf("kind %q", ev.Kind)
	}
	if ev.Data != nil && !json.Valid(ev.Data) {
		t.Fatalf("invalid data %q", ev.Data)
	}
}

// fuzzSentinel ends every unparsable fuzz line: no JSON document ends in
// an upper-case letter, so the line never parses.
const fuzzSentinel = "QZXFUZZSENTINELQZX"

func FuzzMapperLine(f *testing.F) {
	for _, name := range []string{"tool_run.jsonl", "parser_robustness.jsonl", "legacy_flat.jsonl", "no_credentials.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			f.Add(l)
		}
	}
	f.Add([]byte(`{"type":"item.delta","item_id":"m","item_type":"agent_message","delta":"x"}`))
	f.Add([]byte(`{"type":"item.failed","item_type":"web_search"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, m := range []*mapper{newMapper(false), contextMapper(), newMapper(true)} {
			for _, ev := range m.line(line) {
				checkPayload(t, ev)
			}
			_ = m.completionData()
			bad := append(append([]byte(nil), line...), fuzzSentinel...)
			evs := m.line(bad)
			if len(evs) != 1 || evs[0].Kind != agent.EventError || !strings.HasPrefix(evs[0].Message, "codex stream parse error (redacted): ") {
				t.Fatalf("unparsable line gave %+v", evs)
			}
			for _, ev := range evs {
				checkPayload(t, ev)
				if strings.Contains(ev.Message, fuzzSentinel) || bytes.Contains(ev.Data, []byte(fuzzSentinel)) {
					t.Fatalf("sentinel leaked: %+v", ev)
				}
			}
			if d := m.completionData(); d != nil && !json.Valid(d) {
				t.Fatalf("completion data %q", d)
			}
		}
	})
}

// contextMapper is a mapper inside a thread and a turn.
func contextMapper() *mapper {
	m := newMapper(false)
	m.line([]byte(`{"type":"thread.started","thread_id":"th"}`))
	m.line([]byte(`{"type":"turn.started"}`))
	return m
}

func BenchmarkMapperLines(b *testing.B) {
	var lines [][]byte
	for _, name := range []string{"tool_run.jsonl", "legacy_flat.jsonl"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if l = bytes.TrimSuffix(l, []byte("\r")); len(l) > 0 {
				lines = append(lines, l)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		m := newMapper(false)
		for _, l := range lines {
			m.line(l)
		}
		n += len(lines)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "lines/s")
}
