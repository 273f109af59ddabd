package transport

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"time"
)

// Jitter is a backoff jitter mode.
type Jitter string

// Jitter modes.
const (
	JitterNone  Jitter = "none"  // the exponential delay as is
	JitterFull  Jitter = "full"  // a fraction of the delay in [0, 1)
	JitterEqual Jitter = "equal" // half the delay plus a fraction of the other half
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

// Check reports an invalid policy (ErrConfig).
func (r Retry) Check() error {
	switch {
	case r.MaxAttempts < 0:
		return fmt.Errorf("%w: max_attempts must be at least 1", ErrConfig)
	case r.Backoff < 0 || r.MaxBackoff < 0:
		return fmt.Errorf("%w: backoff must not be negative", ErrConfig)
	}
	switch r.Jitter {
	case "", JitterNone, JitterFull, JitterEqual:
		return nil
	}
	return fmt.Errorf("%w: jitter %q is not none, full or equal", ErrConfig, clip(string(r.Jitter)))
}

// Delay is the wait after a failed attempt (1-based) of the call with
// request id key: Backoff × 2^(attempt−1), capped at MaxBackoff, then
// jittered. A jittered delay of zero becomes 1ms.
func (r Retry) Delay(key string, attempt int) time.Duration {
	if r.Backoff <= 0 {
		return 0
	}
	maxB := r.MaxBackoff
	if maxB <= 0 {
		maxB = 30 * time.Second
	}
	exp := min(max(attempt-1, 0), 10)
	d := min(r.Backoff<<exp, maxB)
	frac := r.fraction(key, attempt)
	switch r.Jitter {
	case JitterFull:
		d = time.Duration(float64(d) * frac)
	case JitterEqual:
		d = d/2 + time.Duration(float64(d/2)*frac)
	}
	if d <= 0 {
		d = time.Millisecond
	}
	return d
}

// fraction is FNV-1a over the seed, key and attempt, in [0, 1).
func (r Retry) fraction(key string, attempt int) float64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(r.Seed >> (8 * i))
	}
	h.Write(b[:])
	h.Write([]byte(key))
	h.Write([]byte(":" + strconv.Itoa(attempt)))
	return float64(h.Sum64()%10000) / 10000
}

// Attempts is MaxAttempts, at least 1.
func (r Retry) Attempts() int { return max(r.MaxAttempts, 1) }
