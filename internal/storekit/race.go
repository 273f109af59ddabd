//go:build race

package storekit

// Race reports whether the binary was built with the race detector: the
// crash campaign does not run then (its worker processes would be too
// slow for its bounds).
const Race = true
