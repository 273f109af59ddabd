package pack

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Resolved is a pack ready for use: fetched, signature-verified, validated
// and compatibility-checked, with the lifecycle state the resolve decided
// on (for UseReplay, the state when the document was fetched).
type Resolved struct {
	Ref         Ref
	Pack        *Pack
	ContentHash string
	Kid         string
	State       State
	Reason      string
}

// ResolverOptions tunes a Resolver. The zero value is ready to use.
type ResolverOptions struct {
	// Host is what the runtime provides; every pack's compatibility.requires
	// is checked against it. Default: empty, so a pack with requirements
	// is refused (fail closed).
	Host Host
	// Now is the clock for cache freshness. Default: time.Now.
	Now func() time.Time
	// Validation tunes the validation of every resolved pack (the host's
	// redaction rule names). Default: the zero ValidateOptions.
	Validation ValidateOptions
}

// Resolver resolves pinned refs through a Registry: it verifies the signed
// document with the issuer keys, validates and compatibility-checks the
// pack, and enforces the lifecycle state for the requested Use.
//
// A version's document is immutable, so it is cached per ref for the
// pack's ttl_seconds (freshness, not mutability: after the TTL the same
// version is fetched and verified again); concurrent resolves of one ref
// load it once. Its lifecycle state is not: every resolve for UseExecute
// or UseResume that the cache answers reads the state again (one registry
// read, through StateReader.Stat when the registry has it, else Get), so a
// revocation refuses the next run and the next resume however long the
// TTL, and a deprecation the next run. A state that cannot be read refuses
// the resolve. Resolves for UseReplay take the cached state: every state a
// replayable version can move to is replayable. Safe for concurrent use.
type Resolver struct {
	reg   Registry
	keys  KeyResolver
	host  Host
	now   func() time.Time
	vopts *ValidateOptions
	group singleflight.Group
	mu    sync.Mutex
	cache map[Ref]cached
}

type cached struct {
	r       *Resolved
	fetched time.Time
}

// NewResolver returns a Resolver over reg that verifies with keys.
func NewResolver(reg Registry, keys KeyResolver, opts *ResolverOptions) *Resolver {
	var o ResolverOptions
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Resolver{reg: reg, keys: keys, host: o.Host.clone(), now: o.Now, vopts: o.Validation.clone(), cache: map[Ref]cached{}}
}

// Host returns a copy of what the resolver's host declares
// (ResolverOptions.Host): the compiler checks the same requirements.
func (r *Resolver) Host() Host { return r.host.clone() }

func (h Host) clone() Host {
	out := Host{}
	for k, v := range h {
		out[k] = v
	}
	return out
}

// Resolve returns the pack at ref for use u, or an error: ErrNotFound,
// ErrSignature, ErrInvalid, ErrIncompatible, ErrImmutable, or a
// *StateError (ErrNotUsable) for a pack whose state forbids u. The
// Resolved carries the state the decision was made on.
func (r *Resolver) Resolve(ctx context.Context, ref Ref, u Use) (*Resolved, error) {
	res, fresh, err := r.load(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !fresh && u != UseReplay {
		if res, err = r.restat(ctx, ref, res); err != nil {
			return nil, err
		}
	}
	if !usable(res.State, u) {
		return nil, &StateError{Ref: ref.String(), State: res.State, Reason: res.Reason, Use: u}
	}
	return res, nil
}

// restat reads ref's lifecycle state again for a cached res, and returns
// res with that state (and caches it). Content other than the cached
// document's is ErrImmutable.
func (r *Resolver) restat(ctx context.Context, ref Ref, res *Resolved) (*Resolved, error) {
	var e Entry
	var err error
	if sr, ok := r.reg.(StateReader); ok {
		e, err = sr.Stat(ctx, ref)
	} else {
		e, err = r.reg.Get(ctx, ref)
	}
	if err != nil {
		return nil, fmt.Errorf("pack: read the lifecycle state of %s: %w", ref, err)
	}
	if e.ContentHash != res.ContentHash {
		return nil, fmt.Errorf("%w: registry holds different content for %s (%s, cached %s)", ErrImmutable, ref, e.ContentHash, res.ContentHash)
	}
	if e.State == res.State && e.Reason == res.Reason {
		return res, nil
	}
	next := *res
	next.State, next.Reason = e.State, e.Reason
	r.mu.Lock()
	if c, ok := r.cache[ref]; ok && c.r == res {
		r.cache[ref] = cached{r: &next, fetched: c.fetched}
	}
	r.mu.Unlock()
	return &next, nil
}

// ResolveString parses s as a pinned ref and resolves it.
func (r *Resolver) ResolveString(ctx context.Context, s string, u Use) (*Resolved, error) {
	ref, err := ParseRef(s)
	if err != nil {
		return nil, err
	}
	return r.Resolve(ctx, ref, u)
}

// load returns ref's resolved pack from the cache, or fetched (fresh
// reports a fetch: its state was just read).
func (r *Resolver) load(ctx context.Context, ref Ref) (res *Resolved, fresh bool, err error) {
	now := r.now()
	r.mu.Lock()
	c, ok := r.cache[ref]
	r.mu.Unlock()
	if ok && now.Sub(c.fetched) < time.Duration(c.r.Pack.PackMeta.TTLSeconds)*time.Second {
		return c.r, false, nil
	}
	v, err, _ := r.group.Do(ref.String(), func() (any, error) {
		res, err := r.fetch(ctx, ref)
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if prev, ok := r.cache[ref]; ok && prev.r.ContentHash != res.ContentHash {
			return nil, fmt.Errorf("%w: registry returned different content for %s (%s, cached %s)", ErrImmutable, ref, res.ContentHash, prev.r.ContentHash)
		}
		r.cache[ref] = cached{r: res, fetched: now}
		return res, nil
	})
	if err != nil {
		return nil, false, err
	}
	return v.(*Resolved), true, nil
}

func (r *Resolver) fetch(ctx context.Context, ref Ref) (*Resolved, error) {
	e, err := r.reg.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !e.Signed {
		return nil, &StateError{Ref: ref.String(), State: e.State, Use: UseExecute, Reason: "unsigned"}
	}
	v, err := Verify(ctx, e.Document, r.keys, r.vopts)
	if err != nil {
		return nil, err
	}
	if v.Ref != ref {
		return nil, fmt.Errorf("%w: registry returned %s for %s", ErrSignature, v.Ref, ref)
	}
	if err := CheckCompatibility(v.Pack, r.host); err != nil {
		return nil, err
	}
	return &Resolved{Ref: ref, Pack: v.Pack, ContentHash: v.ContentHash, Kid: v.Kid, State: e.State, Reason: e.Reason}, nil
}

// Invalidate drops ref from the cache (after a state change the caller
// made, say), so the next resolve fetches it again.
func (r *Resolver) Invalidate(ref Ref) {
	r.mu.Lock()
	delete(r.cache, ref)
	r.mu.Unlock()
}
