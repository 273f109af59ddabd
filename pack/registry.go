package pack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

// Registry stores pack versions and their lifecycle state. Implementations
// must be safe for concurrent use, honour ctx, and enforce:
//
//   - immutability: Put of different content under an existing
//     pack_id@version fails with ErrImmutable; Put of the same content is a
//     no-op, except that a signed file may replace the bare document of the
//     same content;
//   - lifecycle: SetState allows only CheckTransition's moves, keeps the
//     reason, and refuses to publish what is not signed;
//   - Get and Versions return ErrNotFound for unknown refs and ids.
//
// RunRegistryTests in package packtest checks all of this.
type Registry interface {
	// Put stores a pack version: a bare pack document (state draft) or a
	// signed pack file (state signed; the pack must pass every gate).
	Put(ctx context.Context, doc []byte) (Entry, error)
	// Get returns the stored entry of ref, whatever its state.
	Get(ctx context.Context, ref Ref) (Entry, error)
	// SetState moves ref to state to; reason is kept (and required for
	// deprecated and revoked).
	SetState(ctx context.Context, ref Ref, to State, reason string) (Entry, error)
	// Versions lists the stored versions of a pack, oldest first.
	Versions(ctx context.Context, packID string) ([]Entry, error)
}

// Entry is one stored pack version.
type Entry struct {
	Ref         Ref    `json:"ref"`
	State       State  `json:"state"`
	Reason      string `json:"reason,omitempty"`
	ContentHash string `json:"content_hash"`
	Signed      bool   `json:"signed"`
	// Document is the stored bytes: the signed pack file when Signed, else
	// the bare pack document.
	Document []byte `json:"-"`
}

// inspect decodes a document given to Put: a signed file (checked for
// structure and gates; the signature itself is checked at resolution, with
// the host's keys) or a bare pack.
func inspect(doc []byte, opts *ValidateOptions) (Entry, error) {
	if err := opts.Check(); err != nil {
		return Entry{}, err
	}
	trimmed := bytes.TrimSpace(doc)
	var probe struct {
		Format string `json:"format"`
	}
	_ = json.Unmarshal(trimmed, &probe)
	if probe.Format != "" {
		sp, err := ParseSigned(doc)
		if err != nil {
			return Entry{}, err
		}
		p, err := DecodeAndValidate(sp.Pack, opts)
		if err != nil {
			return Entry{}, fmt.Errorf("%w: %w", ErrSignature, err)
		}
		ref, err := p.Ref()
		if err != nil {
			return Entry{}, err
		}
		h, err := ContentHash(p)
		if err != nil || h != sp.ContentHash {
			return Entry{}, fmt.Errorf("%w: content hash does not match the pack", ErrSignature)
		}
		return Entry{Ref: ref, State: StateSigned, ContentHash: h, Signed: true, Document: slices.Clone(doc)}, nil
	}
	p, err := Decode(doc)
	if err != nil {
		return Entry{}, err
	}
	ref, err := p.Ref()
	if err != nil {
		return Entry{}, err
	}
	h, err := ContentHash(p)
	if err != nil {
		return Entry{}, err
	}
	return Entry{Ref: ref, State: StateDraft, ContentHash: h, Document: slices.Clone(doc)}, nil
}

// NewEntry runs the checks a Registry's Put runs on doc — a signed pack
// file (structure, every validation gate, content hash; state signed) or a
// bare pack document (state draft) — and returns the entry Put stores for
// a ref it does not hold yet. A durable Registry stores what it returns.
func NewEntry(doc []byte, opts *ValidateOptions) (Entry, error) { return inspect(doc, opts) }

// Merge applies the immutability rule to a Put of next over the stored
// entry cur: different content is ErrImmutable; a signed file may replace
// the bare document of the same content. It returns the entry to store
// and whether it changed.
func (cur Entry) Merge(next Entry) (Entry, bool, error) { return merge(cur, next) }

// Transition applies SetState's rules to the stored entry e: only
// CheckTransition's moves, a reason where one is required, no signed or
// published state without a signed document, linting for linted. It
// returns the entry to store.
func (e Entry) Transition(to State, reason string, opts *ValidateOptions) (Entry, error) {
	return transition(e, to, reason, opts)
}

