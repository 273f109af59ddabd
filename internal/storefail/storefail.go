// Package storefail names the stores a tool call needs that can fail it,
// and the requests the gateway makes of them, for the gateway (which
// reports a failure) and package replay (whose packets record it, as
// replay.StoreFailure, with the replay.Store… constants defined from
// these): the gateway cannot import replay, which imports it.
package storefail

// Stores, and what the gateway asks of them.
const (
	// Idempotency is the gateway's idempotency store; its requests are
	// OpClaim and OpComplete of a write's key.
	Idempotency = "idempotency"
	// Transcript is the gateway's transcript sink; its request is
	// OpAppend of one of a call's entries.
	Transcript = "transcript"

	OpClaim    = "claim"
	OpComplete = "complete"
	OpAppend   = "append"
)

// StoreFailure is a store request of a tool call that failed: the
// gateway reports it (internal/gatewayhook.StoreFailed) and a packet
// records it (replay.StoreFailure, an alias of it, whose doc says what
// each member is). Store and Op are the constants above; IdempotencyKey
// is the write's key (Store Idempotency); Kind and Seq are the transcript
// entry's (Store Transcript).
type StoreFailure struct {
	ToolCallID     string `json:"tool_call_id"`
	Store          string `json:"store"`
	Op             string `json:"op"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Kind           string `json:"kind,omitempty"`
	Seq            int    `json:"seq,omitempty"`
}
