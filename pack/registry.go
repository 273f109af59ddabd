package pack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/contextos/contextos/internal/packref"
)

// Registry stores pack versions and their lifecycle state. Implementations
// must be safe for concurrent use, honour ctx, and enforce:
//
//   - immutability: Put of different content under an existing
//     pack_id@version fails with ErrImmutable; Put of the same content is a
//     no-op, except that a signed file may replace the bare document of the
//     same content (the state is kept);
//   - lifecycle: SetState allows only CheckTransition's moves, keeps the
//     reason, refuses to publish what is not signed, refuses reviewed
//     until the recorded sign-offs cover every role the registry requires
//     (Entry.SignOff), and refuses pinned (pins are per environment:
//     Deployments.Pin);
//   - no version reaches signed or published without a recorded review:
//     a signed pack file Put for a new ref is stored with its signature
//     but in state linted (it passed every gate), and goes on only through
//     reviewed;
//   - Get and Versions return ErrNotFound for unknown refs and ids.
//
// Recording reviews and pins is the optional LifecycleRegistry
// capability; every Registry of this module has it. RunRegistryTests and
// RunLifecycleTests in package packtest check all of this.
type Registry interface {
	// Put stores a pack version: a bare pack document (state draft) or a
	// signed pack file (state linted; the pack must pass every gate).
	Put(ctx context.Context, doc []byte) (Entry, error)
	// Get returns the stored entry of ref, whatever its state.
	Get(ctx context.Context, ref Ref) (Entry, error)
	// SetState moves ref to state to; reason is kept (and required for
	// deprecated and revoked).
	SetState(ctx context.Context, ref Ref, to State, reason string) (Entry, error)
	// Versions lists the stored versions of a pack, oldest first.
	Versions(ctx context.Context, packID string) ([]Entry, error)
}

// StateReader is the optional Registry capability of reading a stored
// version's entry without its document: its lifecycle state and reason,
// content hash, signed flag and sign-offs. The Resolver re-reads a
// version's state on every resolve for execution, so a revocation is seen
// by the next run and the next resume; through Stat that read does not
// carry the document. A Registry without it is read with Get. Every
// in-process registry of this module has it.
type StateReader interface {
	// Stat returns ref's stored entry with a nil Document; an unknown ref
	// is ErrNotFound.
	Stat(ctx context.Context, ref Ref) (Entry, error)
}

// Entry is one stored pack version.
type Entry struct {
	Ref         Ref    `json:"ref"`
	State       State  `json:"state"`
	Reason      string `json:"reason,omitempty"`
	ContentHash string `json:"content_hash"`
	Signed      bool   `json:"signed"`
	// Reviews are the recorded review sign-offs, in the order recorded.
	Reviews []Signoff `json:"reviews,omitempty"`
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
		// Every gate passed, which is what linting checks; the version
		// still needs its review before it can be signed or published.
		return Entry{Ref: ref, State: StateLinted, ContentHash: h, Signed: true, Document: slices.Clone(doc)}, nil
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
// file (structure, every validation gate, content hash; state linted) or a
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
// published state without a signed document, linting for linted, sign-offs
// of every required role for reviewed, signed and published, no pinned (Deployments pins per
// environment); a move back to draft clears the sign-offs. It returns the
// entry to store.
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
	if to == StateReviewed || to == StateSigned || to == StatePublished {
		// Every state past reviewed carries the review: an entry that
		// reached signed without recorded sign-offs (a registry written
		// before reviews were recorded, or a hand-edited one) cannot move on
		// without them.
		if err := opts.Check(); err != nil {
			return e, err
		}
		if missing := opts.missingRoles(e); len(missing) > 0 {
			return e, fmt.Errorf("%w: %s has no recorded sign-off in roles %v by a reviewer of their own (Review records them)", ErrTransition, e.Ref, missing)
		}
	}
	switch to {
	case StateLinted:
		if _, err := DecodeAndValidate(bareDocument(e), opts); err != nil {
			return e, fmt.Errorf("%w: %s does not pass linting: %w", ErrTransition, e.Ref, err)
		}
	case StatePinned:
		return e, fmt.Errorf("%w: %s: a version is pinned in an environment (Deployments.Pin), not by SetState", ErrTransition, e.Ref)
	case StateDraft:
		e.Reviews = nil
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

// MemoryRegistry is the in-memory Registry and LifecycleRegistry.
type MemoryRegistry struct {
	opts    *ValidateOptions
	mu      sync.RWMutex
	entries map[string]map[Ref]Entry    // pack id → ref → entry
	pins    map[string]map[string][]Pin // env → pack id → history
}

var (
	_ LifecycleRegistry = (*MemoryRegistry)(nil)
	_ StateReader       = (*MemoryRegistry)(nil)
)

// NewMemoryRegistry returns an empty in-memory registry that validates the
// packs it stores with opts (nil: the defaults of ValidateOptions).
func NewMemoryRegistry(opts *ValidateOptions) *MemoryRegistry {
	return &MemoryRegistry{opts: opts.clone(), entries: map[string]map[Ref]Entry{}, pins: map[string]map[string][]Pin{}}
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
		return Entry{}, fmt.Errorf("%w: %s", ErrNotFound, packref.Show(ref.String()))
	}
	return copyEntry(e), nil
}

// Stat implements StateReader.
func (m *MemoryRegistry) Stat(ctx context.Context, ref Ref) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.entries[ref.ID][ref]
	if !ok {
		return Entry{}, fmt.Errorf("%w: %s", ErrNotFound, packref.Show(ref.String()))
	}
	e.Document = nil
	e.Reviews = slices.Clone(e.Reviews)
	return e, nil
}

