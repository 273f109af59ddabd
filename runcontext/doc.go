// Package runcontext owns the identity, authority and budget of one run:
// the invokeAgent request envelope ([InvokeRequest], invoke-agent.v1), the
// [RunContext] carried through every layer (run-context.v1), users and their
// delegations, agent identity and principal chains, signed identity claims
// (ctxid/1), the [ApprovalMode] order, the run budget and its [Meter], and
// W3C trace context.
//
// # Decoding and validation
//
// [DecodeInvokeRequest] and [DecodeRunContext] decode strictly (field names
// are case-sensitive, unknown members of closed objects are refused,
// additive top-level members are kept in Extensions) and validate. Validate
// returns a *[ValidationError] that lists every [Problem]: the JSON path of
// the member at fault, a [Code] (CodeRequired, CodeFormat, CodeConflict…)
// and a message that never echoes a secret; it matches [ErrInvalid], and
// Has(code) looks a problem up. It is the same type pack, decision and
// schemas return.
//
// # Materializing a run
//
// [Materialize] turns a request (and, optionally, the host's own
// RunContext) into the run's RunContext: runtime hints become the run
// budget over documented defaults, the request's trace becomes the run's,
// and a disagreement between host and request is an error matching
// [ErrConflict], never a silent override.
//
// # Identity claims
//
// [SignClaim] and [VerifyClaim] sign and check ctxid/1 claims with Ed25519,
// resolving keys by kid through a [KeyResolver]; the time comes from the
// caller's clock. [VerifyRunClaim] checks a run's claim against the run
// itself: agent URN, run, tenant, session (a session-bound claim fits only
// its session) and user. A claim refused by verification is a
// *[ClaimError]; one refused by validation (it names another run, tenant
// or agent) is a *[ValidationError] from which errors.As also gives the
// *ClaimError, so callers handle every refused claim alike. [Materialize]
// never drops the request's claim: a host agent without one takes it, and
// two different claims conflict. Audit output carries the claim_hash
// ([RunContext.AuthRef], [RunContext.ForAudit]), never a token or key.
//
// # Budgets
//
// A [Meter] charges tokens per bucket, tool calls, cost and wall clock
// against the run budget, concurrently; a charge over any dimension is
// refused whole with a *[BudgetError] matching [ErrBudgetExceeded]. A
// run's [Usage] is what its Meter has charged so far; [DefaultRunBudget]
// is the budget a run gets when nothing sets one.
//
// # Trace context
//
// An invoke request's [Trace] is the caller's W3C trace context;
// [TraceFromHeaders] and [ParseTraceparent] parse incoming headers into
// it, and [Trace.Headers] renders it back. Propagating it on outbound tool
// calls is the runtime's job (the transports do it).
package runcontext
