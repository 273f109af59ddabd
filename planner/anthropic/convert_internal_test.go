package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/planner"
)

func marshalParams(t *testing.T, p anthropic.MessageNewParams) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Conversations Render does not make, mapped as the API needs them.
func TestParamsEdgeCases(t *testing.T) {
	t.Parallel()
	p := &Planner{opts: Options{Model: "m", MaxTokens: 100}}
	for _, tc := range []struct {
		name string
		conv planner.Conversation
		want string
	}{
		{"no system, empty texts skipped, empty arguments and result", planner.Conversation{Messages: []planner.Message{
			{Role: planner.RoleUser, Text: ""},
			{Role: planner.RoleUser, Text: "ctx", Cache: true},
			{Role: planner.RoleAssistant, Text: "thinking aloud", ToolCalls: []planner.ToolCall{{ID: "c1", Name: "f", Arguments: ""}}},
			{Role: planner.RoleTool, ToolCallID: "c1"},
			{Role: planner.RoleUser, Text: "go on"},
		}, Tools: []planner.Tool{{Name: "f"}}},
			`{"max_tokens":100,"messages":[{"content":[{"text":"ctx","cache_control":{"type":"ephemeral"},"type":"text"}],"role":"user"},` +
				`{"content":[{"text":"thinking aloud","type":"text"},{"id":"c1","input":{},"name":"f","type":"tool_use"}],"role":"assistant"},` +
				`{"content":[{"tool_use_id":"c1","type":"tool_result"},{"text":"go on","type":"text"}],"role":"user"}],` +
				`"model":"m","tools":[{"input_schema":{"type":"object"},"name":"f"}]}`},
		{"an empty assistant message is dropped, users merge", planner.Conversation{System: "s", Messages: []planner.Message{
			{Role: planner.RoleUser, Text: "a"}, {Role: planner.RoleAssistant}, {Role: planner.RoleUser, Text: "b"},
		}},
			`{"max_tokens":100,"messages":[{"content":[{"text":"a","type":"text"},{"text":"b","type":"text"}],"role":"user"}],` +
				`"model":"m","system":[{"text":"s","cache_control":{"type":"ephemeral"},"type":"text"}]}`},
		{"cache on an assistant message and a tool result", planner.Conversation{Messages: []planner.Message{
			{Role: planner.RoleUser, Text: "a"},
			{Role: planner.RoleAssistant, ToolCalls: []planner.ToolCall{{ID: "c1", Name: "f", Arguments: ` {"x": 1} `}}, Cache: true},
			{Role: planner.RoleTool, ToolCallID: "c1", Text: `{"ok":true}`, Cache: true},
		}},
			`{"max_tokens":100,"messages":[{"content":[{"text":"a","type":"text"}],"role":"user"},` +
				`{"content":[{"id":"c1","input":{"x":1},"name":"f","cache_control":{"type":"ephemeral"},"type":"tool_use"}],"role":"assistant"},` +
				`{"content":[{"tool_use_id":"c1","cache_control":{"type":"ephemeral"},"content":[{"text":"{\"ok\":true}","type":"text"}],"type":"tool_result"}],"role":"user"}],"model":"m"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			params, err := p.params(&tc.conv)
			if err != nil {
				t.Fatal(err)
			}
			if got := marshalParams(t, params); got != tc.want {
				t.Errorf("body\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// At most four cache breakpoints: the system's and the first three
// messages asking for one.
func TestParamsBreakpointLimit(t *testing.T) {
	p := &Planner{opts: Options{Model: "m", MaxTokens: 1}}
	conv := &planner.Conversation{System: "s"}
	for i := range 6 {
		conv.Messages = append(conv.Messages, planner.Message{Role: planner.RoleUser, Text: strings.Repeat("x", i+1), Cache: true})
	}
	params, err := p.params(conv)
	if err != nil {
		t.Fatal(err)
	}
	body := marshalParams(t, params)
	if n := strings.Count(body, "cache_control"); n != maxBreakpoints {
		t.Errorf("%d breakpoints, want %d: %s", n, maxBreakpoints, body)
	}
	if !strings.Contains(body, `{"text":"xxx","cache_control"`) || strings.Contains(body, `{"text":"xxxx","cache_control"`) {
		t.Errorf("the breakpoints are not the first ones: %s", body)
	}
}

func TestParamsErrors(t *testing.T) {
	p := &Planner{opts: Options{Model: "m", MaxTokens: 1}}
	for _, tc := range []struct {
		conv planner.Conversation
		want string
	}{
		{planner.Conversation{Messages: []planner.Message{{Role: planner.RoleAssistant, ToolCalls: []planner.ToolCall{{ID: "c9", Arguments: "[1]"}}}}}, `tool call "c9"`},
		{planner.Conversation{Messages: []planner.Message{{Role: planner.RoleAssistant, ToolCalls: []planner.ToolCall{{ID: "c8", Arguments: "{"}}}}}, `tool call "c8"`},
		{planner.Conversation{Messages: []planner.Message{{Role: "system", Text: "x"}}}, `unknown role "system"`},
		{planner.Conversation{Tools: []planner.Tool{{Name: "g", Parameters: json.RawMessage(`[]`)}}}, `tools[0] "g"`},
	} {
		if _, err := p.params(&tc.conv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("params: %v, want an error naming %s", err, tc.want)
		}
	}
}

func TestStopReason(t *testing.T) {
	for in, want := range map[anthropic.StopReason]planner.StopReason{
		"tool_use": planner.StopToolUse, "max_tokens": planner.StopLength, "model_context_window_exceeded": planner.StopLength,
		"refusal": planner.StopRefusal, "end_turn": planner.StopEnd, "stop_sequence": planner.StopEnd, "pause_turn": planner.StopEnd,
		"": planner.StopEnd, "something_new": planner.StopEnd,
	} {
		if got := stopReason(in); got != want {
			t.Errorf("stopReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestResponse(t *testing.T) {
	var msg anthropic.Message
	raw := `{"id":"m","type":"message","role":"assistant","model":"m","content":[
		{"type":"text","text":"one"},{"type":"text","text":""},
		{"type":"tool_use","id":"t1","name":"f","input":{ "a" : [1, 2] }},
		{"type":"thinking","thinking":"hidden","signature":"s"},
		{"type":"text","text":"two"},
		{"type":"tool_use","id":"t2","name":"g","input":"{not json"},
		{"type":"tool_use","id":"t3","name":"h","input":{}}],
		"stop_reason":"refusal","stop_details":{"type":"refusal","category":"cyber","explanation":"no"},
		"usage":{"input_tokens":5,"cache_read_input_tokens":7,"cache_creation_input_tokens":11,"output_tokens":13}}`
	if err := json.Unmarshal([]byte(raw), &msg); err != nil {
		t.Fatal(err)
	}
	p := &Planner{}
	got := p.response(&msg, nil)
	want := &planner.Response{Text: "one\ntwo", Stop: planner.StopRefusal, Refusal: "no",
		ToolCalls: []planner.ToolCall{{ID: "t1", Name: "f", Arguments: `{"a":[1,2]}`}, {ID: "t2", Name: "g", Arguments: `"{not json"`}, {ID: "t3", Name: "h", Arguments: `{}`}},
		Usage:     contextos.PlanUsage{InputTokens: 23, CachedInputTokens: 7, OutputTokens: 13}}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("response\n got %s\nwant %s", gb, wb)
	}
}

func TestUsage(t *testing.T) {
	price := planner.Price{InputUSDPerMTok: 1, CachedInputUSDPerMTok: 0.1, CacheWriteUSDPerMTok: 2, OutputUSDPerMTok: 10}
	priced := &Planner{price: price, priced: true}
	u := anthropic.Usage{InputTokens: 100, CacheReadInputTokens: 1000, CacheCreationInputTokens: 10, OutputTokens: 50}
	got := priced.usage(u)
	want := contextos.PlanUsage{InputTokens: 1110, CachedInputTokens: 1000, OutputTokens: 50, CostCents: (100*1 + 1000*0.1 + 10*2 + 50*10) / 1e4}
	if math.Abs(got.CostCents-want.CostCents) > 1e-12 {
		t.Errorf("cost %v, want %v", got.CostCents, want.CostCents)
	}
	got.CostCents = want.CostCents
	if got != want {
		t.Errorf("usage %+v, want %+v", got, want)
	}
	// A model without a price costs nothing.
	if c := (&Planner{}).usage(u).CostCents; c != 0 {
		t.Errorf("unpriced cost %v", c)
	}
	// Counts a server should never send: negative is 0, huge saturates.
	odd := (&Planner{}).usage(anthropic.Usage{InputTokens: -5, CacheReadInputTokens: math.MaxInt64, CacheCreationInputTokens: math.MaxInt64, OutputTokens: -1})
	if odd.InputTokens != math.MaxInt32 || odd.CachedInputTokens != math.MaxInt32 || odd.OutputTokens != 0 || odd.CachedInputTokens > odd.InputTokens {
		t.Errorf("usage %+v", odd)
	}
}

func TestAPIErrorText(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New(`received error while streaming: {"error":"sk-ant-secret"`), "anthropic: messages: the stream reported an error event"},
		{errors.New("dial tcp: connection refused"), "anthropic: messages: dial tcp: connection refused"},
		{&anthropic.Error{StatusCode: 503, RequestID: "req_\x01x"}, `anthropic: messages: status 503 Service Unavailable`},
		{&anthropic.Error{StatusCode: 503, RequestID: "sk-ant-api03-SECRET"}, `anthropic: messages: status 503 Service Unavailable`},
		{&anthropic.Error{StatusCode: 503, RequestID: "req_011CSHoEeqs5C35K2UUqR7Fy"}, `anthropic: messages: status 503 Service Unavailable (request-id "req_011CSHoEeqs5C35K2UUqR7Fy")`},
	} {
		err := callError(ctx, tc.err)
		if err.Error() != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("got %q, want %q", err.Error(), tc.want)
		}
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := callError(canceled, context.Canceled); err != context.Canceled {
		t.Errorf("a canceled call's error is %v", err)
	}
}
