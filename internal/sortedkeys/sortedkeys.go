// Package sortedkeys owns the module's one way to read a map in a
// deterministic order: its keys, sorted. Output that lists a map
// (problems, diffs, prompt blocks, hashed documents) must never depend on
// Go's map order.
package sortedkeys

import (
	"cmp"
	"slices"
)

// Of returns m's keys in ascending order, in a slice allocated once at its
// final size (collecting maps.Keys into slices.Sorted grows its slice as
// it goes, which costs the compiler's hot path several allocations per
// map).
func Of[M ~map[K]V, K cmp.Ordered, V any](m M) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
