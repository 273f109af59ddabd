package server

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/contextos/contextos/gateway"
)

// ledger keeps what the handler must share with its replicas — who
// started each run, each approval decision, and the events of each run
// segment (segments.go) — as write-once entries
// in an idempotency store (gateway.IdempotencyStore), under keys of its
// own ("contextos-server/v1/…", never a gateway key, which starts
// "idem_"). The store's guarantee is the one a decision needs: of
// concurrent writers of a key, on any process sharing the store, exactly
// one stores its value and every other reads it.
type ledger struct {
	store gateway.IdempotencyStore

	mu    sync.Mutex
	cache map[string]json.RawMessage // entries are write-once: a value read is the value
}

func newLedger(s gateway.IdempotencyStore) *ledger {
	return &ledger{store: s, cache: map[string]json.RawMessage{}}
}

// maxCached bounds the ledger's cache of values read, and
// maxCachedValue the size of a value it keeps: who started a run and a
// decision are small and read often; a run segment's events are large
// and are read from the store each time.
const (
	maxCached      = 10000
	maxCachedValue = 8 << 10
)

// ledgerKey derives an entry's key from its kind and parts (each
// length-prefixed, so no two part lists give one key).
func ledgerKey(kind string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return "contextos-server/v1/" + kind + "/" + hex.EncodeToString(h.Sum(nil))
}

// ledgerCapability names the handler's entries in the store.
const ledgerCapability = "contextos-server.state"

// put stores v under key unless the key holds a value already. It
// returns the value the key holds (v's encoding when this call stored
// it) and whether this call stored it.
func (l *ledger) put(ctx context.Context, key string, v any) (json.RawMessage, bool, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false, err
	}
	return l.putRaw(ctx, key, b)
}

// putRaw is put of a value already encoded: b must be valid JSON.
func (l *ledger) putRaw(ctx context.Context, key string, b json.RawMessage) (json.RawMessage, bool, error) {
	prior, claimed, err := l.store.Claim(ctx, key)
	if err != nil {
		return nil, false, fmt.Errorf("server: state store: %w", err)
	}
	if !claimed {
		raw, err := entryValue(prior)
		if err != nil {
			return nil, false, err
		}
		l.remember(key, raw)
		return raw, false, nil
	}
	env := &gateway.ToolResultEnvelope{CapabilityID: ledgerCapability, Status: gateway.StatusOK, Output: map[string]any{"value": string(b)}}
	if err := l.store.Complete(ctx, key, env); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = l.store.Release(rctx, key)
		return nil, false, fmt.Errorf("server: state store: %w", err)
	}
	l.remember(key, b)
	return b, true, nil
}

// get returns the value under key, or ok false when the key holds none.
func (l *ledger) get(ctx context.Context, key string) (json.RawMessage, bool, error) {
	l.mu.Lock()
	raw, ok := l.cache[key]
	l.mu.Unlock()
	if ok {
		return raw, true, nil
	}
	// The store has no read: a claim of a free key is released at once.
	prior, claimed, err := l.store.Claim(ctx, key)
	if err != nil {
		return nil, false, fmt.Errorf("server: state store: %w", err)
	}
	if claimed {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := l.store.Release(rctx, key); err != nil {
			return nil, false, fmt.Errorf("server: state store: %w", err)
		}
		return nil, false, nil
	}
	if raw, err = entryValue(prior); err != nil {
		return nil, false, err
	}
	l.remember(key, raw)
	return raw, true, nil
}

func (l *ledger) remember(key string, raw json.RawMessage) {
	if len(raw) > maxCachedValue {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.cache) >= maxCached {
		clear(l.cache)
	}
	l.cache[key] = raw
}

// errForeignEntry reports a key of the handler's that holds something it
// did not write.
var errForeignEntry = errors.New("server: state store: an entry under the handler's key was not written by it")

func entryValue(env *gateway.ToolResultEnvelope) (json.RawMessage, error) {
	if env == nil || env.CapabilityID != ledgerCapability {
		return nil, errForeignEntry
	}
	s, ok := env.Output["value"].(string)
	if !ok || !json.Valid([]byte(s)) {
		return nil, errForeignEntry
	}
	return json.RawMessage(s), nil
}
