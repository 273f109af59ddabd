// Command contextos is the ContextOS CLI for pack authors, CI and
// operators: it validates documents, signs, verifies and diffs Context
// Packs, compiles a CompiledContext, drives one governed run with a
// scripted planner, replays a replay packet offline, and, on a durable
// store, resumes paused runs, lists what awaits an approval and lists,
// shows and verifies the decision records; serve runs the runtime as an
// HTTP service with an approvals inbox.
//
// Usage:
//
//	contextos version
//	contextos schemas [--out DIR]
//	contextos validate --kind invoke-agent|run-context FILE
//	contextos pack validate [--json] [--redactors FILE] FILE...
//	contextos pack keygen --out DIR
//	contextos pack sign --key KEYFILE [--redactors FILE] PACK
//	contextos pack verify --pub PUBFILE [--pub PUBFILE…] [--redactors FILE] SIGNED
//	contextos pack diff [--json] [--redactors FILE] OLD NEW
//	contextos pack test --golden DIR [--baseline PACK] [--pub PUBFILE… | --allow-unsigned]
//	    [--ontology NS@VERSION…] [--trigger TRIGGER…] [--redactors FILE] [--json] PACK
//	contextos compile --pack FILE… [--pub PUBFILE… | --allow-unsigned] --request FILE --run-context FILE
//	    [--overlay FILE] [--evidence FILE] [--memory FILE] [--ontology NS@VERSION…] [--redactors FILE]
//	contextos run --pack FILE… [--pub PUBFILE… | --allow-unsigned] --request FILE --run-context FILE
//	    (--plan FILE | --planner openai:MODEL|anthropic:MODEL [--price MODEL=IN/OUT…]) --tools FILE [--overlay FILE]
//	    [--approve GATE=APPROVER:ROLE…] [--evidence FILE]
//	    [--memory FILE] [--ontology NS@VERSION…] [--record OUT] [--replay-packet OUT] [--now RFC3339]
//	    [--endpoints FILE [--secrets FILE]] [--redactors FILE] [--claim-pub PUBFILE…] [--store STORE]
//	contextos replay --pack FILE… [--pub PUBFILE… | --allow-unsigned] [--overlay FILE]
//	    [--ontology NS@VERSION…] [--redactors FILE] [--claim-pub PUBFILE…] [--store STORE] PACKET
//	contextos resume RUN_ID --store STORE --approve GATE=APPROVER:ROLE… --pack FILE…
//	    [--pub PUBFILE… | --allow-unsigned] (--plan FILE | --planner P:MODEL [--price MODEL=IN/OUT…]) --tools FILE [--overlay FILE] [--evidence FILE]
//	    [--memory FILE] [--ontology NS@VERSION…] [--record OUT] [--replay-packet OUT] [--now RFC3339]
//	    [--endpoints FILE [--secrets FILE]] [--redactors FILE] [--claim-pub PUBFILE…]
//	contextos records list --store STORE [--run ID] [--tenant ID] [--status STATUS]
//	contextos records show --store STORE RECORD_ID
//	contextos records verify --store STORE
//	contextos approvals list --store STORE [--redactors FILE]
//	contextos agent run --kind codex|claude_code [--model M] [--cd DIR] [--binary PATH]
//	    [--timeout DURATION] [--ext KEY=JSON…] PROMPT
//	contextos serve --pack FILE… [--pub PUBFILE… | --allow-unsigned] (--plan FILE | --planner P:MODEL [--price MODEL=IN/OUT…]) --tools FILE
//	    (--auth-jwks FILE | --auth-oidc ISSUER --auth-audience AUD | --auth-hs256 FILE | --insecure-dev) [--auth-issuer ISS]
//	    [--claim-tenant NAME] [--claim-roles NAME] [--invoke-roles ROLE,…] [--addr HOST:PORT] [--store STORE]
//	    [--webhook URL --webhook-secret FILE [--inbox-url URL]] [--overlay FILE] [--evidence FILE] [--memory FILE]
//	    [--ontology NS@VERSION…] [--endpoints FILE [--secrets FILE]] [--redactors FILE] [--claim-pub PUBFILE…] [--now RFC3339]
//
// Every command prints its flags with -h. A FILE argument of "-" reads
// standard input. Flags marked … may be repeated.
//
// # Commands
//
// version prints the runtime version.
//
// schemas lists the published JSON Schemas (draft 2020-12); with --out it
// writes every schema file into DIR.
//
// validate checks an invokeAgent request or a RunContext against its
// published schema and the runtime's own rules, strictly (duplicate
// members and invalid UTF-8 are refused). It prints one "path: message"
// line per problem.
//
// pack validate runs every validation gate of a Context Pack and prints one
// "gate: path: message" line per problem, one "warning: gate: path:
// message" line per warning (a risk the pack is valid with, such as an
// approval gate over caller-asserted request.context where the per-call
// form over tool.args belongs, with the fix), then "valid" or "invalid"
// with the counts, each line prefixed with the file name when several
// files are given; --json prints one array of them, each with its
// severity (error or warning). It exits 1 only for a problem.
//
// pack keygen writes an Ed25519 key pair into DIR: <kid>.key (mode 0600)
// and <kid>.pub.
//
// pack sign prints the signed pack file of a pack that passes every gate.
//
// pack verify checks a signed pack file against the trusted public keys
// and prints "verified REF CONTENT_HASH KID".
//
// pack diff prints the version class of the change from OLD to NEW (patch,
// minor, major or reject) with one "class: path: reason" line per change,
// and whether the version bump is big enough; --json prints the same as
// JSON. Signed pack files are diffed by their pack.
//
// pack test runs seed 003's CI checklist on PACK, in order: schema,
// references, policy, security, the compiled tool surfaces against each
// golden case's expected minimal surface, the golden compiles (stable
// manifests and budget reports), the replay of incident and correction
// packets, the evaluators against the pack's eval_targets, the release
// gates against --baseline, and the diff by layer. Given a baseline, the
// pack is held to the stricter of the baseline's eval targets and release
// gates and its own. It prints each step, each golden case and the
// scorecard (--json: the report as JSON), with each step's validation
// warnings, and exits 1 when a gate fails (a warning never fails it).
// --golden is required, and a directory without cases fails. --trigger
// runs only the checks the named refresh trigger requires; a validation
// problem fails the report whatever it selects (package eval documents
// the golden case format).
//
// compile resolves the packs (the first is primary) with the request and
// run context into the CompiledContext and prints it as JSON. A signed
// pack must verify with a --pub key (tampered, or with no key to verify
// it, it is refused, --allow-unsigned or not); a plain pack needs
// --allow-unsigned. Each pack's compatibility.requires must hold for this
// runtime (its runtime contract version, and the highest --ontology).
// --overlay applies an environment overlay; --ontology declares the
// ontology versions the host supports.
//
// run drives one invocation through the runtime with a scripted planner
// and scripted tools and prints
//
//	{"run_id", "status", "decision_record", "tool_results", "events", "pending_approvals"}
//
// Adapters whose endpoint_ref is in the --endpoints file are called for
// real through their transport instead. Plain packs need --allow-unsigned
// (they are signed in memory with a throwaway key). --record and
// --replay-packet also write the decision record and the replay packet (a
// paused run's packet replays to the same pause). --now fixes the clock.
// --claim-pub gives the public keys of the identity-claim issuer: with one,
// a run whose packs allow delegated or destructive work needs a verified
// identity claim; without one such a run is allowed and its record says
// the claim check was waived.
//
// replay replays a replay packet offline against the given packs, which
// must have the content hashes the packet pins (a packet pins hashes, not
// the packs), and prints the replay result as JSON. No planner and no live
// tool is called. Without --ontology, the packs' own ontology versions
// are declared. With --store, PACKET is the id of a packet in the store
// (rp_…) or of a record that names its packet.
//
// # Durable stores
//
// --store STORE keeps the runs (checkpoints), decision records, replay
// packets, transcripts, idempotency claims and used approvals in a
// durable store instead of process memory: sqlite:PATH (an embedded
// SQLite file, created and migrated on first use) or a postgres:// (or
// postgresql://) URL. A value that names no store, or a store that does
// not open, is a usage error; the message never shows the URL's password.
// run and replay take it optionally; resume, records and approvals need
// it.
//
// resume continues a run an earlier run (or resume) paused in the store,
// in a new process: --approve answers the gate it awaits with an approval
// by that approver holding that role, bound to the paused action's
// digest and decided at the command's clock (--now). It takes run's pack,
// plan, tools, evidence, memory, ontology and overlay flags (the same
// ones the run had: the plan file's turns go on where the run paused) and
// prints what run prints. A run that awaits no approval (unknown,
// finished, or being continued elsewhere) exits 1.
//
// records list prints the stored records in chain order as a JSON array
// of {record_id, run_id, tenant_id, status, outcome, decision_key,
// timestamp, closes, record_hash}; --run, --tenant and --status keep
// those that match. records show prints one record. records verify checks
// the whole chain (each record's hash and its link to the one before) and
// prints "verified: N records", or "broken: record INDEX (RECORD_ID):
// REASON" naming the first broken link, and exits 1.
//
// approvals list prints the runs that await an approval, oldest first, as
// a JSON array of {run_id, tenant_id, gate_id, approver_role,
// capability_id, tool_call_id, args, action_digest, ttl_seconds,
// requested_at, deferred_record_id}. The arguments are redacted by every
// built-in redaction rule, by the run's own rules and by every --redactors
// rule, as serve's inbox does (--redactors gives the host rules a pack
// names; a run naming a rule not given is an error).
//
// serve runs the runtime as an HTTP service (package server): the /v1 API
// (POST /v1/runs, GET /v1/runs/{run_id} and its events, GET /v1/approvals,
// POST /v1/runs/{run_id}/approvals/{gate_id}, the records), the approvals
// inbox at /inbox, and /healthz and /readyz, on --addr (default
// 127.0.0.1:8080). It takes run's pack, planner, tool, evidence, memory,
// endpoint and store flags; without --store it keeps everything in
// sqlite:contextos.db, and replicas share a postgres:// store. Callers
// authenticate with a bearer JWT verified against a JSON Web Key Set file
// (--auth-jwks), an OpenID Connect issuer (--auth-oidc, with
// --auth-audience) or an HS256 secret file (--auth-hs256); --auth-issuer
// and --auth-audience bind the tokens; the sub claim is the caller, and
// --claim-tenant (default tenant_id) and --claim-roles (default roles)
// name the claims of its tenant and roles. --invoke-roles limits who may
// start a run. --insecure-dev reads tokens without verifying them, on a
// loopback --addr only. --webhook posts each pause, signed per the
// Standard Webhooks specification with the --webhook-secret file
// (whsec_…); --inbox-url makes its events link the run's inbox page.
// SIGTERM or SIGINT stops it: no new requests, the runs in flight finish
// for up to 30 s, exit 0. See docs/serve.md.
//
// # Files
//
// The plan file (run --plan) is a JSON array of planner turns, used in
// order; each turn is
//
//	{"steps": [{"capability_id": "adp_orders.lookup", "args": {…}, "evidence_refs": […]}],
//	 "decision": {"decision_key": …, "outcome": …, "outputs": {…}, "rationale": …, "confidence": 0.95}}
//
// with steps and decision each optional. When the turns run out before a
// terminal verdict the run escalates.
//
// Instead of a plan file, run and resume take --planner PROVIDER:MODEL: a
// model plans each turn through planner/openai (openai:MODEL, for OpenAI
// and any OpenAI-compatible server; OPENAI_API_KEY, OPENAI_BASE_URL) or
// planner/anthropic (anthropic:MODEL; ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL). The model's calls are governed like any plan's,
// and the replay packet records its turns, so replay never calls it.
// Each turn's tokens are charged to the run's token budget; --price
// MODEL=IN/OUT[/CACHED[/CACHE_WRITE]] (US dollars per million tokens of
// input, output, cached input and input written to the cache, as in
// gpt-4.1=2/8/0.5) prices them, so the turns are charged to the cost
// budget (max_cost_cents) too and a run past it stops budget_exceeded.
// Without --price the model's tokens cost nothing against it, which run
// warns about on standard error.
//
// The tools file (run --tools) is a JSON object from capability id
// ("adp_orders.lookup") to the list of results its successive calls get
// (the last one repeats); each result is
//
//	{"status": …, "output": {…}, "error": {"code", "reason", "retryable", "message", "details"},
//	 "mutations": […], "latency_ms": …, "cost_cents": …, "tokens": …}
//
// cost_cents and tokens are what the attempt spent (a paid call, a
// delegated agent's model tokens), charged to the run's budget whether the
// call succeeds or fails.
//
// Status ok, completed or none succeeds; failed fails the call with
// execution_failed; error, blocked, rejected and denied fail it with
// permission_denied (an adapter cannot itself block a call); an "error"
// object is returned as the tool error. A capability without results
// fails with unsupported_tool. A write must name its mutations.
//
// --approve GATE=APPROVER:ROLE answers a pause on that gate with an
// approval by that approver holding that role, bound to the paused action;
// without it the run ends DEFERRED and pending_approvals says what it
// awaits.
//
// The evidence and memory files (--evidence, --memory) are JSON arrays of
// compiler.EvidenceItem and compiler.MemoryItem.
//
// The endpoints file (run --endpoints) maps an adapter's endpoint_ref to
// how it is reached:
//
//	{"internal://payments": {"transport": "external", "url": "https://…", "auth": {"profile": "bearer", "secret_ref": "payments_token"},
//	  "timeout_ms": 2000, "max_attempts": 3, "backoff_ms": 100, "max_backoff_ms": 1000, "jitter": "full"}}
//
// transport is http, external, webhook (or webhook-callback), grpc or mcp;
// mcp takes "command" (an argument vector, started as a subprocess) or a
// streamable-HTTP "url". Other members: jitter_seed, poll_interval_ms
// (webhook), max_redirects (default 0: a redirect is an error),
// allow_private (default true here: the file is the operator's own
// configuration), namespace, agent, input_raw (true: send the arguments
// only in input_raw, for envelope servers whose input is a string map, as
// Orloj's are), and tools: per capability name, the tool.name sent for it
// ("name", the tool's own name on its server; default the capability id,
// adapter_id.capability; two capabilities cannot share one, and mcp takes
// none) and its capability labels and risk level, checked against the
// adapter's approval mode:
//
//	"tools": {"web_search": {"name": "web_search", "capabilities": ["network.read"], "risk_level": "low"}}
//
// An api_key_header auth profile's header_name cannot be a reserved header
// (Host, Content-*, Transfer-Encoding, Connection, Proxy-*, … and the
// headers the transports write for a call). An entry that matches no
// adapter is an error.
//
// The secrets file (run --secrets) maps a secret name to its value, or to
// an object of keys (for oauth2_client_credentials: client_id and
// client_secret), which secret_ref names as name:key. Secret values never
// reach the output, an error or a log line.
//
// The redactors file (--redactors) is a JSON object from a redaction rule
// name to a Go regular expression (RE2); packs may then name those rules in
// policy_layer.guardrails.redaction_rules, and the gateway applies them.
//
// # Exit codes
//
// 0: the document is valid, the pack verified, the run completed (whatever
// its status), the replay was replay_equal or the record chain holds. 1:
// the input was read and is invalid (one line per problem), a signature
// does not hold, a pack change is rejected or its version bump is too
// small, a replay mismatched or was tampered with, the record chain is
// broken, a record is not in the store, or a resumed run awaits no
// approval. 2: bad flags or arguments, unreadable files, or an
// internal error.
package main
