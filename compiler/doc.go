// Package compiler owns the Context Pack compiler: Compile turns pinned,
// verified packs, an invokeAgent request and a RunContext into a
// CompiledContext (compiled-context.v1) by seed 003's nine resolution
// stages, in order: load and merge the packs (1), tenancy (2), overlays
// (3), ontology and intent (4), guardrails and policy (5), the tool surface
// (6), evidence and memory admission (7), token budgets and buckets with
// visible truncation (8), and runtime controls, prompt, budget report and
// context ledger (9).
//
// The compiler is a pure function of its inputs: it does no I/O of its own
// and reads no clock or randomness. Evidence and memories come from the
// host's EvidenceSource and MemoryRecall; token counts from a Tokenizer;
// time, when needed, from Options.At (an instant, not a clock). The same inputs give the same bytes
// and the same compiled_context_hash, on every machine and run.
//
// Prepare does the request-independent work once per pack set (merge,
// each pack's content against the hash it was verified under and its
// compatibility.requires against Options.Host, overlays, validation,
// ontology check, policy preparation); the returned Prepared compiles many
// requests, concurrently.
//
// The nouns of this package: Input is one resolved pack given to the
// compiler; CompiledContext is the result (the CompiledPrompt the planner
// sees, the Manifests of policy, tools and evidence, the RuntimeControls
// the runtime enforces, the BudgetReport and the ContextLedger, the
// run-specific lineage); a ContextBlock is one block of the prompt, in
// one bucket; an Omission is something left out and why. An *Error is a
// refused compile, naming the stage that refused it.
//
// # Caller text
//
// Text the caller or a host source supplies — the user message, the
// channel, the locale, the session id, the request's input.context (its
// canonical JSON, as one string), evidence and memory refs, kinds,
// sources, snapshots, tiers and content — enters the prompt only as a
// Go-syntax quoted string: one line, its quotes escaped, control and
// format characters escaped. It cannot open a block, forge a role marker
// or a header of CompiledPrompt.Render; it is data, never instructions.
// Pack text, signed by the pack's publisher, is written as it is.
//
// The user message and the request context are bounded by the session
// bucket like any block: when the session block or the task (both carry
// the message) needs more tokens than the session bucket allows, the
// compile is refused with ErrBudget, wrapping a *runcontext.BudgetError
// for tokens.session. It is refused rather than truncated, because a
// message or context cut short can ask for something else.
//
// # Hashing
//
// compiled_context_hash is "sha256:" over the RFC 8785 canonical JSON of
// the compiled prompt, manifests, runtime controls and budget report (seed
// 001): what the compile produced. Nothing run-specific is in it — the
// prompt cites policy rules ("policy:<bundle>#<rule>"), not the policy
// decision ids, which are derived from the run id — so two runs of the
// same packs, request input and run-context settings that differ in run,
// request or trace ids share it. The session block shows the whole request
// input, input.context included, so any change of it moves the hash. The
// run-specific lineage (pack content
// hashes and overlays, request, run and trace ids, input digests, policy
// results with their decision ids, omissions) is in the context ledger,
// which has its own ledger_hash: "sha256:" over the ledger without
// ledger_hash, compiled_context_hash included. CompiledContext.Verify
// recomputes both.
//
// Packets recorded in an earlier form (Form2: no input.context in the
// session block; Form1: one hash over the whole context, ledger included)
// replay in that form: see Form and EarlierForms.
package compiler
