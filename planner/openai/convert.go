package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/planner"
)

// params turns a conversation into the chat completion request: the
// system text as a "system" message (which OpenAI and the compatible
// servers accept for every model), then the messages in order, and one
// function tool per conversation tool. OpenAI caches a request's prefix
// on its own, so the conversation's cache marks need no field here.
func (p *Planner) params(conv *planner.Conversation) (openai.ChatCompletionNewParams, error) {
	params := openai.ChatCompletionNewParams{
		Model:    shared.ChatModel(p.opts.Model),
		Messages: make([]openai.ChatCompletionMessageParamUnion, 0, len(conv.Messages)+1),
	}
	if conv.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(conv.System))
	}
	for i, m := range conv.Messages {
		switch m.Role {
		case planner.RoleUser:
			params.Messages = append(params.Messages, openai.UserMessage(m.Text))
		case planner.RoleTool:
			params.Messages = append(params.Messages, openai.ToolMessage(m.Text, m.ToolCallID))
		case planner.RoleAssistant:
			var a openai.ChatCompletionAssistantMessageParam
			if m.Text != "" {
				a.Content.OfString = openai.String(m.Text)
			}
			for _, c := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: c.Arguments},
					},
				})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			return params, fmt.Errorf("openai: conversation message %d has unknown role %q", i, m.Role)
		}
	}
	for _, t := range conv.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		if len(t.Parameters) > 0 {
			ps, err := parameters(t.Parameters)
			if err != nil {
				return params, fmt.Errorf("openai: tool %q: parameters: %w", t.Name, err)
			}
			fn.Parameters = ps
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	if t := p.opts.Temperature; t != nil {
		params.Temperature = openai.Float(*t)
	}
	if p.opts.MaxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(int64(p.opts.MaxTokens))
	}
	return params, nil
}

// parameters is a tool's JSON Schema as the SDK's parameters: each
// property's JSON text kept as it is (numbers exact; the SDK sorts the
// top-level keys).
func parameters(raw json.RawMessage) (shared.FunctionParameters, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	ps := make(shared.FunctionParameters, len(m))
	for k, v := range m {
		ps[k] = v
	}
	return ps, nil
}

// response turns a chat completion (made whole, or accumulated from a
// stream) into the provider-neutral response: the first choice's text,
// refusal and function calls in order, its finish reason, and the usage
// with its cost.
func (p *Planner) response(cc *openai.ChatCompletion) *planner.Response {
	r := &planner.Response{Stop: planner.StopEnd, Usage: p.usage(cc.Usage)}
	if len(cc.Choices) == 0 {
		return r
	}
	ch := cc.Choices[0]
	r.Text = ch.Message.Content
	r.Refusal = ch.Message.Refusal
	r.Stop = stopReason(ch.FinishReason)
	for _, c := range ch.Message.ToolCalls {
		call := planner.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments}
		if c.Type == "custom" {
			call.Name, call.Arguments = c.Custom.Name, c.Custom.Input
		}
		if call == (planner.ToolCall{}) {
			// A slot a stream left empty (a sparse tool-call index).
			continue
		}
		r.ToolCalls = append(r.ToolCalls, call)
	}
	return r
}

// stopReason maps a finish_reason; an unknown or missing one is StopEnd.
func stopReason(finish string) planner.StopReason {
	switch finish {
	case "tool_calls", "function_call":
		return planner.StopToolUse
	case "length":
		return planner.StopLength
	case "content_filter":
		return planner.StopRefusal
	default:
		return planner.StopEnd
	}
}

// usage maps the API's usage: prompt tokens are the input (cached ones
// included, as PlanUsage counts them), completion tokens the output, and
// the cost is the model's price of them (0 without a price).
func (p *Planner) usage(u openai.CompletionUsage) contextos.PlanUsage {
	in, out := saturate(u.PromptTokens), saturate(u.CompletionTokens)
	cached := min(max(saturate(u.PromptTokensDetails.CachedTokens), 0), max(in, 0))
	pu := contextos.PlanUsage{InputTokens: in, OutputTokens: out, CachedInputTokens: cached}
	if p.priced {
		pu.CostCents = p.price.Cents(pu, 0)
	}
	return pu
}

// saturate converts a count to int, saturating at int's bounds.
func saturate(n int64) int {
	return int(min(max(n, math.MinInt), math.MaxInt))
}

