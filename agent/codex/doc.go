// Package codex owns the Codex CLI backend of the Universal Agent API
// (agent.KindCodex): it validates a request before anything is spawned,
// runs `codex exec --json` non-interactively and maps every line the CLI
// prints to the universal events.
//
// # Invocation
//
// The argv follows the upstream wrapper, in this order: for a model whose
// id starts with "gpt-5", the three `--config` overrides
// (model_reasoning_effort=medium, model_reasoning_summary=auto,
// model_verbosity=low); then `--ask-for-approval never --sandbox <mode>`
// (mode from backend.codex.exec.sandbox_mode, default workspace-write; with
// agent_api.exec.non_interactive=false the approval policy is
// backend.codex.exec.approval_policy, or no `--ask-for-approval` at all),
// or `--dangerously-bypass-approvals-and-sandbox` alone under
// agent_api.exec.external_sandbox.v1; then
// `exec --color never --skip-git-repo-check --json`; `--model <id>` (the
// request's agent_api.config.model.v1, else Config.Model); one
// `--add-dir <dir>` pair per directory; `--output-last-message <file>` in
// a private temporary directory removed after the run; and for a resume
// `resume <id> -` or `resume --last -`. The prompt is never in argv: it is
// written to stdin followed by a newline. The process runs in the
// effective working directory, in its own process group (on Linux under a
// supervisor that kills the group when this process dies, SIGKILL
// included), with this
// process's environment plus CODEX_BINARY, CODEX_HOME (Config.Home, when
// set), RUST_LOG=error (when this process has no RUST_LOG) and then the
// configured and request env (request keys win).
//
// Before a run with add-dirs the backend checks that the CLI supports
// them: `codex --help` must exit 0 and mention `--add-dir`, else the run
// fails with "add_dirs rejected by runtime" and the exec is not spawned.
// Upstream also consults `codex --version` and `codex features list`;
// this backend relies on `--help` alone. A successful check is cached per
// Backend and binary.
//
// # Events
//
// Both the real 0.169 shape (an `item` object inside
// item.started/item.updated/item.completed) and the legacy flat shape
// (`item_type`, `item_id`, `content`, `delta` at top level; aliases
// thread.resumed, item.created, item.delta, item.failed, and the field
// aliases aggregated_output/output, error_output/err, patch) are mapped:
// thread.started, turn.started, turn.completed and todo_list items become
// status events; turn.failed a status "turn failed"; a top-level error and
// an error item an error event with the CLI's message (its secrets, such
// as the API key a 401 echoes, redacted as in every event); agent_message and
// reasoning items assistant text (reasoning included, as upstream);
// command_execution, file_change, mcp_tool_call, web_search and
// collab_tool_call items tool_call (started, updated) and tool_result
// (completed, failed) events carrying the agent_api.tools.structured.v1
// facet with byte counts only, never tool input or output; anything else
// an unknown event. A line that is not a JSON object with a string `type`,
// or whose fields have the wrong types, becomes the error
// "codex stream parse error (redacted): <fixed description>
// (line_bytes=<n>)", which never quotes the line, and the stream goes on.
//
// Unlike upstream, an event outside a turn (the error item 0.169 prints
// before turn.started) is not a normalize error: the tools facet's
// thread_id and turn_id are then null. A turn.started without an id gets
// "synthetic-turn-N". Ids longer than 1024 bytes are null in the facet.
//
// The session id is the first non-blank thread_id: the status event of
// that line (or a status event appended after it) carries
// {"schema":"agent_api.session.handle.v1","session":{"id":…}} once; an id
// over 1024 bytes is omitted with the status
// "session handle id oversize: len_bytes=<n>".
//
// # Completion
//
// Exit 0: the final text is the --output-last-message file (none when it
// is missing), bounded. A non-zero exit is a Completion with that status,
// no final text, after one error event "codex exited non-zero: <status>
// (stderr redacted)". stderr is never surfaced; it only classifies a
// failed resume: with a non-zero exit, no thread id and no parse error,
// stderr (or an error event, which a resume does not forward) naming a
// missing session or thread, or the real CLI's "no rollout found", makes
// the run fail with "no session found" (resume --last) or
// "session not found" (resume by id). A timeout fails the run with
// "timeout"; Cancel and the caller's context end it "cancelled"; both kill
// the process group.
//
// Completion Data, when anything is known, is one object:
//
//	{"schema":"agent_api.session.handle.v1","session":{"id":"…"},
//	 "usage":{"input_tokens":N,"cached_input_tokens":N,"cache_write_input_tokens":N,
//	          "output_tokens":N,"reasoning_output_tokens":N}}
//
// schema and session are present when the session id is known; usage is
// the last turn.completed's (upstream surfaces none; on a resumed thread
// the CLI reports it cumulatively for the whole thread; absent counters are
// 0). Codex reports no cost: a host prices the tokens itself.
//
// # Not here
//
// agent_api.session.fork.v1 is not advertised: upstream forks through
// `codex app-server` (JSON-RPC), which this backend does not drive. MCP
// server management (agent_api.tools.mcp.*) is not implemented either.
// backend.codex.exec_stream is a capability, not an extension key: as an
// extension any value is refused.
package codex
