package runcontext

import (
	"context"
	"sort"
)

type ctxKey struct{}

// NewContext returns a copy of ctx that carries rc.
func NewContext(ctx context.Context, rc *RunContext) context.Context {
	return context.WithValue(ctx, ctxKey{}, rc)
}

// FromContext returns the RunContext carried by ctx, if any.
func FromContext(ctx context.Context) (*RunContext, bool) {
	rc, ok := ctx.Value(ctxKey{}).(*RunContext)
	return rc, ok && rc != nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedBuckets[V any](m map[Bucket]V) []Bucket {
	keys := make([]Bucket, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

func sortStrings(s []string) { sort.Strings(s) }
