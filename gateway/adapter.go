package gateway

import (
	"context"
	"encoding/json"
	"time"

	"github.com/contextos/contextos/runcontext"
)

// Adapter executes capability calls for one adapter id. Call must honour
// ctx (its deadline is the capability's timeout) and may be called
// concurrently; the gateway owns retries, so an adapter makes one attempt
// per Call. Return a *ToolError to say what failed and whether it is
// retryable; any other error is a non-retryable execution failure. Errors
// and outputs must not carry secrets; outputs are redacted by the gateway
// before they go anywhere.
//
// A failed attempt may still have cost something (an agent that ran for
// minutes and then exited non-zero): Call may return an Outcome together
// with its error, and the gateway then reads only that Outcome's CostCents
// and Tokens, which it charges to the run as it charges a successful
// attempt's. The rest of such an Outcome is ignored, and so is a cost or
// token count that is not valid (see Outcome) beside an error (nothing to
// charge; the attempt has failed already). An answer that
// comes after the grace that follows the timeout, when the adapter does
// not honour its context, is dropped, spend included.
type Adapter interface {
	Call(ctx context.Context, call *Call) (*Outcome, error)
}

// AdapterFunc adapts a function to Adapter.
type AdapterFunc func(ctx context.Context, call *Call) (*Outcome, error)

// Call implements Adapter.
func (f AdapterFunc) Call(ctx context.Context, call *Call) (*Outcome, error) { return f(ctx, call) }

// Call is one attempt of a governed call, as the adapter sees it.
type Call struct {
	// Envelope is a deep copy of the governed call envelope the
	// transcript recorded: the adapter may read it and even change it
	// (args, lists, pointers, metadata) without changing the transcript,
	// its chain or the result.
	Envelope *ToolCallEnvelope
	// Capability is the capability name without the adapter id.
	Capability string
	// Attempt counts from 1.
	Attempt int
	// IdempotencyKey is the same across retries, pauses and replays ("" for
	// read-only calls).
	IdempotencyKey string
	// Trace carries the W3C trace context to propagate.
	Trace runcontext.Trace
	// Delegation is a copy of the user's delegation for delegated and
	// destructive calls: its token_ref is a reference the adapter
	// exchanges through its own credential store.
	Delegation *runcontext.Delegation
}

// Outcome is what an adapter returns for a successful attempt (and, for a
// failed one, what the attempt cost: see Adapter).
type Outcome struct {
	Output    map[string]any `json:"output,omitempty"`
	Mutations []string       `json:"mutations,omitempty"`
	Artifacts []string       `json:"artifacts,omitempty"`
	Citations []Citation     `json:"citations,omitempty"`
	RiskTags  []string       `json:"risk_tags,omitempty"`
	// Signals are guardrail labels the tool raises (fraud_signal_high, …).
	Signals []string `json:"signals,omitempty"`
	// CostCents is this attempt's cost; added to the capability's cost
	// model. It is charged to the run even when it takes the run over its
	// budget (the attempt was made). A cost that is not a number of cents
	// from 0 to 2^53−1 (negative, NaN, infinite, or too large for a record
	// to hold exactly) makes the outcome invalid.
	CostCents float64 `json:"cost_cents,omitempty"`
	// Tokens counts the model tokens this attempt consumed (a delegated
	// agent's input and output tokens). They are charged to the run's
	// total token budget as the planner's own are: even when they take the
	// run over it (they were spent). A count that is negative or above
	// 2^53−1 makes the outcome invalid.
	Tokens int `json:"tokens,omitempty"`
}

// Capability declares one capability of a registered adapter.
type Capability struct {
	// ArgsSchema is the JSON Schema (draft 2020-12) of the arguments; empty
	// means any object.
	ArgsSchema json.RawMessage
	// ArgSchemaRef names the argument schema on every call envelope
	// (metadata.arg_schema_ref), such as "schema://adp_payments.issue_refund.v3".
	// It is at most 256 bytes of URI characters, with no user
	// info, query or sensitive data (else New refuses it, ErrConfig).
	// Default: the schema's "$id" when it is such a ref, else its digest
	// ("sha256:" over its canonical JSON; an empty schema is {"type":"object"}).
	ArgSchemaRef string
	// Scopes are the delegation scopes a delegated or destructive call needs.
	Scopes []string
	// Timeout bounds one attempt. Default: DefaultTimeout.
	Timeout time.Duration
	// CostCents is the cost of one attempt (the cost model): a finite
	// number ≥ 0.
	CostCents float64
	// MaxAttempts bounds attempts for retryable failures. Default: 3.
	MaxAttempts int
	// Backoff, when set, is the wait after failed attempt n (1-based) of
	// the call toolCallID, in place of the gateway's exponential backoff
	// and jitter (a transport's per-endpoint retry policy). It must be
	// deterministic, so a replay waits the same.
	Backoff func(toolCallID string, attempt int) time.Duration
	// HonorsContext declares that the adapter returns promptly once its
	// context is done (in-process adapters, transports built on net/http).
	// The gateway then calls it on the caller's goroutine, under the same
	// deadline, and saves the watchdog goroutine that otherwise guarantees
	// a bounded return from adapters that ignore their context. Leave it
	// false for anything you do not control. The attempt's deadline timer
	// is then made only when the adapter (or a context it derives) waits
	// on its context's Done channel: an in-process lookup that never waits
	// costs none.
	HonorsContext bool
}

// DefaultTimeout is a capability's attempt timeout when none is set.
const DefaultTimeout = 30 * time.Second

// Registration registers an adapter and its capabilities.
type Registration struct {
	AdapterID    string
	Adapter      Adapter
	Capabilities map[string]Capability
	// Protocol and Version name the protocol the adapter speaks and its
	// contract version, recorded on every call envelope
	// (metadata.protocol, metadata.version). When Protocol is empty they
	// come from the adapter (ProtocolReporter), or are "in-process"
	// and CallEnvelopeVersion. Either is 1 to 64 bytes of
	// letters, digits and ". _ + -" (a version may be empty); New refuses
	// others (ErrConfig), the adapter's included.
	Protocol, Version string
}

// WithAdapter returns the registration with adapter in place of its own
// (a stand-in, such as a replay's playback adapter), keeping the protocol
// and version the original adapter reports, so its envelopes are the
// original's.
func (r Registration) WithAdapter(adapter Adapter) Registration {
	r.Protocol, r.Version = r.protocol()
	r.Adapter = adapter
	return r
}

// ProtocolReporter is implemented by adapters that say which protocol
// they speak (http, external, grpc, webhook-callback, mcp, …) and its
// contract version. The gateway asks once, when it is built.
type ProtocolReporter interface {
	Protocol() (protocol, version string)
}

// protocolInProcess is the protocol of an adapter called in process (one
// that reports none); its contract version is CallEnvelopeVersion.
const protocolInProcess = "in-process"

// protocol is the registration's protocol and version.
func (r Registration) protocol() (string, string) {
	if r.Protocol != "" {
		return r.Protocol, r.Version
	}
	if p, ok := r.Adapter.(ProtocolReporter); ok {
		if proto, version := p.Protocol(); proto != "" {
			return proto, version
		}
	}
	return protocolInProcess, CallEnvelopeVersion
}
