package runcontext

import "context"

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