// SetState implements Registry.
func (m *MemoryRegistry) SetState(ctx context.Context, ref Ref, to State, reason string) (Entry, error) {
	return m.update(ctx, ref, func(e Entry) (Entry, error) { return transition(e, to, reason, m.opts) })
}

// update applies f to ref's entry under the lock and stores the entry it
// returns.
func (m *MemoryRegistry) update(ctx context.Context, ref Ref, f func(Entry) (Entry, error)) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[ref.ID][ref]
	if !ok {
		return Entry{}, fmt.Errorf("%w: %s", ErrNotFound, packref.Show(ref.String()))
	}
	e, err := f(e)
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
		return nil, fmt.Errorf("%w: no versions of %s", ErrNotFound, packref.Show(packID))
	}
	out := make([]Entry, 0, len(versions))
	for _, e := range versions {
		out = append(out, copyEntry(e))
	}
	slices.SortFunc(out, func(a, b Entry) int { return a.Ref.Compare(b.Ref) })
	return out, nil
}

// Review implements LifecycleRegistry.
func (m *MemoryRegistry) Review(ctx context.Context, ref Ref, signoffs ...Signoff) (Entry, error) {
	return m.update(ctx, ref, func(e Entry) (Entry, error) { return e.SignOff(m.opts, signoffs...) })
}

// ApplyPin implements LifecycleRegistry.
func (m *MemoryRegistry) ApplyPin(ctx context.Context, c PinChange) (Pin, error) {
	if err := ctx.Err(); err != nil {
		return Pin{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	target, ok := m.entries[c.Ref().ID][c.Ref()]
	if !ok {
		return Pin{}, fmt.Errorf("%w: %s", ErrNotFound, packref.Show(c.Ref().String()))
	}
	hist := m.pins[c.Env()][c.Ref().ID]
	next, e, write, err := c.Apply(currentPin(hist), target)
	if err != nil || !write {
		return next, err
	}
	if m.pins[c.Env()] == nil {
		m.pins[c.Env()] = map[string][]Pin{}
	}
	m.pins[c.Env()][c.Ref().ID] = append(hist, next)
	m.entries[c.Ref().ID][c.Ref()] = e
	return next, nil
}

// PinHistory implements LifecycleRegistry.
func (m *MemoryRegistry) PinHistory(ctx context.Context, slot Slot) ([]Pin, error) {
	env, packID := slot.Env, slot.PackID
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := CheckEnvironment(env); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.pins[env][packID]), nil
}

// Pins implements LifecycleRegistry.
func (m *MemoryRegistry) Pins(ctx context.Context, env string) ([]Pin, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := CheckEnvironment(env); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := []Pin{}
	for _, h := range m.pins[env] {
		out = append(out, currentPin(h))
	}
	sortPins(out)
	return out, nil
}

func copyEntry(e Entry) Entry {
	e.Document = slices.Clone(e.Document)
	e.Reviews = slices.Clone(e.Reviews)
	return e
}
