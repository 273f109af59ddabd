// Package gateway owns the Tool Gateway: every tool call a governed run
// makes passes it, and nothing else reaches a tool. It owns the tool-call
// and tool-result envelopes (tool-envelope.v1), the Adapter plug-in
// interface, argument validation (JSON Schema and the permission's
// arg_constraints), idempotency (IdempotencyStore), approvals (pause,
// bind, resume; ApprovalLog), delegation checks, attachments, redaction of
// results, the hash-chained transcript (TranscriptSink, TranscriptReader)
// and the canonical tool error taxonomy (ToolError, the Code constants).
//
// A host builds one Gateway (New) from Registrations — an Adapter and the
// settings of each of its capabilities (argument schema, delegation
// scopes, timeout, attempts, cost) — and, per run, a Run (Gateway.NewRun)
// bound to a RunConfig: the run's compiled context, request, run context
// and budget meter. Run.Call takes a CallRequest, keyed by its StepID, and
// returns a ToolResultEnvelope.
//
// # Outcome, Status and Result
//
// An Outcome is what an Adapter returns for one successful attempt: its
// output, mutations, citations, cost and tokens, before the gateway
// checks, bounds and redacts it (for a failed attempt, returned beside
// the error, only what the attempt spent: its cost and tokens). A Status is the gateway's verdict on a whole call
// (its retries included), one of seven: ok and completed (a read, a
// governed write with its side effects in mutations) succeeded; paused
// awaits an approval (the result carries the ApprovalRequest); blocked
// (policy, consent, budget), rejected (malformed, unauthorized,
// unsurfaced), failed (the adapter, transport or runtime failed) and error
// (an error the caller may inspect) did not. The result, a
// ToolResultEnvelope, is the call's one answer: its Status, the redacted
// output, the *ToolError when there is one (the Tool Contract v1 code,
// reason, retryable flag, message and details), and ResultMetadata.
//
// # The checks, in order
//
// A call is checked before its adapter runs; the first check that fails
// decides the result, and the order is that of the table in checks.go:
//
//  1. surfaced — the capability is in the compiled tool manifest (else
//     rejected, unsupported_tool);
//  2. registered — an adapter registers it (rejected, unsupported_tool);
//  3. idempotency_key — a write-class call (approval mode above
//     read_only) gets a derived idempotency key, scoped to the run's tenant
//     and run, before any argument check (and in args.idempotency_key when
//     the capability takes it);
//  4. attachments — each attachment is one of the request's, in the
//     tenant's scope (rejected, permission_denied);
//  5. tenant — the principal chain does not cross tenants (rejected,
//     permission_denied);
//  6. args — the arguments pass the capability's JSON Schema, then the
//     permission's arg_constraints (rejected, invalid_input, every problem
//     with its JSON pointer);
//  7. payload — they fit max_payload_bytes (rejected, invalid_input);
//  8. policy — per-call policy is evaluated (when a rule or gate reads
//     tool.*) and the envelope bound to a decision; a must_refuse
//     guardrail blocks every call, a must_escalate guardrail or a deny
//     blocks write-class calls (blocked, permission_denied); a
//     write-class call for which a rule or gate over tool.* cannot be
//     judged (it reads an argument the call lacks) is blocked
//     (runtime_policy_invalid; see docs/policy.md in the repository);
//  9. safety_mode — no approval mode is above the run's safety mode
//     (blocked, permission_denied);
//  10. delegation — a delegated or destructive call has the user's
//     delegation, its token_ref and its scopes (blocked,
//     permission_denied);
//  11. budget — the run is not over its total token budget or a token
//     bucket's (tokens are charged after the fact: a delegated agent's,
//     a planner turn's), and tool calls and cost are left (blocked,
//     runtime_policy_invalid);
//  12. evidence — a write-class call passes the run's
//     RunOptions.VerifyWrite, when it has one: the runtime blocks a write
//     whose rules and decision require evidence the run does not hold yet
//     (blocked, with the hook's code and message);
//  13. approval — the approval gate that holds the call has a valid
//     approval, or the call pauses (paused, approval_pending). A gate
//     holds a call when the call's permission names it and it is active
//     at compile time or for the call, or, for a write-class call, when
//     the call itself made it active (its when, over tool.*, holds for
//     the call, or a rule over tool.* names it for the call); a call two
//     gates hold is blocked (permission_denied). An approval given for another action, role or
//     gate, by the requesting user (names compared after Unicode
//     normalization), used before, past its TTL, or answering a request
//     older than the gate's TTL is refused (blocked, approval_denied or
//     approval_timeout).
//
// A call that passes executes at most once per idempotency key through
// the IdempotencyStore: concurrent and repeated identical writes get the
// first one's result, marked duplicate. Each attempt is bounded by the
// capability's timeout; retryable failures are retried up to its attempts
// with the same key. The adapter of a capability that declares
// HonorsContext runs on the caller's goroutine; any other runs under a
// watchdog that gives up Options.Grace after the timeout. A panicking
// adapter fails the call, never the process. An adapter gets a deep copy
// of the recorded envelope: what it changes reaches nothing recorded.
//
// # What is kept
//
// Every call and every result, refusals included, is appended to the
// TranscriptSink as a hash-chained entry (VerifyTranscript checks a
// chain; Run.ChainState says where a run's chain stands). Results pass the
// built-in secret rule (keys, tokens, credentials, secret-named members)
// whatever the pack names, and the redaction rules the pack activates
// (built in: credit_card, pan, iban, email, phone, ssn, secret; hosts add
// their own in Options.Redactors), before they reach the planner, the
// transcript, a log line or a span.
// One span per call follows the OpenTelemetry GenAI conventions
// (execute_tool) with contextos.* attributes.
//
// Package gatewaytest holds scripted adapters for hosts' unit tests and
// the conformance suites for Adapter, IdempotencyStore, ApprovalLog,
// TranscriptSink and TranscriptReader implementations.
package gateway
