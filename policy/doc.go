// Package policy owns rule evaluation: a pack's policy layer is prepared
// once (every JsonLogic expression parsed and checked, bundles ordered by
// priority) into an Engine that evaluates many times, concurrently, without
// re-parsing.
//
// An evaluation reads one policy data Document (NewDocument; its members
// are listed in the repository's docs/policy.md): request, user, agent,
// tenant_id, session_id, intent, safety_mode and, for a per-call
// evaluation at the gateway, tool. It returns an Evaluation.
//
// The nouns of this package:
//
//   - Evaluation is the result of one evaluation: the Verdict, a Decision
//     per applicable rule, the rules that applied per bundle, the
//     guardrail labels Raised and each approval Gate's status.
//   - Decision is one rule's decision: its RuleOutcome with the branch's
//     effects and a deterministic policy_decision_id (pol_…) derived from
//     the run id, bundle, rule and the digest of the data the rule read,
//     so replay reproduces it.
//   - RuleOutcome is what one rule decided: allow, deny, or not_applicable.
//     It is not a decision spec's (business) outcome.
//   - Verdict is the policy's overall verdict of one evaluation: refuse
//     (a must_refuse label was raised) beats escalate (must_escalate)
//     beats deny beats allow. It is not a critic's contextos.CriticVerdict.
//
// Evaluation fails closed: a variable a rule needs that the document lacks,
// a type error in a comparison or arithmetic (a non-number, or a host's NaN
// or infinity), or an evaluation failure is an *Error naming the bundle
// and rule (errors.Is(err, ErrEvaluation)); the evaluation then has no
// result, so nothing is allowed.
//
// Expressions have JsonLogic's semantics (NaN, 0, "", null and [] are
// falsy) and a budget. Statically, an expression nests at most 64
// operators and holds at most 10,000 values, or Prepare refuses it (a
// *Error of KindPrepare); the same limits make pack validation refuse it. While it
// runs, one evaluation takes at most Options.MaxOperations steps (default
// 100,000; a loop over an array costs a step per element, a string a step
// per KiB) and builds at most Options.MaxBytes (default 4 MiB), or it stops
// with an *Error of KindBudget naming the rule or gate and the
// operator. Both match ErrBudget.
package policy
