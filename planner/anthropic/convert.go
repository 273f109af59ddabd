package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/planner"
)

// maxBreakpoints is how many cache_control breakpoints the Messages API
// takes in one request.
const maxBreakpoints = 4

// errStreamCut is a stream that ended before its message_stop event.
var errStreamCut = errors.New("anthropic: messages: the stream ended before message_stop")

// errSecondStart is a stream that started a second message.
var errSecondStart = errors.New("anthropic: messages: the stream started a second message")

// params turns conv into the Messages request of a turn.
//
// The system text is one system block with a cache breakpoint; a message
// with Cache (the run's context message) gets one on its block. An
// assistant message is its text, then a tool_use block per call. Tool
// messages become tool_result blocks, and consecutive tool results and a
// following user text are one user message (the API takes alternating
// roles, with the results right after the turn that called the tools).
func (p *Planner) params(conv *planner.Conversation) (anthropic.MessageNewParams, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(p.opts.Model),
		MaxTokens: int64(p.opts.MaxTokens),
	}
	if t := p.opts.Temperature; t != nil {
		params.Temperature = param.NewOpt(*t)
	}
	breakpoints := 0
	cache := func() anthropic.CacheControlEphemeralParam {
		if breakpoints == maxBreakpoints {
			return anthropic.CacheControlEphemeralParam{}
		}
		breakpoints++
		return anthropic.NewCacheControlEphemeralParam()
	}
	if conv.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: conv.System, CacheControl: cache()}}
	}
	var pending []anthropic.ContentBlockParamUnion // the user message being built
	flush := func() {
		if len(pending) > 0 {
			params.Messages = append(params.Messages, anthropic.MessageParam{Role: anthropic.MessageParamRoleUser, Content: pending})
			pending = nil
		}
	}
	for i, m := range conv.Messages {
		switch m.Role {
		case planner.RoleUser:
			if m.Text == "" {
				continue // the API refuses an empty text block
			}
			b := &anthropic.TextBlockParam{Text: m.Text}
			if m.Cache {
				b.CacheControl = cache()
			}
			pending = append(pending, anthropic.ContentBlockParamUnion{OfText: b})
		case planner.RoleTool:
			r := &anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if m.Text != "" {
				r.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: m.Text}}}
			}
			if m.Cache {
				r.CacheControl = cache()
			}
			pending = append(pending, anthropic.ContentBlockParamUnion{OfToolResult: r})
		case planner.RoleAssistant:
			var content []anthropic.ContentBlockParamUnion
			if m.Text != "" {
				content = append(content, anthropic.ContentBlockParamUnion{OfText: &anthropic.TextBlockParam{Text: m.Text}})
			}
			for _, c := range m.ToolCalls {
				args := json.RawMessage(c.Arguments)
				if len(bytes.TrimSpace(args)) == 0 {
					args = json.RawMessage(`{}`)
				}
				if !isObject(args) {
					return params, fmt.Errorf("anthropic: messages[%d]: tool call %q: arguments are not a JSON object", i, c.ID)
				}
				content = append(content, anthropic.ContentBlockParamUnion{OfToolUse: &anthropic.ToolUseBlockParam{ID: c.ID, Name: c.Name, Input: args}})
			}
			if len(content) == 0 {
				continue
			}
			if m.Cache {
				setCache(content[len(content)-1], cache())
			}
			flush()
			params.Messages = append(params.Messages, anthropic.MessageParam{Role: anthropic.MessageParamRoleAssistant, Content: content})
		default:
			return params, fmt.Errorf("anthropic: messages[%d]: unknown role %q", i, m.Role)
		}
	}
	flush()
	for i, t := range conv.Tools {
		schema := json.RawMessage(t.Parameters)
		if len(bytes.TrimSpace(schema)) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		if !isObject(schema) {
			return params, fmt.Errorf("anthropic: tools[%d] %q: parameters are not a JSON object", i, t.Name)
		}
		tp := &anthropic.ToolParam{Name: t.Name, InputSchema: param.Override[anthropic.ToolInputSchemaParam](schema)}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: tp})
	}
	return params, nil
}

// setCache sets the cache breakpoint of an assistant block.
func setCache(b anthropic.ContentBlockParamUnion, c anthropic.CacheControlEphemeralParam) {
	switch {
	case b.OfText != nil:
		b.OfText.CacheControl = c
	case b.OfToolUse != nil:
		b.OfToolUse.CacheControl = c
	}
}

// isObject reports whether raw is one JSON object.
func isObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// response turns a model's message into a planner.Response. args, when
// not nil, are the streamed arguments' text of each tool_use block by its
// content index (the fragments as sent, which a cut-off stream leaves
// unfinished); else a block's arguments are its input.
func (p *Planner) response(msg *anthropic.Message, args map[int]*strings.Builder) *planner.Response {
	resp := &planner.Response{Stop: stopReason(msg.StopReason)}
	var text []string
	for i, b := range msg.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				text = append(text, b.Text)
			}
		case "tool_use":
			a := string(b.Input)
			if s, ok := args[i]; ok && s.Len() > 0 {
				a = s.String()
			}
			resp.ToolCalls = append(resp.ToolCalls, planner.ToolCall{ID: b.ID, Name: b.Name, Arguments: compact(a)})
		}
	}
	resp.Text = strings.Join(text, "\n")
	if resp.Stop == planner.StopRefusal {
		resp.Refusal = msg.StopDetails.Explanation
	}
	resp.Usage = p.usage(msg.Usage)
	return resp
}

