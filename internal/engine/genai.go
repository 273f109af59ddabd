package engine

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// PlannerModel is implemented by a planner that plans with a model (the
// openai and anthropic planners do): its turns get OpenTelemetry GenAI
// client spans ("chat {model}") and the gen_ai.client.token.usage and
// gen_ai.client.operation.duration metrics. Provider is the
// gen_ai.provider.name ("openai", "anthropic"), model the
// gen_ai.request.model. A planner that names no model (either empty) has
// none of them; its turns keep their plan spans.
type PlannerModel interface {
	PlannerModel() (provider, model string)
}

// KeyReplay is the span attribute that marks a replay's spans
// (Runtime.Replay): what they describe re-ran recorded work, no live
// model call or tool call. A replay records no metric of its run.
const KeyReplay = "contextos.replay"

// chatTurn is a planner turn's GenAI span and what its metrics need.
type chatTurn struct {
	span            trace.Span
	provider, model string
	start           time.Time
}

// startChat starts the GenAI client span of a planner turn when the
// runtime's planner names its model (a replay's names the live planner's):
// "chat {model}" with gen_ai.operation.name, gen_ai.provider.name,
// gen_ai.request.model and, on a replay, contextos.replay. It returns ctx
// unchanged and a nil turn otherwise.
func (r *run) startChat(ctx context.Context) (context.Context, *chatTurn) {
	pm, ok := r.rt.planner.(PlannerModel)
	if !ok {
		return ctx, nil
	}
	provider, model := pm.PlannerModel()
	if provider == "" || model == "" {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", provider),
		attribute.String("gen_ai.request.model", model),
		attribute.Int("contextos.turn", r.cp.Turn),
	}
	if r.rt.mode == ModeReplay {
		attrs = append(attrs, attribute.Bool(KeyReplay, true))
	}
	c := &chatTurn{provider: provider, model: model}
	if r.rt.metrics.GenAIEnabled(ctx) {
		c.start = r.rt.opts.Now()
	}
	ctx, c.span = r.rt.tracer.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, c
}

// end ends the turn's span with its usage (gen_ai.usage.input_tokens and
// output_tokens, from the plan or a failed turn's report) and, for a
// failed turn, error.type and the error status; and records the GenAI
// metrics (a replay's runtime has none).
func (c *chatTurn) end(ctx context.Context, r *run, plan *Plan, err error) {
	if c == nil {
		return
	}
	defer c.span.End()
	var u PlanUsage
	reported := false
	switch {
	case err == nil && plan != nil:
		u, reported = plan.Usage, true
	case err != nil:
		u, reported = failedTurnUsage(err)
	}
	reported = reported && (u.InputTokens > 0 || u.OutputTokens > 0) // a total alone has no GenAI attribute
	// A span that does not record ignores attributes: none are made.
	if reported && c.span.IsRecording() {
		c.span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", u.InputTokens), attribute.Int("gen_ai.usage.output_tokens", u.OutputTokens))
	}
	et := ""
	if err != nil {
		et = errorType(err)
		c.span.SetAttributes(attribute.String("error.type", et))
		c.span.SetStatus(codes.Error, "planner turn failed: "+et)
	}
	if !c.start.IsZero() {
		r.rt.metrics.GenAI(ctx, c.provider, c.model, et, reported, u.InputTokens, u.OutputTokens, r.rt.opts.Now().Sub(c.start))
	}
}
