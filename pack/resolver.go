package pack

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Resolved is a pack ready for use: fetched, signature-verified, validated
// and compatibility-checked, with its registry state at fetch time.
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
// pack, and enforces the lifecycle state for the requested Use. Results are
// cached per ref for the pack's ttl_seconds (freshness, not mutability:
// after the TTL the same version is fetched again, so a revocation is
// seen); concurrent resolves of one ref load it once. Safe for concurrent
// use.
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
	host := Host{}
	for k, v := range o.Host {
		host[k] = v
	}
	return &Resolver{reg: reg, keys: keys, host: host, now: o.Now, vopts: o.Validation.clone(), cache: map[Ref]cached{}}
}

// Resolve returns the pack at ref for use u, or an error: ErrNotFound,
// ErrSignature, ErrInvalid, ErrIncompatible, or a *StateError (ErrNotUsable)
// for a pack whose state forbids u.
func (r *Resolver) Resolve(ctx context.Context, ref Ref, u Use) (*Resolved, error) {
	res, err := r.load(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !usable(res.State, u) {
		return nil, &StateError{Ref: ref.String(), State: res.State, Reason: res.Reason, Use: u}
	}
	return res, nil
}

// ResolveString parses s as a pinned ref and resolves it.
func (r *Resolver) ResolveString(ctx context.Context, s string, u Use) (*Resolved, error) {
	ref, err := ParseRef(s)
	if err != nil {
		return nil, err
	}
	return r.Resolve(ctx, ref, u)
}

func (r *Resolver) load(ctx context.Context, ref Ref) (*Resolved, error) {
	now := r.now()
	r.mu.Lock()
	c, ok := r.cache[ref]
	r.mu.Unlock()
	if ok && now.Sub(c.fetched) < time.Duration(c.r.Pack.PackMeta.TTLSeconds)*time.Second {
		return c.r, nil
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
		return nil, err
	}
	return v.(*Resolved), nil
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
