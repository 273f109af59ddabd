package planner

import (
	"encoding/json"

	"github.com/contextos/contextos"
)

// DecisionTool is the name of the tool a model calls to propose the run's
// decision.
const DecisionTool = "propose_decision"

// Role is who speaks a Message.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Conversation is a PlanRequest rendered for a model, in no provider's
// format: a provider package turns it into its API's request and the
// answer back into a Response, and Parse makes the plan.
type Conversation struct {
	// System is the stable instructions: the compiled prompt's system and
	// developer parts and the planner's rules. It is the same on every
	// turn of a run, so a provider may cache it.
	System string
	// Messages are the conversation: first the user message with the task
	// and the context blocks in bucket order (Cache set: the end of the
	// stable prefix), then, per earlier turn with results, an assistant
	// message with that turn's calls and one tool message per result,
	// then the replan reason as a user message when there is one.
	Messages []Message
	// Tools are the surfaced capabilities, sorted by capability id, then
	// the DecisionTool.
	Tools []Tool

	// capabilities maps a tool's function name to its capability id.
	capabilities map[string]string
}

// Message is one message of a Conversation.
type Message struct {
	Role Role
	// Text is a user's or assistant's text, or a tool message's content:
	// the step's result as JSON data.
	Text string
	// ToolCalls are an assistant message's calls, in order.
	ToolCalls []ToolCall
	// ToolCallID is the call a tool message answers.
	ToolCallID string
	// Cache marks the end of a prefix that is the same on every turn of
	// the run: a provider with prompt caching places a breakpoint after
	// it.
	Cache bool
}

// Tool is one tool the model may call.
type Tool struct {
	// Name is the function name the model calls, valid for every
	// provider (^[a-zA-Z0-9_-]{1,64}$) and unique in the conversation.
	Name string
	// Capability is the capability id the tool calls
	// ("adp_orders.lookup"); "" for the DecisionTool.
	Capability string
	// Description says what the capability is (kind, risk level,
	// approval mode) and whether a call pauses for an approval gate.
	Description string
	// Parameters is the JSON Schema of the call's arguments (an object).
	Parameters json.RawMessage
}

// ToolCall is a model's call of a tool.
type ToolCall struct {
	// ID is the call's id, which a tool result answers.
	ID string
	// Name is the function name the model called.
	Name string
	// Arguments is the arguments' JSON text as the model sent it.
	Arguments string
}

// StopReason is why a model stopped its answer.
type StopReason string

// Stop reasons, as a provider package maps its API's own.
const (
	// StopEnd: the model finished its answer.
	StopEnd StopReason = "end"
	// StopToolUse: the model stopped to have its tool calls run.
	StopToolUse StopReason = "tool_use"
	// StopLength: the answer was cut off at the token limit.
	StopLength StopReason = "length"
	// StopRefusal: the model or the provider's filter refused.
	StopRefusal StopReason = "refusal"
)

// Response is a model's answer to a Conversation, in no provider's format.
type Response struct {
	// Text is the model's text (all text parts, in order).
	Text string
	// ToolCalls are the model's tool calls, in order.
	ToolCalls []ToolCall
	// Stop is why the model stopped; an unknown reason is StopEnd.
	Stop StopReason
	// Refusal is the model's refusal text, when the API reports one apart
	// from Text.
	Refusal string
	// Usage is the turn's usage, with its cost.
	Usage contextos.PlanUsage
}
