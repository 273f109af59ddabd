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
// returns. The copy is kept encoded, in bytes the collector does not scan
// (entrycodec.go), and decoded for a Claim.
type MemoryIdempotency struct {
	mu      sync.Mutex
	entries map[string]*idemEntry
}

type idemEntry struct {
	// done is closed when the holder completes or releases; made by the
	// first caller that waits for it (nil while none has).
	done chan struct{}
	// enc is the completed result, encoded; res is set instead when the
	// encoding cannot give it back exactly (a deep copy, as Clone makes).
	enc []byte
	res *ToolResultEnvelope
}

// completed reports whether the entry holds a result.
func (e *idemEntry) completed() bool { return e.enc != nil || e.res != nil }

// result is a copy of the entry's result.
func (e *idemEntry) result() *ToolResultEnvelope {
	if e.res != nil {
		return e.res.Clone()
	}
	d := entryDecoder{s: string(e.enc)}
	return d.result()
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
		if e.completed() {
			m.mu.Unlock()
			return e.result(), false, nil
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
	if !e.completed() {
		// The store's own copy: encoded, or else a deep copy.
		if b, ok := appendResult(make([]byte, 0, 512), res); ok {
			e.enc = b
		} else {
			e.res = res.Clone()
		}
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
	if e, ok := m.entries[key]; ok && !e.completed() {
		delete(m.entries, key)
		if e.done != nil {
			close(e.done)
		}
	}
	return nil
}
