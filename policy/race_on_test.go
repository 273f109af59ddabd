//go:build race

package policy_test

// raceEnabled: the race detector is on, and allocation counts are its own.
const raceEnabled = true
