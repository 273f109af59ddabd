package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
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
// What its fields reach is the consumer's own copy (the final result
// is the run's result): editing it changes nothing the run does,
// records or replays.
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
	// Notices are the run's notices (Result.Notices), known once it has
	// compiled.
	Notices []Notice `json:"notices,omitempty"`
}

// detached returns e with copies of what its pointers, lists and maps
// reach, so that it shares nothing with the run: a consumer that edits
// an event (the plan, the step's arguments, the result's output, the
// verdict) changes nothing the run executes, enforces or records. It is
// made only for a run that has a consumer (run.event).
func (e Event) detached() Event {
	if c := e.Compiled; c != nil {
		cc := *c
		cc.Tools, cc.ApprovalGates = slices.Clone(cc.Tools), slices.Clone(cc.ApprovalGates)
		cc.Notices = slices.Clone(cc.Notices)
		for i := range cc.Notices {
			cc.Notices[i].Withheld = slices.Clone(cc.Notices[i].Withheld)
		}
		e.Compiled = &cc
	}
	e.Plan = clonePlan(e.Plan)
	if e.Delta != nil {
		d := *e.Delta
		e.Delta = &d
	}
	if e.Verdict != nil {
		j := *e.Verdict
		e.Verdict = &j
	}
	if e.Step != nil {
		s := cloneStep(*e.Step)
		e.Step = &s
	}
	e.Result = e.Result.Clone()
	if e.Pause != nil {
		p := *e.Pause
		e.Pause = &p
	}
	if e.Record != nil {
		e.Record = cloneStored(e.Record)
	}
	if e.Progress != nil {
		p := *e.Progress
		e.Progress = &p
	}
	return e
}

// cloneStored is a copy of a stored record, through its JSON: a store
// keeps a record as Seal made it, and that reads back from its JSON as
// itself. A record that would not (a store's own doing) is returned as
// it is.
func cloneStored(rec *decision.Record) *decision.Record {
	b, err := json.Marshal(rec)
	if err != nil {
		return rec
	}
	var c decision.Record
	if json.Unmarshal(b, &c) != nil {
		return rec
	}
	return &c
}

func summarize(cc *compiler.CompiledContext, notices []Notice) *CompiledSummary {
	return &CompiledSummary{CompiledContextHash: cc.Hash(), Tools: cc.ContextLedger.Tools, ApprovalGates: cc.RuntimeControls.ApprovalGatesActive, Notices: notices}
}

// NoticeCode names a Notice.
type NoticeCode string

// NoticeToolsWithheld: the run's safety mode withholds capabilities the
// pack allows, because their approval mode is above it (the default
// safety mode, read_only, withholds every write-class capability). The
// planner is not offered them and the gateway refuses their calls.
const NoticeToolsWithheld NoticeCode = "tools_withheld_by_safety_mode"

// Notice tells the host something about its run that is governed as the
// pack and run context say but may not be what the host meant, such as
// the tools its safety mode withholds. A run's notices are on its
// compiled event and its Result, and logged as warnings when it starts.
type Notice struct {
	Code NoticeCode `json:"code"`
	// Message says it in words, and what would change it.
	Message string `json:"message"`
	// SafetyMode is the run's safety mode (NoticeToolsWithheld).
	SafetyMode runcontext.ApprovalMode `json:"safety_mode,omitempty"`
	// Withheld are the capabilities withheld, in the pack's order, with
	// their approval modes (NoticeToolsWithheld).
	Withheld []compiler.ModeWithheld `json:"withheld,omitempty"`
}

// notices are the run's notices: the capabilities its safety mode
// withholds, if any.
func (r *run) notices() []Notice {
	w := r.prepared.AboveSafetyMode(r.rc.SafetyMode)
	if len(w) == 0 {
		return nil
	}
	names := make([]string, len(w))
	modes := make([]runcontext.ApprovalMode, len(w))
	for i, c := range w {
		names[i], modes[i] = c.Capability+" ("+string(c.ApprovalMode)+")", c.ApprovalMode
	}
	msg := fmt.Sprintf("safety_mode %s withholds %d capabilities the pack allows: %s; the planner is not offered them and their calls are refused. A run context with safety_mode %s surfaces them",
		r.rc.SafetyMode, len(w), strings.Join(names, ", "), runcontext.MaxApprovalMode(modes...))
	if len(w) == 1 {
		msg = fmt.Sprintf("safety_mode %s withholds a capability the pack allows: %s; the planner is not offered it and its calls are refused. A run context with safety_mode %s surfaces it",
			r.rc.SafetyMode, names[0], modes[0])
	}
	return []Notice{{Code: NoticeToolsWithheld, Message: msg, SafetyMode: r.rc.SafetyMode, Withheld: w}}
}

// logNotices logs each notice as a warning.
func (r *run) logNotices(notices []Notice) {
	for _, n := range notices {
		withheld := make([]string, len(n.Withheld))
		for i, w := range n.Withheld {
			withheld[i] = w.Capability + " (" + string(w.ApprovalMode) + ")"
		}
		r.rt.opts.Logger.Warn("the run's safety mode withholds capabilities the pack allows", "run_id", r.rc.RunID, "notice", string(n.Code),
			"safety_mode", string(n.SafetyMode), "withheld", withheld)
	}
}
