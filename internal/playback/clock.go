package playback

import (
	"slices"
	"sync"
	"time"
)

// Clock records readings of a clock, or serves recorded ones.
type Clock struct {
	mu       sync.Mutex
	now      func() time.Time
	readings []time.Time
	replay   bool
	next     int
}

// RecordingClock wraps now and records each reading.
func RecordingClock(now func() time.Time) *Clock { return &Clock{now: now} }

// PlaybackClock serves readings in order; past the end it repeats the last.
func PlaybackClock(readings []time.Time) *Clock {
	return &Clock{readings: slices.Clone(readings), replay: true}
}

// Now returns the next reading.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.replay {
		if len(c.readings) == 0 {
			return time.Time{}
		}
		t := c.readings[min(c.next, len(c.readings)-1)]
		c.next++
		return t
	}
	// The reading is kept, and served, without its monotonic clock
	// reading: a replay serves it decoded from the packet, which has
	// none, and durations between readings must come out the same live
	// as replayed (the wall and monotonic clocks drift apart by
	// nanoseconds, enough to move a millisecond count).
	t := c.now().Round(0)
	c.readings = append(c.readings, t)
	return t
}

// Readings returns the readings so far.
func (c *Clock) Readings() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.readings)
}
