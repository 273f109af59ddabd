// Package eval judges a Context Pack version before it is published: it
// runs golden cases in process, scores them with evaluators, builds a
// scorecard against the pack's evaluation_layer, compares it with a
// baseline version's under the release gates, and runs the seed's CI
// checklist (Test), which `contextos pack test` wraps.
//
// # Golden cases
//
// A golden case is one JSON file in a golden directory (Load reads every
// *.json file directly in it, in name order; packet files live in a
// subdirectory). Decoding is strict: an unknown or misspelt member, a
// duplicate member or a wrong type is a *CaseError (ErrCase) naming the
// file and the JSON path of the field. A scripted case:
//
//	{
//	  "description": "A refund of INR 4200 pauses for finance approval, then is decided.",
//	  "intent": "support.refund",
//	  "request": { …the invokeAgent request (runcontext.InvokeRequest)… },
//	  "run_context": { …the host RunContext (runcontext.RunContext)… },
//	  "evidence": [ { "evidence_ref": "kg:order:ord_881#snapshot_kg_2026_05_03_T0930", "kind": "order_record",
//	                  "content": "Order ord_881 …", "source_id": "kg", "trust": "trusted", "snapshot": "kg_2026_05_03_T0930" } ],
//	  "memory": [ { "memory_ref": "mem:cus_77:pref_channel", "content": "…", "tier": "semantic", "state": "promoted", "confidence": 0.97 } ],
//	  "turns": [
//	    { "steps": [ { "capability_id": "adp_orders.lookup", "args": { "order_id": "ord_881" } },
//	                 { "capability_id": "adp_policy.eval", "args": { "order_id": "ord_881" } } ],
//	      "usage": { "tokens": 900, "cost_cents": 0.4 } },
//	    { "steps": [ { "capability_id": "adp_payments.issue_refund",
//	                   "args": { "order_id": "ord_881", "amount_inr": 4200, "currency": "INR" } } ],
//	      "decision": { "decision_key": "support.refund.execute", "outcome": "approved",
//	                    "outputs": { "refund_amount_inr": 4200, "currency": "INR" },
//	                    "rationale": "Order delivered, identity verified.", "confidence": 0.95 },
//	      "usage": { "tokens": 700, "cost_cents": 0.3 } }
//	  ],
//	  "planner_latency_ms": 600,
//	  "tools": {
//	    "adp_orders.lookup": [ { "output": { "order_id": "ord_881", "status": "delivered" }, "latency_ms": 120 } ],
//	    "adp_policy.eval": [ { "output": { "eligible": true }, "latency_ms": 80 } ],
//	    "adp_payments.issue_refund": [ { "status": "completed", "output": { "transaction_id": "txn_1" },
//	                                     "mutations": [ "refund:txn_1" ], "latency_ms": 450, "cost_cents": 0.2 } ]
//	  },
//	  "approve": [ { "gate_id": "GATE_FINANCE_APPROVAL", "approver": "user_finance_lead_77", "role": "finance_lead" } ],
//	  "secrets": [ "tok_user_7a" ],
//	  "now": "2026-05-04T09:31:00Z",
//	  "expect": {
//	    "status": "DECIDED",
//	    "outcome": "approved",
//	    "tools": [ "adp_orders.lookup", "adp_payments.issue_refund", "adp_policy.eval" ],
//	    "policy_results": [ { "rule_id": "R_HIGH_VALUE_REQUIRES_APPROVAL", "outcome": "allow" } ],
//	    "policy_verdict": "allow",
//	    "runtime_controls": { "must_refuse": [ "refund_without_identity" ], "must_escalate": [ "fraud_signal_high" ],
//	                          "approval_gates_active": [ "GATE_FINANCE_APPROVAL" ], "redaction_rules_active": [ "pan", "credit_card" ] },
//	    "pauses": [ "GATE_FINANCE_APPROVAL" ],
//	    "calls": [ "adp_payments.issue_refund" ],
//	    "no_calls": [],
//	    "replay_equal": true
//	  }
//	}
//
// turns are the root Plan type (the CLI's plan file); tools map a
// capability id to the results of its successive calls, the last one
// repeating (the CLI's tools file); approve answers a pause on a gate (a
// pause nobody answers leaves the run DEFERRED). expect.status is
// required; every other expectation is checked when present:
// tool_manifest, budget_report and runtime_controls compare exactly with
// the compiled context, tools is the expected minimal surface (surfaced
// capability ids, any order). The intent defaults to the request's.
//
// A packet case replays a recorded replay packet — an incident or an
// operator correction captured from a production run with Runtime.Capture:
//
//	{ "description": "Operator correction of run_flow3.", "packet": "packets/flow3-correction.packet.json",
//	  "expect": { "status": "DECIDED", "outcome": "approved" } }
//
// # Running
//
// A Runner runs each case on a fresh contextos.Runtime: the pack under
// test (and the baseline, so packets pinning it resolve) signed with a
// throwaway key into an in-memory registry, in-memory stores, a scripted
// planner, scripted adapters (gatewaytest.ScriptedAdapter) and a
// simulated clock that moves only by the scripted latencies, so measured
// durations are reproducible. The request's context_pack_refs naming the
// pack's id are re-pinned to the version under test. A scripted case runs
// twice (the second compile must give the same hash, tool manifest and
// budget report), then its run is captured and replayed. A packet case
// is replayed (Runtime.Replay) on the pack version it pins when the
// registry holds it — the audit's determinism check — and its recorded
// inputs (request, run context, evidence, memory, planner outputs and
// failures, adapter outcomes per capability in order, clock readings,
// approvals re-bound to the run's pause on the same gate) are run, like a
// scripted case, against the pack under test: that run is held to the
// case's expect, so a candidate that changes the packet's outcome fails
// it. A packet that cannot be read or run is a case_error of gate replay.
// Case and packet files are read through an os.Root on their directory
// (no link out of it), must be regular files, and are read bounded. The
// result is a Run: pure data the evaluators read.
//
// # Evaluators, scorecards, gates
//
// The built-in evaluators are named as the seed names the metrics:
// policy, safety, utility (floors), latency_p99_ms and
// economics_cents_per_decision (ceilings). A host registers its own with
// Evaluators.Register. Score builds a Scorecard per intent and, given the
// baseline's scorecard, each metric's delta against the release gates'
// max_delta. A candidate never grades itself: given a baseline it is held
// to Bar, the stricter of the baseline's eval targets and release gates
// and its own per intent and metric (floors the larger, ceilings the
// smaller, release gates the union by metric with the smaller max_delta);
// without one, to its own. The scorecard records that bar (HeldTo), the
// pack's content hash, the sorted digests of the cases and the baseline
// scorecard's hash, and its hash (sha256 over its RFC 8785 form without
// the hash) covers them. An intent with targets but no runs, a run whose
// intent has no target, a score that is NaN, ±Inf or a panic, and a
// release gate on a metric no evaluator scores are problems, never
// silently passed. ReplayGate and EvaluationGate return pack.Problem
// values of gates "replay" and "evaluation"; PackGate wraps both as a
// pack.GateFunc for pack.ValidateOptions.Gates, so that Sign and a
// registry's Put refuse a pack that fails them (and every pack when it
// has no cases).
//
// # The CI checklist
//
// Test runs the steps schema, references, policy, security,
// tool_manifest, compile, replay, evaluators, release_gates and diff (or
// those a refresh trigger selects: StepsFor) and returns a Report with
// each step's status and problems, each case's result and the scorecards.
// A problem of pack validation fails the report whatever the triggers
// select: the schema step, which always runs, carries the problems of
// gates no selected step reports. Without golden cases the golden steps
// fail (code no_cases): a pack is never passed without evidence.
//
// # Nouns
//
// The package's nouns, and the same words elsewhere in the module:
//
//   - Case is one golden case file: its inputs (scripted, or a recorded
//     packet) and Expect, what its run must give.
//   - ToolResult is one scripted answer of a capability in a case (the
//     CLI's tools file): what the case's adapter returns for one call, a
//     gateway.Outcome or, for a failing status or a scripted error, a
//     *gateway.ToolError, with what the attempt spent. It is an input, not
//     the gateway's result: the gateway still checks, redacts and records
//     the call and answers with its own gateway.ToolResultEnvelope, whose
//     gateway.Status is its verdict on the call (Call.Status). A call the
//     gateway refuses before its adapter runs uses up no scripted result.
//   - PolicyResult, in an Expect, is one rule's expected outcome (rule id;
//     allow, deny or not_applicable), looked for among the policy.Decision
//     values of the run's context ledger (the compile's policy
//     evaluation). It is an expectation; the evaluation's own record of a
//     rule is the policy.Decision.
//   - Approval, in a case, answers a pause on a gate; the Runner resumes
//     the run with the gateway.Approval it makes of it.
//   - Run is what one golden case gave, pure data the evaluators and gates
//     read: the final decision record's Status (a decision.Status) and
//     outcome, the Calls, the pauses, the simulated duration and cost,
//     whether the compile was stable and whether the run's packet
//     replayed equal. It is not one governed run (a scripted case runs
//     twice, each time on a fresh contextos.Runtime), nor an agent.Run.
//     Call is one of its tool calls, in transcript order, with the
//     gateway's Status for it; gateway.Call is what an adapter is handed
//     for one attempt.
//   - Problems are pack.Problem values throughout, each naming its gate:
//     a Run's (Run.Problems: gate replay or evaluation), a Scorecard's, a
//     StepResult's.
//   - Scorecard is a pack version's scores per intent and metric
//     (IntentScore, MetricScore) against the bar it is held to (HeldTo),
//     with each metric's delta against a baseline scorecard, and a Hash
//     over the pack, the cases, the bar and the baseline.
//   - Step is one step of the CI checklist (schema … diff), StepStatus
//     its status (pass, fail or skipped) and StepResult its result: the
//     status, why it was skipped, its problems and, for diff, the changes
//     per layer (LayerDiff). contextos.Step is one tool call of a plan.
//   - CaseResult is one golden case's line in a Report: its Run summed up,
//     passed when the Run has no problems, with the final status and
//     outcome.
//   - Report is the CI checklist's result (Test): a StepResult per step
//     selected, a CaseResult per case and the scorecards. replay.Report
//     is what one replay of a packet found (replay equal, or the
//     differences); a Run keeps what its replays found as ReplayEqual and
//     ReplayDiffs.
package eval
