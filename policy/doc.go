// Package policy owns rule evaluation: a pack's policy layer is prepared
// once (every JsonLogic expression parsed and checked, bundles ordered by
// priority) into an Engine that evaluates many times, concurrently, without
// re-parsing.
//
// An evaluation reads one policy data Document (DESIGN.md, "The policy data
// document"): request, user, agent, tenant_id, session_id, intent,
// safety_mode and, for a per-call evaluation at the gateway, tool. It
// returns, per applicable rule, an outcome (allow, deny, not_applicable)
// with the branch's effects and a deterministic policy_decision_id (pol_…)
// derived from the run id, bundle, rule and the digest of the data the rule
// read, so replay reproduces it; the guardrail labels raised; the approval
// gates that are active; and the overall Verdict, where must_refuse beats
// everything, must_escalate beats allow, and deny beats allow.
//
// Evaluation fails closed: a variable a rule needs that the document lacks,
// a type error in a comparison or arithmetic, or an evaluation failure is an
// *EvalError naming the bundle and rule (errors.Is(err, ErrEvaluation)).
package policy
