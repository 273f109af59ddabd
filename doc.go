// Package contextos is the root of ContextOS for Go, an embeddable SDK that
// runs governed AI-agent work inside a host's own service.
//
// A host builds one Runtime and calls Invoke with an invokeAgent request
// envelope and the run's identity (package runcontext). The runtime resolves
// the signed, pinned Context Packs the request names (package pack),
// compiles them with the request into a CompiledContext with a
// deterministic hash (packages policy and compiler), and runs the canonical
// loop: the host's planner proposes a plan, the critic verifies it, the
// executor carries out its tool calls through the Tool Gateway (package
// gateway), the critic scores the results, and consolidation turns effects
// into memory proposals. The loop ends in an accept, an escalation, a
// rejection, a budget limit or a pause for approval.
//
// Every run returns a DecisionRecord (package decision), the audit receipt
// of what the agent saw, was allowed to do, did and why; and, when sampled
// or when a run fails, a ReplayPacket (package replay) that replays the run
// from its tool transcripts without touching a live system.
//
// Hosts plug in their own planner model, host critic, tool adapters and
// stores through small interfaces (Planner, Critic, MemoryStore,
// CheckpointStore, PacketStore, and the gateway's and decision package's
// stores), each store with an in-memory implementation and a conformance
// suite, so agents can be unit-tested offline with package contextostest.
// A run that pauses for approval resumes with Resume on any runtime that
// shares the stores; Stream yields a run's typed events; Replay re-runs a
// captured packet offline and reports replay_equal or the typed
// differences; Capture packs a finished run after the fact.
//
// Governed paths fail closed: bad input is refused with a typed error that
// names the field or rule, and nothing is half-applied. Determinism is part
// of the contract: clocks and ids are injected, map order never reaches
// output, and the same inputs give the same bytes and the same digests
// (RFC 8785 canonical JSON, "sha256:<hex>").
//
// A record tells what happened: a run whose write did not complete is
// never DECIDED with an outcome other than a refusal or an escalation, a
// record that does not validate against its decision spec is ESCALATED
// naming its problems, and a side effect that ran is always followed by a
// stored record or a resumable checkpoint, whether the caller's context is
// cancelled, a plug-in panics or a store fails afterwards. Invoking a run
// id again returns the stored result (ErrRunInProgress while it runs).
//
// Who acts is verified, not assumed: an agent's identity claim (ctxid/1),
// when a run carries one, is verified on every Invoke and Resume against
// Options.Identity.Keys and the run (agent, run, tenant, session, user,
// validity window on the runtime's clock), and a run whose packs allow
// delegated or destructive work must carry one unless the host waives it,
// which the run's records then state (IdentityOptions). A refused claim
// ends the call with a *runcontext.ClaimError before any tool call.
//
// # Nouns
//
// The root's nouns, and the same words elsewhere in the module:
//
//   - Result is what Invoke and Resume return: the run's status, its
//     latest decision record, its tool results and what a pause awaits.
//     replay.Report is the report of one replay (replay_equal or the
//     differences).
//   - Status, in a Result, is the decision record's status
//     (decision.Status: DECIDED, DEFERRED, REJECTED, ESCALATED,
//     IN_FLIGHT, CLOSED); a tool result's status is gateway's.
//   - CriticVerdict (with Judgement, a verdict and its reason) is what a
//     critic decides about a plan: ok, replan, reject or escalate at
//     verify; accept, retry, replan or escalate at score.
//     policy.Verdict is the outcome of a pack's policy rules.
//   - PlanUsage is one planner turn's model usage (tokens, cost), charged
//     to the run budget once, whether the turn gave a plan (Plan.Usage)
//     or failed after the model answered (PlanUsageError);
//     runcontext.Usage is the budget meter's reading for the whole run.
//   - Outcome, in a DecisionProposal, is the decision's outcome from the
//     decision spec's allowed outcomes ("approved"); gateway.Outcome is an
//     adapter's answer to one call.
//
// # Checkpoints
//
// A paused or long-running run is kept in a CheckpointStore as a
// Checkpoint: the run id, a revision for optimistic concurrency, and Data
// in an encoding the runtime owns and names with Version. Stores never
// interpret Data. A runtime reads every version it lists as supported
// (version 1, the encoding before checkpoints were versioned; version 2,
// which pins the run's packs and overlays; version 3, version 2 with
// a terminal record the decision store did not confirm, written only for
// such a run so that a runtime reading versions 1 and 2 alone refuses it;
// version 4, version 3 with the spend of the run's planner turns since
// the state it holds, written only while the run owes a takeover such
// spend, so that a runtime reading versions 1 to 3 refuses to take the
// run over without charging it; and version 5, version 4 with what the
// attempts of a tool call the gateway retried spent, written only while
// that call has no result, so that a runtime reading versions 1 to 4
// refuses it likewise; and version 6, version 5 with the store failures
// of the run's tool calls since the state it holds, written only while
// the run has such failures not yet in a state save, so that a runtime
// reading versions 1 to 5 does not take the run over with a packet that
// leaves them out) and refuses another with a
// *CheckpointVersionError (ErrCheckpointVersion). A checkpoint pins the packs and overlays its run
// compiled under: a resume under others is refused with ErrLedgerMismatch.
//
// This package is what a host uses: Runtime and Options, the plug-in
// interfaces, events, results and errors. The run engine behind them —
// the loop, resume and takeover, replay, checkpoint state, the built-in
// critic, leases, guards and run metrics — is internal. The plug-in
// types, events and results are the engine's own types under the same
// names (aliases), documented field by field there: go doc
// github.com/contextos/contextos/internal/engine.Event, say.
//
// Tools in other processes are reached through the Tool Contract v1
// transports of package transport (http, external, webhook-callback) and
// its grpctransport and mcptransport subpackages; hosts may also implement
// gateway.Adapter directly.
package contextos