// compact is a's compact JSON text, or a as it is when it is not JSON.
func compact(a string) string {
	if a == "" {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, []byte(a)) != nil {
		return a
	}
	return b.String()
}

// stopReason maps the API's stop_reason.
func stopReason(r anthropic.StopReason) planner.StopReason {
	switch r {
	case anthropic.StopReasonToolUse:
		return planner.StopToolUse
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		return planner.StopLength
	case anthropic.StopReasonRefusal:
		return planner.StopRefusal
	default: // end_turn, stop_sequence, pause_turn, unknown
		return planner.StopEnd
	}
}

// usage is a turn's usage: the input counts every input token (uncached,
// read from the cache, written to it), and the cost is the model's price
// of it (0 without a price).
func (p *Planner) usage(u anthropic.Usage) contextos.PlanUsage {
	read, write := count(u.CacheReadInputTokens), count(u.CacheCreationInputTokens)
	out := contextos.PlanUsage{
		InputTokens:       add(add(count(u.InputTokens), read), write),
		CachedInputTokens: read,
		OutputTokens:      count(u.OutputTokens),
	}
	if p.priced {
		out.CostCents = p.price.Cents(out, write)
	}
	return out
}

// count is an API token count as an int: a negative count is 0, a huge
// one saturates.
func count(n int64) int {
	return int(max(0, min(n, math.MaxInt32)))
}

// add adds two counts, saturating.
func add(a, b int) int {
	return int(min(int64(a)+int64(b), math.MaxInt32))
}

// stream makes one streamed Messages call, emitting its text and tool
// call fragments as plan deltas, and returns the Response the batch call
// would have made of the same message.
func (p *Planner) stream(ctx context.Context, req *contextos.PlanRequest, conv *planner.Conversation, params anthropic.MessageNewParams) (*planner.Response, error) {
	s := p.messages.NewStreaming(ctx, params)
	defer s.Close()
	var msg anthropic.Message
	args := map[int]*strings.Builder{} // the tool_use blocks' argument fragments by content index
	tools := map[int]int{}             // the tool_use blocks' positions among the calls by content index
	stopped := false
	// started and delta report the usage of message_start (the input) and
	// message_delta (the output's total); a failure after message_start
	// reports the usage so far.
	started, delta := false, false
	failed := func(err error) error {
		if !started {
			return err
		}
		return &contextos.PlanUsageError{Usage: p.usage(msg.Usage), Err: err}
	}
	// texts are the text blocks' deltas by content index: the SDK's
	// Accumulate adds each to a string, which takes time quadratic in
	// the text's length (seconds for a few MiB a server streams).
	texts := map[int]*strings.Builder{}
	begun := false // a message_start arrived
	for s.Next() {
		ev := s.Current()
		// One message a stream: a second message_start would replace the
		// message under the content and argument fragments gathered so
		// far.
		if ev.Type == "message_start" {
			if begun {
				return nil, failed(errSecondStart)
			}
			begun = true
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" && ev.Index >= 0 && ev.Index < int64(len(msg.Content)) {
			b, ok := texts[int(ev.Index)]
			if !ok {
				b = &strings.Builder{}
				texts[int(ev.Index)] = b
			}
			b.WriteString(ev.Delta.Text)
		} else if err := msg.Accumulate(ev); err != nil {
			return nil, failed(&apiError{err: err})
		}
		switch ev.Type {
		case "message_start":
			started = ev.Message.JSON.Usage.Valid()
		case "message_delta":
			delta = delta || ev.JSON.Usage.Valid()
		case "content_block_start":
			switch cb := ev.ContentBlock; cb.Type {
			case "text":
				if cb.Text != "" {
					req.Emit(contextos.PlanDelta{Text: cb.Text})
				}
			case "tool_use":
				n := len(tools)
				tools[int(ev.Index)] = n
				args[int(ev.Index)] = &strings.Builder{}
				req.Emit(contextos.PlanDelta{ToolIndex: n, ToolName: toolName(conv, cb.Name)})
			}
		case "content_block_delta":
			switch d := ev.Delta; d.Type {
			case "text_delta":
				if d.Text != "" {
					req.Emit(contextos.PlanDelta{Text: d.Text})
				}
			case "input_json_delta":
				if b, ok := args[int(ev.Index)]; ok && d.PartialJSON != "" {
					b.WriteString(d.PartialJSON)
					req.Emit(contextos.PlanDelta{ToolIndex: tools[int(ev.Index)], ToolArgs: d.PartialJSON})
				}
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := s.Err(); err != nil {
		return nil, failed(callError(ctx, err))
	}
	if !stopped {
		if err := ctx.Err(); err != nil {
			return nil, failed(err)
		}
		return nil, failed(errStreamCut)
	}
	if !started || !delta {
		return nil, errNoUsage
	}
	for i, b := range texts {
		if i >= 0 && i < len(msg.Content) {
			msg.Content[i].Text += b.String()
		}
	}
	return p.response(&msg, args), nil
}

// toolName is the name a plan delta gives a tool call: the capability id
// the function calls, or the function name (propose_decision, or one the
// conversation does not have).
func toolName(conv *planner.Conversation, name string) string {
	if c, ok := conv.Capability(name); ok && c != "" {
		return c
	}
	return name
}
