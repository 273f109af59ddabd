package transport

import (
	"fmt"
	"time"

	"github.com/contextos/contextos/internal/backoff"
)

// Jitter is a backoff jitter mode.
type Jitter string

// Jitter modes.
const (
	JitterNone  = Jitter(backoff.None)  // the exponential delay as is
	JitterFull  = Jitter(backoff.Full)  // a fraction of the delay in [0, 1)
	JitterEqual = Jitter(backoff.Equal) // half the delay plus a fraction of the other half
)

// Retry is an endpoint's retry policy. The gateway runs the attempts; the
// policy says how many and how long to wait between them.
type Retry struct {
	// MaxAttempts bounds attempts of retryable failures (≥ 1). Default 1.
	MaxAttempts int
	// Backoff is the base delay; it doubles each attempt (the exponent is
	// capped at 10). Zero: no wait.
	Backoff time.Duration
	// MaxBackoff caps the delay. Default 30s.
	MaxBackoff time.Duration
	// Jitter spreads delays; it is reproducible: the fraction is derived
	// from Seed, the request id and the attempt, never from a clock or a
	// random source, so a replay waits the same.
	Jitter Jitter
	// Seed varies the jitter between deployments.
	Seed uint64
}

// check reports an invalid policy (ErrConfig).
func (r Retry) check() error {
	switch {
	case r.MaxAttempts < 0:
		return fmt.Errorf("%w: max_attempts must be at least 1", ErrConfig)
	case r.Backoff < 0 || r.MaxBackoff < 0:
		return fmt.Errorf("%w: backoff must not be negative", ErrConfig)
	}
	if backoff.Jitter(r.Jitter).Valid() {
		return nil
	}
	return fmt.Errorf("%w: jitter %q is not none, full or equal", ErrConfig, clip(string(r.Jitter)))
}

// delay is the wait after a failed attempt (1-based) of the call with
// request id key: Backoff × 2^(attempt−1), capped at MaxBackoff, then
// jittered (internal/backoff, the module's one backoff policy). A
// jittered delay of zero becomes 1ms.
func (r Retry) delay(key string, attempt int) time.Duration {
	return backoff.Policy{Base: r.Backoff, Max: r.MaxBackoff, Jitter: backoff.Jitter(r.Jitter), Seed: r.Seed}.Delay(key, attempt)
}

// attempts is MaxAttempts, at least 1.
func (r Retry) attempts() int { return max(r.MaxAttempts, 1) }