// merge applies the immutability rule to a Put of next over an existing
// entry and returns the entry to store and whether anything changed.
func merge(cur, next Entry) (Entry, bool, error) {
	if cur.ContentHash != next.ContentHash {
		return cur, false, fmt.Errorf("%w: %s already holds different content (%s)", ErrImmutable, cur.Ref, cur.ContentHash)
	}
	if next.Signed && !cur.Signed {
		cur.Document, cur.Signed = next.Document, true
		return cur, true, nil
	}
	return cur, false, nil
}

// transition applies SetState's rules to an entry.
func transition(e Entry, to State, reason string, opts *ValidateOptions) (Entry, error) {
	if err := CheckTransition(e.State, to, reason); err != nil {
		return e, fmt.Errorf("%s: %w", e.Ref, err)
	}
	if (to == StateSigned || to == StatePublished) && !e.Signed {
		return e, fmt.Errorf("%w: %s has no signed document; Put the signed pack file first", ErrTransition, e.Ref)
	}
	if to == StateLinted {
		if _, err := DecodeAndValidate(bareDocument(e), opts); err != nil {
			return e, fmt.Errorf("%w: %s does not pass linting: %w", ErrTransition, e.Ref, err)
		}
	}
	e.State, e.Reason = to, reason
	return e, nil
}

func bareDocument(e Entry) []byte {
	if !e.Signed {
		return e.Document
	}
	sp, err := ParseSigned(e.Document)
	if err != nil {
		return nil
	}
	return sp.Pack
}

// MemoryRegistry is the in-memory Registry.
type MemoryRegistry struct {
	opts    *ValidateOptions
	mu      sync.RWMutex
	entries map[string]map[Ref]Entry // pack id → ref → entry
}

var _ Registry = (*MemoryRegistry)(nil)

// NewMemoryRegistry returns an empty in-memory registry that validates the
// packs it stores with opts (nil: the defaults of ValidateOptions).
func NewMemoryRegistry(opts *ValidateOptions) *MemoryRegistry {
	return &MemoryRegistry{opts: opts.clone(), entries: map[string]map[Ref]Entry{}}
}

// Put implements Registry.
func (m *MemoryRegistry) Put(ctx context.Context, doc []byte) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	next, err := inspect(doc, m.opts)
	if err != nil {
		return Entry{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	versions := m.entries[next.Ref.ID]
	if versions == nil {
		versions = map[Ref]Entry{}
		m.entries[next.Ref.ID] = versions
	}
	if cur, ok := versions[next.Ref]; ok {
		e, changed, err := merge(cur, next)
		if err != nil {
			return Entry{}, err
		}
		if changed {
			versions[next.Ref] = e
		}
		return copyEntry(e), nil
	}
	versions[next.Ref] = next
	return copyEntry(next), nil
}

// Get implements Registry.
func (m *MemoryRegistry) Get(ctx context.Context, ref Ref) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.entries[ref.ID][ref]
	if !ok {
		return Entry{}, fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	return copyEntry(e), nil
}

// SetState implements Registry.
func (m *MemoryRegistry) SetState(ctx context.Context, ref Ref, to State, reason string) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[ref.ID][ref]
	if !ok {
		return Entry{}, fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	e, err := transition(e, to, reason, m.opts)
	if err != nil {
		return Entry{}, err
	}
	m.entries[ref.ID][ref] = e
	return copyEntry(e), nil
}

// Versions implements Registry.
func (m *MemoryRegistry) Versions(ctx context.Context, packID string) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	versions, ok := m.entries[packID]
	if !ok || len(versions) == 0 {
		return nil, fmt.Errorf("%w: no versions of %q", ErrNotFound, clip(packID))
	}
	out := make([]Entry, 0, len(versions))
	for _, e := range versions {
		out = append(out, copyEntry(e))
	}
	slices.SortFunc(out, func(a, b Entry) int { return a.Ref.Compare(b.Ref) })
	return out, nil
}

func copyEntry(e Entry) Entry {
	e.Document = slices.Clone(e.Document)
	return e
}
