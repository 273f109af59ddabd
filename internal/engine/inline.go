package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/compilehook"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// SetInline marks rt to run in a durable-execution engine's deterministic
// workflow code (temporalrun): its planner is asked and its context
// compiled on the run's goroutine, with no deadline of the runtime's own
// (the host bounds each turn and attempt), and it reads no clock but its
// Options.Now. Adapters registered with HonorsContext are already called
// on the run's goroutine. Call it before the runtime's first run.
func (rt *Runtime) SetInline() { rt.inline = true }

// EncodePlanRequest encodes req whole, with the tool schemas and decision
// options behind its Tools and Decisions, for a planner in another
// process.
func EncodePlanRequest(r *PlanRequest) ([]byte, error) {
	return json.Marshal(planRequestWire{Compiled: r.Compiled, Request: r.Request, Run: r.Run, Results: r.Results, Turn: r.Turn,
		ReplanReason: r.ReplanReason, Call: r.call, Schemas: r.schemas, Decisions: r.decisions})
}

// DecodePlanRequest decodes what EncodePlanRequest encoded.
func DecodePlanRequest(b []byte) (*PlanRequest, error) {
	var w planRequestWire
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("contextos: plan request: %w", err)
	}
	return &PlanRequest{Compiled: w.Compiled, Request: w.Request, Run: w.Run, Results: w.Results, Turn: w.Turn,
		ReplanReason: w.ReplanReason, call: w.Call, schemas: w.Schemas, decisions: w.Decisions}, nil
}

// planRequestWire is a PlanRequest's wire form.
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
func (r *run) compileInline(ctx context.Context, prepared *compiler.Prepared) (cc *compiler.CompiledContext, eval *policy.Evaluation, err error) {
	defer func() {
		if p := recover(); p != nil {
			cc, eval, err = nil, nil, r.rt.recovered(p, "compile", r.rc.RunID)
		}
	}()
	return compileWithPolicy(ctx, prepared, r.req, r.rc)
}

// compileWithPolicy is prepared's Compile of req and rc with the run-level
// policy evaluation it made (compilehook.CompileWithPolicy), for the run's
// gateway to enforce (gatewayhook.WithPolicy).
func compileWithPolicy(ctx context.Context, prepared *compiler.Prepared, req *runcontext.InvokeRequest, rc *runcontext.RunContext) (*compiler.CompiledContext, *policy.Evaluation, error) {
	cc, eval, err := compilehook.CompileWithPolicy(prepared, ctx, req, rc)
	if err != nil {
		return nil, nil, err
	}
	return cc.(*compiler.CompiledContext), eval, nil
}
