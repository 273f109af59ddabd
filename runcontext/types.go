package runcontext

import (
	"encoding/json"

	"github.com/contextos/contextos/internal/wire"
)

// Principal is one link of a principal (delegation) chain.
type Principal struct {
	Kind     PrincipalKind `json:"kind" jsonschema:"required"`
	ID       string        `json:"id" jsonschema:"required"`
	TenantID string        `json:"tenant_id,omitempty"`
	Display  string        `json:"display,omitempty"`
}

// Delegation is an OAuth-style on-behalf-of grant from a user. TokenRef is a
// reference into the host's secret store, never a token.
type Delegation struct {
	AuthType AuthType `json:"auth_type" jsonschema:"required"`
	Scopes   []string `json:"scopes" jsonschema:"required"`
	Subject  string   `json:"subject" jsonschema:"required"`
	TokenRef string   `json:"token_ref,omitempty"`
}

// HasScopes reports whether the delegation grants every scope in want.
func (d *Delegation) HasScopes(want ...string) bool {
	if d == nil {
		return len(want) == 0
	}
	for _, w := range want {
		found := false
		for _, s := range d.Scopes {
			if s == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// UserClaims describes the user a run acts for. It is an open object:
// claims beyond the named ones are kept in Claims and reach policy as
// user.<name>.
type UserClaims struct {
	UserID     string      `json:"user_id" jsonschema:"required"`
	Delegation *Delegation `json:"delegation,omitempty"`
	Role       string      `json:"role,omitempty"`
	TenureDays *int        `json:"tenure_days,omitempty"`
	// Claims holds additional claims, keyed by member name.
	Claims map[string]json.RawMessage `json:"-" wire:"extra"`
}

type userClaimsWire UserClaims

// MarshalJSON writes the named claims and the additional ones.
func (u UserClaims) MarshalJSON() ([]byte, error) {
	return wire.MarshalOpen(userClaimsWire(u), u.Claims)
}

// UnmarshalJSON reads the named claims and keeps the others in Claims.
func (u *UserClaims) UnmarshalJSON(b []byte) error {
	var w userClaimsWire
	extra, err := wire.UnmarshalOpen(b, &w)
	if err != nil {
		return err
	}
	w.Claims = extra
	*u = UserClaims(w)
	return nil
}

// AgentIdentity names the executing agent: a versioned URN, a SPIFFE
// workload identity, its role, lifecycle, principal chain and signed
// identity claim.
type AgentIdentity struct {
	AgentID          string         `json:"agent_id,omitempty"`
	AgentURN         string         `json:"agent_urn" jsonschema:"required"`
	WorkloadIdentity string         `json:"workload_identity" jsonschema:"required"`
	Role             string         `json:"role,omitempty"`
	TokenRef         string         `json:"token_ref,omitempty"`
	Lifecycle        Lifecycle      `json:"lifecycle,omitempty"`
	PrincipalChain   []Principal    `json:"principal_chain,omitempty"`
	IdentityClaim    *IdentityClaim `json:"identity_claim,omitempty"`
}

// IdentityClaim is a signed, short-lived run or hop claim (ctxid/1). Audit
// output carries its ClaimHash, never a token or key. Nbf and Exp are Unix
// seconds. Sig is the base64url (unpadded) Ed25519 signature over the
// ClaimHash string.
type IdentityClaim struct {
	Version        string      `json:"version" jsonschema:"required"`
	Iss            string      `json:"iss" jsonschema:"required"`
	Sub            string      `json:"sub" jsonschema:"required"`
	Aud            string      `json:"aud,omitempty"`
	RunID          string      `json:"run_id" jsonschema:"required"`
	SessionID      string      `json:"session_id,omitempty"`
	TenantID       string      `json:"tenant_id" jsonschema:"required"`
	PrincipalChain []Principal `json:"principal_chain" jsonschema:"required"`
	Scopes         []string    `json:"scopes" jsonschema:"required"`
	Nbf            int64       `json:"nbf" jsonschema:"required"`
	Exp            int64       `json:"exp" jsonschema:"required"`
	Kid            string      `json:"kid" jsonschema:"required"`
	ClaimHash      string      `json:"claim_hash" jsonschema:"required"`
	Sig            string      `json:"sig,omitempty"`
}

// ClaimVersion is the only identity claim version this package accepts.
const ClaimVersion = "ctxid/1"

// Input is the user-facing part of an invocation.
type Input struct {
	Intent  string         `json:"intent" jsonschema:"required"`
	Message string         `json:"message" jsonschema:"required"`
	Channel string         `json:"channel,omitempty"`
	Locale  string         `json:"locale,omitempty"`
	Context map[string]any `json:"context,omitempty"`
}

// RuntimeHints are the request's budget hints; Materialize turns them into
// the run's RunBudget. A nil field means "not given".
type RuntimeHints struct {
	PlanTimeoutMS        *int64         `json:"plan_timeout_ms,omitempty"`
	MaxSessionDurationMS *int64         `json:"max_session_duration_ms,omitempty"`
	MaxToolCalls         *int           `json:"max_tool_calls,omitempty"`
	MaxPayloadBytes      *int64         `json:"max_payload_bytes,omitempty"`
	MaxCostCents         *float64       `json:"max_cost_cents,omitempty"`
	TotalTokens          *int           `json:"total_tokens,omitempty"`
	BucketTokens         map[Bucket]int `json:"bucket_tokens,omitempty"`
	MaxReplanAttempts    *int           `json:"max_replan_attempts,omitempty"`
	WallClockMS          *int64         `json:"wall_clock_ms,omitempty"`
}

// Attachment references a large payload passed beside the envelope.
type Attachment struct {
	ArtifactID string `json:"artifact_id" jsonschema:"required"`
	MediaType  string `json:"media_type" jsonschema:"required"`
	SHA256     string `json:"sha256" jsonschema:"required"`
	URI        string `json:"uri" jsonschema:"required"`
}

// Trace is the W3C trace context of an invocation (invoke-agent.v1
// InvokeTrace): 32 and 16 lowercase hex ids, two hex flag digits.
type Trace struct {
	TraceID    string `json:"trace_id" jsonschema:"required"`
	SpanID     string `json:"span_id" jsonschema:"required"`
	TraceFlags string `json:"trace_flags,omitempty"`
	TraceState string `json:"tracestate,omitempty"`
	Baggage    string `json:"baggage,omitempty"`
}

// InvokeRequest is the invokeAgent envelope (invoke-agent.v1), the single
// entry point for the runtime. Unknown top-level members are additive: they
// are kept in Extensions, never interpreted.
type InvokeRequest struct {
	// RequestID is the globally unique request identifier (seed 000): any
	// unique id — "req_9f3a12", a UUID — of ASCII letters, digits and
	// _ . : - starting with a letter or digit, at most MaxRequestIDLen
	// bytes; or, as before issue 15, "req_" then letters, digits and
	// _ . : @ / - (no "." or ".." segment), at most 256
	// bytes.
	RequestID       string        `json:"request_id" jsonschema:"required"`
	SessionID       string        `json:"session_id,omitempty"`
	TenantID        string        `json:"tenant_id" jsonschema:"required"`
	User            UserClaims    `json:"user" jsonschema:"required"`
	Agent           AgentIdentity `json:"agent" jsonschema:"required"`
	ContextPackRefs []string      `json:"context_pack_refs" jsonschema:"required"`
	Input           Input         `json:"input" jsonschema:"required"`
	Mode            Mode          `json:"mode" jsonschema:"required"`
	Runtime         RuntimeHints  `json:"runtime" jsonschema:"required"`
	Attachments     []Attachment  `json:"attachments,omitempty"`
	Trace           Trace         `json:"trace" jsonschema:"required"`
	// Extensions holds additive members this version does not define.
	Extensions map[string]json.RawMessage `json:"-" wire:"extra"`
}

type invokeRequestWire InvokeRequest

// MarshalJSON writes the envelope and its extensions.
func (r InvokeRequest) MarshalJSON() ([]byte, error) {
	return wire.MarshalOpen(invokeRequestWire(r), r.Extensions)
}

// UnmarshalJSON reads the envelope and keeps unknown members in Extensions.
func (r *InvokeRequest) UnmarshalJSON(b []byte) error {
	var w invokeRequestWire
	extra, err := wire.UnmarshalOpen(b, &w)
	if err != nil {
		return err
	}
	w.Extensions = extra
	*r = InvokeRequest(w)
	return nil
}

// RunBudget is the run's budget in every dimension the meter charges.
type RunBudget struct {
	TotalTokens          int            `json:"total_tokens" jsonschema:"required"`
	BucketTokens         map[Bucket]int `json:"bucket_tokens,omitempty"`
	MaxToolCalls         int            `json:"max_tool_calls" jsonschema:"required"`
	MaxReplanAttempts    int            `json:"max_replan_attempts" jsonschema:"required"`
	WallClockMS          int64          `json:"wall_clock_ms" jsonschema:"required"`
	MaxCostCents         float64        `json:"max_cost_cents" jsonschema:"required"`
	PlanTimeoutMS        int64          `json:"plan_timeout_ms,omitempty"`
	MaxPayloadBytes      int64          `json:"max_payload_bytes,omitempty"`
	MaxSessionDurationMS int64          `json:"max_session_duration_ms,omitempty"`
}

// TraceContext carries the W3C headers of a run for propagation and replay
// (seed 000 "trace_context").
type TraceContext struct {
	TraceParent string `json:"traceparent" jsonschema:"required"`
	TraceState  string `json:"tracestate,omitempty"`
	Baggage     string `json:"baggage,omitempty"`
}

// RunContext is the state container carried through every layer of a run
// (run-context.v1). Unknown top-level members are additive and kept in
// Extensions.
type RunContext struct {
	RunID        string         `json:"run_id" jsonschema:"required"`
	TraceID      string         `json:"trace_id" jsonschema:"required"`
	SessionID    string         `json:"session_id,omitempty"`
	TenantID     string         `json:"tenant_id" jsonschema:"required"`
	User         UserClaims     `json:"user" jsonschema:"required"`
	Agent        AgentIdentity  `json:"agent" jsonschema:"required"`
	Intent       string         `json:"intent,omitempty"`
	Locale       string         `json:"locale,omitempty"`
	SafetyMode   ApprovalMode   `json:"safety_mode" jsonschema:"required"`
	RunBudget    RunBudget      `json:"run_budget" jsonschema:"required"`
	TraceContext *TraceContext  `json:"trace_context,omitempty"`
	Metadata     map[string]any `json:"metadata,omitempty"`
	// Extensions holds additive members this version does not define.
	Extensions map[string]json.RawMessage `json:"-" wire:"extra"`
}

type runContextWire RunContext

// MarshalJSON writes the run context and its extensions.
func (rc RunContext) MarshalJSON() ([]byte, error) {
	return wire.MarshalOpen(runContextWire(rc), rc.Extensions)
}

// UnmarshalJSON reads the run context and keeps unknown members in Extensions.
func (rc *RunContext) UnmarshalJSON(b []byte) error {
	var w runContextWire
	extra, err := wire.UnmarshalOpen(b, &w)
	if err != nil {
		return err
	}
	w.Extensions = extra
	*rc = RunContext(w)
	return nil
}