// stream makes a streamed chat completion, emitting its fragments through
// req.Emit, and returns the response the accumulated completion makes.
func (p *Planner) stream(ctx context.Context, req *contextos.PlanRequest, conv *planner.Conversation, params openai.ChatCompletionNewParams) (*planner.Response, error) {
	params.StreamOptions.IncludeUsage = openai.Bool(true)
	s := p.service.NewStreaming(ctx, params)
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	e := emitter{req: req, conv: conv}
	// usage is the usage the stream reported, nil until it does: the
	// largest of each count over the chunks that carry one. OpenAI sends
	// it once, in the final chunk; servers that send running totals in
	// every chunk (vLLM's continuous usage stats) are not summed, as the
	// accumulator would, and a later, smaller report does not lower it.
	var usage *openai.CompletionUsage
	for s.Next() {
		chunk := s.Current()
		if !acc.AddChunk(chunk) {
			return nil, p.failed(errors.New("openai: chat completion: the stream sent a chunk that does not continue the completion"), usage)
		}
		if chunk.JSON.Usage.Valid() {
			usage = maxUsage(usage, chunk.Usage)
		}
		e.chunk(&chunk)
	}
	if err := s.Err(); err != nil {
		return nil, p.failed(callError(ctx, err), usage)
	}
	if len(acc.Choices) == 0 || acc.Choices[0].FinishReason == "" {
		// The connection ended before the answer did: its calls may be
		// a part of them.
		return nil, p.failed(errors.New("openai: chat completion: the stream ended before the answer's finish reason"), usage)
	}
	if usage == nil {
		return nil, errNoStreamUsage
	}
	acc.Usage = *usage
	return p.response(&acc.ChatCompletion), nil
}

// maxUsage returns the usage holding the larger of each count of cur
// (nil: none yet) and u.
func maxUsage(cur *openai.CompletionUsage, u openai.CompletionUsage) *openai.CompletionUsage {
	if cur == nil {
		return &u
	}
	cur.PromptTokens = max(cur.PromptTokens, u.PromptTokens)
	cur.CompletionTokens = max(cur.CompletionTokens, u.CompletionTokens)
	cur.TotalTokens = max(cur.TotalTokens, u.TotalTokens)
	cur.PromptTokensDetails.CachedTokens = max(cur.PromptTokensDetails.CachedTokens, u.PromptTokensDetails.CachedTokens)
	return cur
}

// errNoStreamUsage is a stream that finished without a usage chunk (a
// server that ignores stream_options.include_usage): the turn fails
// closed rather than charging the run nothing for it.
var errNoStreamUsage = fmt.Errorf("openai: chat completion: the stream finished without a usage chunk: %w", contextos.ErrUsageUnknown)

// emitter turns a stream's chunks into plan deltas.
type emitter struct {
	req  *contextos.PlanRequest
	conv *planner.Conversation
	// calls are the provider's tool-call indices in the order they first
	// appeared; a call's ToolIndex is its position here.
	calls []int64
	named []bool
}

// chunk emits the first choice's text and tool-call fragments of c.
func (e *emitter) chunk(c *openai.ChatCompletionChunk) {
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if ch.Delta.Content != "" {
			e.req.Emit(contextos.PlanDelta{Text: ch.Delta.Content})
		}
		for _, tc := range ch.Delta.ToolCalls {
			idx := tc.Index
			if idx == -1 {
				idx = 0 // as the accumulator reads a single call numbered -1
			}
			pos := slices.Index(e.calls, idx)
			if pos < 0 {
				pos = len(e.calls)
				e.calls = append(e.calls, idx)
				e.named = append(e.named, false)
			}
			d := contextos.PlanDelta{ToolIndex: pos, ToolArgs: tc.Function.Arguments}
			if !e.named[pos] && tc.Function.Name != "" {
				e.named[pos] = true
				d.ToolName = e.toolName(tc.Function.Name)
			}
			if d.ToolName != "" || d.ToolArgs != "" {
				e.req.Emit(d)
			}
		}
	}
}

// toolName is the capability id a function name stands for, or
// DecisionTool; "" for a name the conversation does not know.
func (e *emitter) toolName(name string) string {
	if name == planner.DecisionTool {
		return name
	}
	if c, ok := e.conv.Capability(name); ok {
		return c
	}
	return ""
}

// isStreamError reports whether err is an error event of a stream.
func isStreamError(err error) bool {
	var se *ssestream.StreamError
	return errors.As(err, &se)
}
