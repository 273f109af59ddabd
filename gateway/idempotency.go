package gateway

import (
	"context"
	"sync"
)

// IdempotencyStore guarantees one execution per idempotency key. Claim
// blocks while another caller holds the key (honouring ctx); it then
// returns the stored result (claimed false) or hands the key to the caller
// (claimed true), who must call Complete with the result or Release to let
// a later caller try again (the call failed without a side effect).
// Implementations must be safe for concurrent use; a durable store makes
// the guarantee hold across processes and restarts. The result Complete
// is given and the one Claim returns are the store's and the run's own
// copies: a store may keep either and change it later without changing
// the run.
type IdempotencyStore interface {
	Claim(ctx context.Context, key string) (prior *ToolResultEnvelope, claimed bool, err error)
	Complete(ctx context.Context, key string, res *ToolResultEnvelope) error
	Release(ctx context.Context, key string) error
}

// MemoryIdempotency is the in-memory IdempotencyStore. It keeps its own
// copy of a completed result and hands each Claim a copy of it: what a
// caller does to a result it gave or got changes nothing a later Claim
// returns.
type MemoryIdempotency struct {
	mu      sync.Mutex
	entries map[string]*idemEntry
}

type idemEntry struct {
	// done is closed when the holder completes or releases; made by the
	// first caller that waits for it (nil while none has).
	done chan struct{}
	res  *ToolResultEnvelope // &own.env once completed
	// own is the completed result's copy, held in the entry the claim
	// made: a claim and its completion are one allocation.
	own ownedResult
}

var _ IdempotencyStore = (*MemoryIdempotency)(nil)

// NewMemoryIdempotency returns an empty in-memory store.
func NewMemoryIdempotency() *MemoryIdempotency {
	return &MemoryIdempotency{entries: map[string]*idemEntry{}}
}

// Claim implements IdempotencyStore.
func (m *MemoryIdempotency) Claim(ctx context.Context, key string) (*ToolResultEnvelope, bool, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		m.mu.Lock()
		e, ok := m.entries[key]
		if !ok {
			m.entries[key] = &idemEntry{}
			m.mu.Unlock()
			return nil, true, nil
		}
		if e.res != nil {
			res := e.res
			m.mu.Unlock()
			return res.Clone(), false, nil
		}
		if e.done == nil {
			e.done = make(chan struct{})
		}
		done := e.done
		m.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// Complete implements IdempotencyStore.
func (m *MemoryIdempotency) Complete(_ context.Context, key string, res *ToolResultEnvelope) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok {
		e = &idemEntry{}
		m.entries[key] = e
	}
	if e.res == nil {
		// The store's own deep copy (as Clone makes), in the entry.
		e.own.env = *res
		ownResult(&e.own.env, &e.own.room)
		e.res = &e.own.env
		if e.done != nil {
			close(e.done)
		}
	}
	return nil
}

// Release implements IdempotencyStore.
func (m *MemoryIdempotency) Release(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok && e.res == nil {
		delete(m.entries, key)
		if e.done != nil {
			close(e.done)
		}
	}
	return nil
}
