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
package agent
