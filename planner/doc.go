// Package planner owns what every model planner shares, whatever the
// provider: it renders a contextos.PlanRequest as a Conversation (the
// system instructions, the task and the compiled context blocks as data,
// the earlier turns' calls and results, why the runtime asks again, and
// one tool per surfaced capability plus the propose_decision tool), and
// parses a model's Response back into a contextos.Plan.
//
// A provider package (planner/openai, planner/anthropic) turns a
// Conversation into its API's request and the API's answer into a
// Response; it owns the transport, the model, retries and streaming. This
// package owns the words and the mapping, so every provider plans from the
// same prompt and every model's answer becomes a plan by the same rules:
//
//   - the model sees only the compiled output (seed 003): the compiled
//     prompt, the surfaced tools with their argument schemas, the pack's
//     decisions and the results so far;
//   - context blocks and tool results are framed as data, each
//     unambiguously delimited, so their content cannot pose as
//     instructions or forge a block;
//   - what a model answers never fails the run by itself: an answer cut
//     off, refused, in text only or with malformed arguments becomes a
//     plan with a Replan reason, which the critic sends back
//     ("planner_replan: …") within the run's replan budget, and no model
//     text reaches the record through it.
//
// Price turns a turn's usage into cents for the run's cost budget.
package planner
