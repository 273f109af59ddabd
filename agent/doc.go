// Package agent owns the Universal Agent API (seed 002): one Go interface
// behind which coding-agent CLIs and a host's own agents run, and the two
// ways such an agent works inside the SDK's governance.
//
// The contract: a Kind (validated, ^[a-z][a-z0-9_]*$), the Capabilities a
// backend advertises (a set, listed sorted), Events of six kinds with
// bounded payloads, a RunRequest (prompt, working dir, timeout, env,
// namespaced extensions), a Run handle (Events, Close, Cancel, Wait) and the
// Completion it resolves to, the Gateway registry of backends, and one
// typed *Error with the contract's five kinds and exact, safe messages.
//
// A backend implements Backend. Its Run validates the request before it
// spawns anything (Prepare: the prompt, the extension-key gate in sorted
// order, values, cross-key contradictions) and returns the handle Start
// makes around its driver at once, before the process has started. Start
// owns the run protocol: the bounded event pipe (32 events, with
// backpressure), the bounds every event and completion passes, the
// secret redactor every event, completion and error passes (an API key a
// CLI echoes in its 401 error becomes [REDACTED]: see Redacted), the
// completion gate (Wait resolves after the process exited and the stream
// reached its end, was closed or was cancelled), explicit cancellation
// (idempotent; "cancelled" wins ties; it still waits for the process), and
// the single terminal error event of a failed run. Backends in
// agent/codex and agent/claudecode drive the codex and claude CLIs;
// agent/agenttest has a fake backend and the conformance suite every
// backend runs.
//
// Under governance an agent is a delegated tool (Adapter: a gateway
// adapter the pack must permit and may gate) or the planner (Planner: every
// call it proposes still goes through the gateway). Neither goes around
// the gateway.
//
// # Nouns
//
// The package's nouns, and the same words elsewhere in the module:
//
//   - Run is the handle of one backend run: one agent process (or a host
//     agent's one job) started for one RunRequest. It is not a governed
//     run of the runtime (one Invoke, its run id and decision record):
//     inside one, an Adapter starts a Run for each gateway call and a
//     Planner one for each answer it asks for. gateway.Run is the Tool
//     Gateway bound to one governed run.
//   - Completion is what a Run resolves to (Run.Wait): the process's
//     ExitStatus, the final text and the bounded backend Data. For a run
//     that fails (spawn failure, timeout, cancellation) Wait also returns
//     an *Error. contextos.Result is what a governed run gives;
//     gateway.Outcome is an adapter's answer to one tool call, which an
//     Adapter builds from a Completion.
//   - ExitStatus is how the backend process ended: an exit code, or the
//     signal that killed it; only code 0 is Success. A non-success exit is
//     a Completion, not an error (an Adapter fails the call with
//     execution_failed, a Planner fails the turn). It is none of the
//     runtime's statuses: decision.Status is a decision record's,
//     gateway.Status the gateway's verdict on one tool call.
//   - Usage is the model usage and cost a backend reports for one backend
//     run, in its Completion's Data (UsageOf reads it): input, output and
//     cached input tokens, and a cost in US dollars. An Adapter charges
//     it as the call's gateway.Outcome Tokens and CostCents (input plus
//     output tokens, the cost in cents) and shows it in the call's output;
//     a Planner charges it as the turn's contextos.PlanUsage (one planner
//     turn's usage, whichever planner). Both go to the run budget, whose
//     meter reading for the whole governed run is runcontext.Usage.
//   - Event is one item of a Run's stream (Run.Events), of one of six
//     EventKinds: text output, a status or error message, the agent's own
//     tool activity, or unknown. Its tool_call and tool_result events are
//     the tools the agent uses inside its run (a shell command, a file
//     edit), not gateway calls (gateway.ToolCallEnvelope,
//     gateway.ToolResultEnvelope): under an Adapter the whole run is one
//     gateway call. contextos.Event is a governed run's stream event
//     (Runtime.Stream).
//   - Kind names a backend ("codex", "claude_code"); an Event carries it
//     as AgentKind beside its own EventKind.
//   - Capabilities are the agent_api.… ids a backend advertises: what it
//     can do and which extension keys a RunRequest may set. A
//     gateway.Capability is a tool capability an adapter registers; an
//     Adapter registers one, run (AdapterCapability).
//   - Gateway is the registry of backends by Kind. It is not the Tool
//     Gateway (gateway.Gateway), which checks and records every governed
//     tool call.
//   - Error is the contract's one error type, in five kinds. An Adapter
//     never returns one: it maps it to a gateway.ToolError, the Tool
//     Contract's error of a call (invalid_input for a request the backend
//     refuses, timeout, execution_failed).
package agent
