package contextos

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/enginehook"
	"github.com/contextos/contextos/runcontext"
)

// The inline seam (internal/enginehook): a runtime marked inline runs in
// a durable-execution engine's deterministic workflow code. Its planner
// is asked and its context compiled on the run's goroutine, with no
// deadline of the runtime's own (the host bounds each turn); adapters
// registered with HonorsContext are already called on it.
func init() {
	enginehook.Inline = func(rt any) { rt.(*Runtime).inline = true }
	enginehook.EncodePlanRequest = func(req any) ([]byte, error) {
		r := req.(*PlanRequest)
		return json.Marshal(planRequestWire{Compiled: r.Compiled, Request: r.Request, Run: r.Run, Results: r.Results, Turn: r.Turn,
			ReplanReason: r.ReplanReason, Call: r.call, Schemas: r.schemas, Decisions: r.decisions})
	}
	enginehook.DecodePlanRequest = func(b []byte) (any, error) {
		var w planRequestWire
		if err := json.Unmarshal(b, &w); err != nil {
			return nil, fmt.Errorf("contextos: plan request: %w", err)
		}
		return &PlanRequest{Compiled: w.Compiled, Request: w.Request, Run: w.Run, Results: w.Results, Turn: w.Turn,
			ReplanReason: w.ReplanReason, call: w.Call, schemas: w.Schemas, decisions: w.Decisions}, nil
	}
}

// planRequestWire is a PlanRequest's wire form (enginehook).
type planRequestWire struct {
	Compiled     *compiler.CompiledContext  `json:"compiled"`
	Request      *runcontext.InvokeRequest  `json:"request"`
	Run          *runcontext.RunContext     `json:"run"`
	Results      []StepResult               `json:"results"`
	Turn         int                        `json:"turn"`
	ReplanReason string                     `json:"replan_reason,omitempty"`
	Call         int                        `json:"call"`
	Schemas      map[string]json.RawMessage `json:"schemas,omitempty"`
	Decisions    []DecisionOption           `json:"decisions,omitempty"`
}

// askInline asks the planner on the run's goroutine (an inline runtime's
// askPlanner); a panic is a *PanicError.
func (r *run) askInline(ctx context.Context, req *PlanRequest) (plan *Plan, err error) {
	defer func() {
		if p := recover(); p != nil {
			plan, err = nil, r.rt.recovered(p, "planner", r.rc.RunID)
		}
	}()
	return r.rt.planner.Plan(ctx, req)
}

// compileInline compiles on the run's goroutine (an inline runtime's
// compile); a panic is a *PanicError.
func (r *run) compileInline(ctx context.Context, prepared *compiler.Prepared) (cc *compiler.CompiledContext, err error) {
	defer func() {
		if p := recover(); p != nil {
			cc, err = nil, r.rt.recovered(p, "compile", r.rc.RunID)
		}
	}()
	return prepared.Compile(ctx, r.req, r.rc)
}
