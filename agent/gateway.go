package agent

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// Backend is an agent backend: a coding-agent CLI or a host's own agent
// behind the universal contract.
//
// Run must validate req before it spawns anything (Prepare does it in the
// contract's order: ErrInvalidRequest, ErrUnsupportedCapability), then
// return the handle Start makes around its driver without waiting for the
// process to start. Kind and Capabilities must be constant.
type Backend interface {
	Kind() Kind
	Capabilities() Capabilities
	Run(ctx context.Context, req RunRequest) (*Run, error)
}

// Gateway is a registry of backends by kind. The zero value is empty and
// ready; a Gateway is safe for concurrent use.
type Gateway struct {
	mu       sync.RWMutex
	backends map[Kind]Backend
}

// NewGateway returns a gateway with backends registered (see Register).
func NewGateway(backends ...Backend) (*Gateway, error) {
	g := &Gateway{}
	for _, b := range backends {
		if err := g.Register(b); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// Register adds b. A nil backend or one whose kind is already registered
// is ErrInvalidRequest ("backend already registered: <kind>"); an invalid
// kind is ErrInvalidAgentKind.
func (g *Gateway) Register(b Backend) error {
	if b == nil {
		return InvalidRequest("backend must not be nil")
	}
	k := b.Kind()
	if err := k.Validate(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, dup := g.backends[k]; dup {
		return InvalidRequest("backend already registered: " + string(k))
	}
	if g.backends == nil {
		g.backends = map[Kind]Backend{}
	}
	g.backends[k] = b
	return nil
}

// Backend returns the backend registered for k.
func (g *Gateway) Backend(k Kind) (Backend, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	b, ok := g.backends[k]
	return b, ok
}

// Kinds lists the registered kinds, sorted.
func (g *Gateway) Kinds() []Kind {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return slices.Sorted(maps.Keys(g.backends))
}

// Run starts a run on the backend registered for k: ErrInvalidAgentKind
// for a malformed kind, ErrUnknownBackend when none is registered, else
// whatever the backend's Run returns.
func (g *Gateway) Run(ctx context.Context, k Kind, req RunRequest) (*Run, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	b, ok := g.Backend(k)
	if !ok {
		return nil, unknownBackend(string(k))
	}
	return b.Run(ctx, req)
}
