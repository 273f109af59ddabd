// Package claudecode owns the Claude Code backend of the Universal Agent
// API (kind "claude_code"): it runs `claude --print --output-format
// stream-json` non-interactively and maps each stdout line to universal
// events, the final text and the completion's data.
//
// # Running
//
// Run validates the request with agent.Prepare before anything is
// spawned, then starts, in the effective working directory with stdin
// /dev/null:
//
//	claude --print --output-format stream-json [--model <id>]
//	       --permission-mode bypassPermissions [--dangerously-skip-permissions]
//	       [--add-dir <d1> <d2> …] [--continue] [--fork-session]
//	       --include-partial-messages [--resume <id>] --verbose [--] <prompt>
//
// Session selectors: resume last = --continue; resume id = --resume <id>;
// fork last = --continue --fork-session; fork id = --fork-session
// --resume <id>. "--" comes before a prompt that starts with "-" (claude's
// commander parser ends its options there), never otherwise.
// --permission-mode bypassPermissions is passed while
// agent_api.exec.non_interactive is true (the default);
// --dangerously-skip-permissions only with
// agent_api.exec.external_sandbox.v1, which is advertised only with
// Config.AllowExternalSandboxExec and announced by one Status before any
// other event. The child's environment is this process's with
// DISABLE_AUTOUPDATER=1 (unless set here), the Config.Home isolation, and
// then the config's and the request's env laid over it; this process's
// environment never changes. stderr is kept (bounded) only to classify a
// missing session, never shown.
//
// # Events
//
// Every event message is a fixed text, or one built from numbers and
// protocol tokens; no raw line, stderr or tool payload reaches an event,
// an error or the completion. The assistant's text and the final text
// pass the secret redactor, as every event and completion does.
//
//	system init / other       Status "system init" / "system <subtype>" ("system other" unless a plain token)
//	assistant text block      TextOutput "assistant" — only what its stream deltas did not already emit
//	assistant tool_use        ToolCall start/running (once per tool_use_id)
//	assistant other block     Unknown (thinking, …)
//	user tool_result          ToolResult complete/completed (is_error: fail/failed), paired with
//	                          an earlier ToolCall by tool_use_id, once per id; unpaired: Unknown
//	user, no tool result      Status "user message"
//	stream_event text_delta   TextOutput "assistant" (live)
//	stream_event tool_use     ToolCall start/running (content_block_start; once per id)
//	stream_event input_json_delta  ToolCall delta/running
//	other stream_event        Unknown
//	result success            Status "result success"
//	result failed             Error "result <subtype>[ is_error=true][ api_error_status=<n>]"
//	                          (subtypes error_max_turns, error_during_execution,
//	                          error_max_budget_usd, error_max_structured_output_retries,
//	                          error; "other" for an unknown one; success with is_error=true)
//	unknown outer type        Unknown
//	unparsable line           Error "claude_code stream parse error (redacted): <rule> (line_bytes=<n>)"
//
// Text is emitted once: with --include-partial-messages claude streams a
// text block as text_delta events and then repeats the whole block in an
// assistant line. The deltas are emitted live; the assistant line emits
// only the part of its block that the deltas of the same message (by
// message id, block by block in order) did not carry — nothing when they
// carried it all, the whole block when they were lost or differ. A text
// block without deltas (a synthetic error message, a CLI without partial
// messages) is emitted whole. Tool calls are likewise emitted once per
// tool_use_id, though claude shows each twice.
//
// Every ToolCall and ToolResult carries the agent_api.tools.structured.v1
// facet: kind tool_use/tool_result, tool_name, tool_use_id, phase, status;
// bytes.result is the compact-JSON size of a tool_result's content, and
// bytes.stdout/stderr the sizes of the user line's tool_use_result when it
// carries one tool result; never inputs or outputs.
//
// The session id is the first non-blank session_id (or sessionId) of a
// system, user, assistant, stream_event or result line. Its facet
// {"schema":"agent_api.session.handle.v1","session":{"id":…}} is put once
// on the first Status of that line, else on a Status "session handle"
// after it. An id over 1024 bytes is omitted, with one Status "session
// handle omitted: id exceeds 1024 bytes".
//
// # Completion
//
// FinalText is the text blocks of the latest assistant line having any,
// joined with "\n", bounded — also on a non-zero exit (claude's "Not
// logged in" text). Data merges the session facet with what the result
// line reports:
//
//	{"schema":"agent_api.session.handle.v1","session":{"id":"…"},
//	 "usage":{"input_tokens":n,"output_tokens":n,"cached_input_tokens":n,"cache_read_input_tokens":n,"cache_creation_input_tokens":n},
//	 "cost_usd":x,"num_turns":n,"duration_ms":n}
//
// each member present when known. input_tokens counts every input token:
// claude's input_tokens plus its cache reads and cache writes, which
// claude reports apart (as planner/anthropic counts them), so
// agent.UsageOf — and an agent.Adapter or agent.Planner charging the run
// budget — counts the cached prompt too; cached_input_tokens is the cache
// reads, and the two cache counts are also kept as reported. A non-zero exit is an Ok completion with
// that status, after one trailing Error "claude_code exited non-zero:
// code=<n> (output redacted)" (or signal=<name>). When the exit has a
// known cause, the Error says it after a colon and names it in its data,
// {"cause": …}: CauseRootWithoutSandbox (run as root, claude refuses to
// skip its permission prompts, as every non-interactive run asks, unless
// IS_SANDBOX=1 is in its environment) or CauseNotLoggedIn; claude's own
// output is never quoted. A resume or fork whose
// session does not exist (a non-zero exit, no parse error, no assistant
// line, and a failed result whose errors say so — claude 2.1 prints "No
// conversation found with session ID: …" — or, without a result line,
// stderr saying so) fails with the pinned "no session found" (selector
// last) or "session not found" (selector id), its result event replaced by
// that one terminal Error. A process that cannot start fails with
// "claude_code error: cannot start process". Cancel, the run's timeout or
// the end of the caller's context kill the process group; the completion
// is then "cancelled" or "timeout". On Linux the group also dies with this
// process, however it dies (SIGKILL included): claude runs under a
// supervisor that kills the group on this process's death.
package claudecode
