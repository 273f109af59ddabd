package contextos

import (
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// EventKind names a stream event.
type EventKind string

// Stream event kinds.
const (
	EventCompiled EventKind = "compiled"
	EventPlan     EventKind = "plan"
	// EventPlanDelta carries a piece of a planner turn while the model
	// produces it (Delta; PlanRequest.Emit), before the turn's plan event.
	EventPlanDelta  EventKind = "plan_delta"
	EventVerdict    EventKind = "verdict"
	EventToolCall   EventKind = "tool_call"
	EventToolResult EventKind = "tool_result"
	EventPause      EventKind = "pause"
	EventDecision   EventKind = "decision"
	// EventProgress reports a long_running run's step done (Message).
	EventProgress EventKind = "progress"
	// EventHeartbeat reports a long_running run's checkpoint, before each
	// planner turn and after each step: Record is its IN_FLIGHT record and
	// Message says until when the run's lease now runs.
	EventHeartbeat EventKind = "heartbeat"
	EventError     EventKind = "error"
	EventResult    EventKind = "result"
)

// Event is one typed stream event; the field matching Kind is set.
type Event struct {
	Kind     EventKind                   `json:"kind"`
	RunID    string                      `json:"run_id"`
	Turn     int                         `json:"turn"`
	Compiled *CompiledSummary            `json:"compiled,omitempty"`
	Plan     *Plan                       `json:"plan,omitempty"`
	Delta    *PlanDelta                  `json:"delta,omitempty"`
	Verdict  *Judgement                  `json:"verdict,omitempty"`
	Step     *Step                       `json:"step,omitempty"`
	Result   *gateway.ToolResultEnvelope `json:"result,omitempty"`
	Pause    *gateway.ApprovalRequest    `json:"pause,omitempty"`
	Record   *decision.Record            `json:"record,omitempty"`
	Message  string                      `json:"message,omitempty"`
	// Progress is a tool's progress report, on a progress event of a call
	// in flight (the other progress events report finished steps).
	Progress *gateway.Progress `json:"progress,omitempty"`
	Final    *Result           `json:"final,omitempty"`
}

// CompiledSummary is what the compiled event reports.
type CompiledSummary struct {
	CompiledContextHash string   `json:"compiled_context_hash"`
	Tools               []string `json:"tools"`
	ApprovalGates       []string `json:"approval_gates_active"`
}

func summarize(cc *compiler.CompiledContext) *CompiledSummary {
	return &CompiledSummary{CompiledContextHash: cc.Hash(), Tools: cc.ContextLedger.Tools, ApprovalGates: cc.RuntimeControls.ApprovalGatesActive}
}
