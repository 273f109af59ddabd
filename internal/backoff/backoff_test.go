package backoff_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/internal/backoff"
)

// TestDelayGolden pins the delays: they were transport.Retry.Delay's
// before the policy moved here, and replays depend on them.
func TestDelayGolden(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		p    backoff.Policy
		key  string
		want []time.Duration // attempts 1..5
	}{
		{"full", backoff.Policy{Base: 100 * time.Millisecond, Jitter: backoff.Full, Seed: 42}, "call_1",
			[]time.Duration{24780000, 85340000, 242240000, 282640000, 851520000}},
		{"full other key", backoff.Policy{Base: 100 * time.Millisecond, Jitter: backoff.Full, Seed: 42}, "tc_abc",
			[]time.Duration{6279999, 105220000, 282000000, 479600000, 1245440000}},
		{"equal capped", backoff.Policy{Base: 100 * time.Millisecond, Max: time.Second, Jitter: backoff.Equal, Seed: 7}, "call_1",
			[]time.Duration{69075000, 120260000, 204740000, 510400000, 548550000}},
		{"equal other key", backoff.Policy{Base: 100 * time.Millisecond, Max: time.Second, Jitter: backoff.Equal, Seed: 7}, "tc_abc",
			[]time.Duration{78285000, 110240000, 384700000, 411600000, 925050000}},
		{"none", backoff.Policy{Base: 20 * time.Millisecond, Jitter: backoff.None}, "call_1",
			[]time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond, 320 * time.Millisecond}},
		{"unset jitter is none", backoff.Policy{Base: 20 * time.Millisecond}, "x",
			[]time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond, 320 * time.Millisecond}},
		{"zero policy never waits", backoff.Policy{Jitter: backoff.Full, Seed: 1}, "x", []time.Duration{0, 0, 0, 0, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var got []time.Duration
			for a := 1; a <= 5; a++ {
				got = append(got, c.p.Delay(c.key, a))
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("delays (-want +got):\n%s", d)
			}
		})
	}
}

func TestExponential(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		base, maxD time.Duration
		attempt    int
		want       time.Duration
	}{
		{"first attempt is base", time.Second, time.Hour, 1, time.Second},
		{"attempt below one is base", time.Second, time.Hour, -3, time.Second},
		{"doubles", time.Second, time.Hour, 4, 8 * time.Second},
		{"exponent capped at 10", time.Millisecond, time.Hour, 30, 1024 * time.Millisecond},
		{"capped by max", time.Second, 5 * time.Second, 4, 5 * time.Second},
		{"default max", time.Second, 0, 10, backoff.DefaultMax},
		{"no base no wait", 0, time.Hour, 3, 0},
		{"overflow is max", 1 << 62, time.Hour, 11, time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := backoff.Exponential(c.base, c.maxD, c.attempt); got != c.want {
				t.Errorf("Exponential(%v, %v, %d) = %v, want %v", c.base, c.maxD, c.attempt, got, c.want)
			}
		})
	}
}

// TestSpreadBounds: full jitter stays in (0, d), equal in [d/2, d), and a
// zero delay is never raised.
func TestSpreadBounds(t *testing.T) {
	t.Parallel()
	d := 800 * time.Millisecond
	for i := range 2000 {
		key := fmt.Sprintf("call_%d", i)
		f := backoff.Fraction(uint64(i), key, i%7+1)
		if f < 0 || f >= 1 {
			t.Fatalf("Fraction = %v, outside [0, 1)", f)
		}
		if got := backoff.Spread(backoff.Full, d, f); got <= 0 || got >= d {
			t.Fatalf("full(%v, %v) = %v, outside (0, %v)", d, f, got, d)
		}
		if got := backoff.Spread(backoff.Equal, d, f); got < d/2 || got >= d {
			t.Fatalf("equal(%v, %v) = %v, outside [%v, %v)", d, f, got, d/2, d)
		}
	}
	if got := backoff.Spread(backoff.Full, 0, 0.5); got != 0 {
		t.Errorf("Spread of zero = %v, want 0", got)
	}
	if got := backoff.Spread(backoff.Full, time.Second, 0); got != time.Millisecond {
		t.Errorf("full jitter to zero = %v, want 1ms", got)
	}
}

// TestFractionKeyed: the fraction is a function of seed, key and attempt
// only, and each of them changes it.
func TestFractionKeyed(t *testing.T) {
	t.Parallel()
	base := backoff.Fraction(1, "call", 1)
	if again := backoff.Fraction(1, "call", 1); again != base {
		t.Fatalf("Fraction not deterministic: %v then %v", base, again)
	}
	for name, f := range map[string]float64{
		"seed": backoff.Fraction(2, "call", 1), "key": backoff.Fraction(1, "calm", 1), "attempt": backoff.Fraction(1, "call", 2),
	} {
		if f == base {
			t.Errorf("changing the %s left the fraction at %v", name, f)
		}
	}
}

func TestJitterValid(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		j    backoff.Jitter
		want bool
	}{{"", true}, {backoff.None, true}, {backoff.Full, true}, {backoff.Equal, true}, {"random", false}, {"Full", false}} {
		if got := c.j.Valid(); got != c.want {
			t.Errorf("Jitter(%q).Valid() = %v, want %v", c.j, got, c.want)
		}
	}
}

func BenchmarkDelay(b *testing.B) {
	p := backoff.Policy{Base: 100 * time.Millisecond, Max: 30 * time.Second, Jitter: backoff.Full, Seed: 42}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = p.Delay("tc_0123456789abcdef", i%8+1)
	}
}
