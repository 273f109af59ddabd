// Package server owns the HTTP face of a Runtime: an embeddable
// http.Handler (New) with the /v1 API, the approvals inbox and health
// checks, the bearer-JWT authenticators it verifies callers with, and the
// signed pause webhook (Webhook). contextos serve runs it; a host mounts
// it behind its own routing.
//
// The API (JSON; every error is application/problem+json naming the
// field or the rule):
//
//	POST /v1/runs                                 {"request": …, "run_context": …}: the run's result, or 202 and a Location with "Prefer: respond-async"
//	GET  /v1/runs/{run_id}                        the run: state, status, record, tool results, events, pending approvals
//	GET  /v1/runs/{run_id}/events                 the run's events as server-sent events, live while it runs
//	GET  /v1/approvals                            the pending approvals the caller may decide
//	POST /v1/runs/{run_id}/approvals/{gate_id}    {"decision": "approve"|"deny", "reason": …, "action_digest": …}: 202; the run resumes on a worker
//	GET  /v1/records?run_id=…                     the caller's tenant's records
//	GET  /v1/records/{record_id}                  one record
//	GET  /v1/records/verify[?run_id=…]            whether the record chain (and the run's records) verify
//	GET  /healthz, /readyz                        liveness and readiness, without a token
//	GET  /inbox, /inbox/runs/{run_id}[/records]   the approvals inbox
//
// Who may do what: every request but the health checks carries a bearer
// JWT, verified by the Authenticator (a JWKS file, an OIDC issuer or an
// HS256 secret); its sub, tenant_id and roles claims (the last two
// renamable) make the Principal. A caller sees and decides its tenant's
// runs only (another tenant's run is not found: 404); it may start a run
// of its tenant (holding one of Options.InvokeRoles, when set); it may
// decide a pending approval when it holds the gate's role and neither
// requested the run (its user, by the run's principal chain or request)
// nor started it: 403 otherwise. The approver is the token's subject and
// the gate's role, never anything a body says, and the run's record names
// them. A decision names the pause it decides by the action_digest GET
// /v1/approvals lists for it (required: 400 without it) and is refused
// (409) unless the run awaits that pause, so a retried or stale decision
// never lands on the run's next pause. A decision is claimed in
// Stores.State under the pause's key, so of two decisions on one pause,
// on any replicas, the second is answered 409; an approval is refused (409) once ttl_seconds have passed since
// the run paused, and can then only be denied.
//
// Nothing secret or redacted reaches an answer: pending approvals' and
// events' arguments are redacted by every built-in rule and the host's
// (Options.Redactors), and records and tool results are as the runtime
// stored them, redacted.
package server
