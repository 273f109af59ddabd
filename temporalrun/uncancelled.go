package temporalrun

import (
	"context"
	"crypto/ed25519"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// A cancelled run still resolves its packs and keys to record how it
// ended: the workflow code reads them on a context its cancellation does
// not reach (they are deterministic reads, bounded by the registry).

// uncancelledKeys resolves keys whatever the run's context.
type uncancelledKeys struct{ k runcontext.KeyResolver }

func (u uncancelledKeys) PublicKey(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	return u.k.PublicKey(context.WithoutCancel(ctx), kid)
}

// uncancelledRegistry reads packs whatever the run's context.
type uncancelledRegistry struct{ r pack.Registry }

func (u uncancelledRegistry) Put(ctx context.Context, doc []byte) (pack.Entry, error) {
	return u.r.Put(context.WithoutCancel(ctx), doc)
}

func (u uncancelledRegistry) Get(ctx context.Context, ref pack.Ref) (pack.Entry, error) {
	return u.r.Get(context.WithoutCancel(ctx), ref)
}

func (u uncancelledRegistry) SetState(ctx context.Context, ref pack.Ref, to pack.State, reason string) (pack.Entry, error) {
	return u.r.SetState(context.WithoutCancel(ctx), ref, to, reason)
}

func (u uncancelledRegistry) Versions(ctx context.Context, packID string) ([]pack.Entry, error) {
	return u.r.Versions(context.WithoutCancel(ctx), packID)
}

// uncancelledStater is uncancelledRegistry of a registry that is a
// pack.StateReader, and one itself.
type uncancelledStater struct {
	uncancelledRegistry
	s pack.StateReader
}

func (u uncancelledStater) Stat(ctx context.Context, ref pack.Ref) (pack.Entry, error) {
	return u.s.Stat(context.WithoutCancel(ctx), ref)
}

// uncancelled wraps r, keeping its StateReader capability.
func uncancelled(r pack.Registry) pack.Registry {
	if s, ok := r.(pack.StateReader); ok {
		return uncancelledStater{uncancelledRegistry{r}, s}
	}
	return uncancelledRegistry{r}
}

// uncancelledEvidence retrieves evidence whatever the run's context.
type uncancelledEvidence struct{ e compiler.EvidenceSource }

func (u uncancelledEvidence) Evidence(ctx context.Context, q compiler.EvidenceQuery) ([]compiler.EvidenceItem, error) {
	return u.e.Evidence(context.WithoutCancel(ctx), q)
}
