// Package backoff owns the module's one retry-wait policy: exponential
// backoff with deterministic jitter. A delay is a pure function of the
// policy, a key (a tool call or request id) and the attempt number, never
// of a clock or a random source, so a replayed run waits exactly as the
// recorded one did and two callers retrying the same thing agree.
//
// The jitter fraction is FNV-1a over the seed, the key and the attempt,
// reduced to [0, 1) in steps of 1/10000.
package backoff

import (
	"hash/fnv"
	"strconv"
	"time"
)

// Jitter is how a delay is spread.
type Jitter string

// Jitter modes.
const (
	None  Jitter = "none"  // the exponential delay as is
	Full  Jitter = "full"  // a fraction of the delay in [0, 1)
	Equal Jitter = "equal" // half the delay plus a fraction of the other half
)

// Valid reports whether j is a known mode ("" is None).
func (j Jitter) Valid() bool {
	switch j {
	case "", None, Full, Equal:
		return true
	}
	return false
}

// DefaultMax caps a delay when a policy names no cap.
const DefaultMax = 30 * time.Second

// maxExponent caps the doubling: base × 2^10 at most.
const maxExponent = 10

// Policy is an exponential backoff with deterministic jitter. The zero
// value never waits.
type Policy struct {
	// Base is the first delay; it doubles each attempt. Zero or negative:
	// no wait.
	Base time.Duration
	// Max caps the delay before jitter. Zero or negative: DefaultMax.
	Max time.Duration
	// Jitter spreads delays ("" is None).
	Jitter Jitter
	// Seed varies the jitter between deployments.
	Seed uint64
}

// Delay is the wait after failed attempt (1-based) of key:
// Exponential(Base, Max, attempt), then jittered by Jitter with
// Fraction(Seed, key, attempt). A jittered delay of zero becomes 1ms, so
// a retry that should wait always yields.
func (p Policy) Delay(key string, attempt int) time.Duration {
	if p.Base <= 0 {
		return 0
	}
	return Spread(p.Jitter, Exponential(p.Base, p.Max, attempt), Fraction(p.Seed, key, attempt))
}

// Exponential is base × 2^(attempt−1) (attempts below 1 count as 1, the
// exponent is capped at 10), capped at maxDelay (DefaultMax when zero or
// negative).
func Exponential(base, maxDelay time.Duration, attempt int) time.Duration {
	if base <= 0 {
		return 0
	}
	if maxDelay <= 0 {
		maxDelay = DefaultMax
	}
	exp := min(max(attempt-1, 0), maxExponent)
	d := base << exp
	if d < base { // overflow
		return maxDelay
	}
	return min(d, maxDelay)
}

// Spread applies jitter mode j to d with frac in [0, 1). A positive d
// that jitter brings to zero becomes 1ms; a zero d stays zero.
func Spread(j Jitter, d time.Duration, frac float64) time.Duration {
	if d <= 0 {
		return 0
	}
	switch j {
	case Full:
		d = time.Duration(float64(d) * frac)
	case Equal:
		d = d/2 + time.Duration(float64(d/2)*frac)
	}
	if d <= 0 {
		d = time.Millisecond
	}
	return d
}

// Fraction is the deterministic jitter fraction of (seed, key, attempt),
// in [0, 1): FNV-1a over the seed's eight little-endian bytes, the key and
// ":" followed by the attempt in decimal, modulo 10000, over 10000.
func Fraction(seed uint64, key string, attempt int) float64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(seed >> (8 * i))
	}
	h.Write(b[:])
	h.Write([]byte(key))
	h.Write([]byte(":" + strconv.Itoa(attempt)))
	return float64(h.Sum64()%10000) / 10000
}
