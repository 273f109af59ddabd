package pack_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/pack/packtest"
)

// countingRegistry counts Get calls and can block them.
type countingRegistry struct {
	pack.Registry
	gets  atomic.Int32
	block chan struct{}
}

func (c *countingRegistry) Get(ctx context.Context, ref pack.Ref) (pack.Entry, error) {
	c.gets.Add(1)
	if c.block != nil {
		<-c.block
	}
	return c.Registry.Get(ctx, ref)
}

var host = pack.Host{"runtime": "1.0.0", "ontology": "1.0.0"}

func publishedRegistry(t *testing.T, s packtest.Signer) *pack.MemoryRegistry {
	reg := pack.NewMemoryRegistry(nil)
	packtest.Publish(t, reg, s.Sign(t, canonical(t)), "rev")
	return reg
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestResolverLoadsOnceAndHonoursTTL(t *testing.T) {
	synctest.Test(t, testResolverLoadsOnce)
}

func testResolverLoadsOnce(t *testing.T) {
	s := packtest.NewSigner(1)
	reg := &countingRegistry{Registry: publishedRegistry(t, s), block: make(chan struct{})}
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	r := pack.NewResolver(reg, keysFor(s), &pack.ResolverOptions{Host: host, Now: clk.Now})
	ref := pack.MustParseRef("ctxpack.support@1.0.0")
	var wg sync.WaitGroup
	results := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.Resolve(ctx, ref, pack.UseExecute)
			results <- err
		}()
	}
	synctest.Wait() // every resolver is now blocked: one in Get, the rest waiting on it
	close(reg.block)
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := reg.gets.Load(); n != 1 {
		t.Errorf("20 concurrent resolves loaded %d times, want 1", n)
	}
	// Within ttl_seconds (86400) the cache answers; after it, the same version is fetched again.
	clk.Advance(23 * time.Hour)
	if _, err := r.Resolve(ctx, ref, pack.UseExecute); err != nil || reg.gets.Load() != 1 {
		t.Errorf("within TTL: %v, gets %d", err, reg.gets.Load())
	}
	// A revocation during the TTL is seen once the TTL passes.
	if _, err := reg.SetState(ctx, ref, pack.StateRevoked, "bad threshold"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Hour)
	_, err := r.Resolve(ctx, ref, pack.UseExecute)
	var se *pack.StateError
	if !errors.As(err, &se) || !errors.Is(err, pack.ErrNotUsable) || se.Reason != "bad threshold" || reg.gets.Load() != 2 {
		t.Errorf("after TTL and revocation: %v (gets %d)", err, reg.gets.Load())
	}
	// Revoked packs still resolve for replay and audit, reason kept.
	res, err := r.Resolve(ctx, ref, pack.UseReplay)
	if err != nil || res.State != pack.StateRevoked || res.Reason != "bad threshold" {
		t.Errorf("replay of revoked: %+v, %v", res, err)
	}
}

func TestResolverStatesAndRefusals(t *testing.T) {
	t.Parallel()
	s, other := packtest.NewSigner(1), packtest.NewSigner(2)
	ref := pack.MustParseRef("ctxpack.support@1.0.0")
	tests := []struct {
		name    string
		setup   func(reg *pack.MemoryRegistry)
		keys    pack.KeyResolver
		host    pack.Host
		use     pack.Use
		wantErr error
	}{
		{"published executes", nil, keysFor(s), host, pack.UseExecute, nil},
		{"deprecated refused for new traffic", func(reg *pack.MemoryRegistry) {
			reg.SetState(ctx, ref, pack.StateDeprecated, "superseded")
		}, keysFor(s), host, pack.UseExecute, pack.ErrNotUsable},
		{"deprecated resolves for replay", func(reg *pack.MemoryRegistry) {
			reg.SetState(ctx, ref, pack.StateDeprecated, "superseded")
		}, keysFor(s), host, pack.UseReplay, nil},
		{"pinned executes", func(reg *pack.MemoryRegistry) {
			d, err := pack.NewDeployments(reg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Pin(ctx, "prod", ref, ""); err != nil {
				t.Fatal(err)
			}
		}, keysFor(s), host, pack.UseExecute, nil},
		{"unknown signer", nil, keysFor(other), host, pack.UseExecute, pack.ErrSignature},
		{"old runtime", nil, keysFor(s), pack.Host{"runtime": "0.9.0", "ontology": "1.0.0"}, pack.UseExecute, pack.ErrIncompatible},
		{"host without ontology", nil, keysFor(s), pack.Host{"runtime": "1.0.0"}, pack.UseExecute, pack.ErrIncompatible},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := publishedRegistry(t, s)
			if tc.setup != nil {
				tc.setup(reg)
			}
			r := pack.NewResolver(reg, tc.keys, &pack.ResolverOptions{Host: tc.host})
			res, err := r.Resolve(ctx, ref, tc.use)
			if tc.wantErr == nil {
				if err != nil || res.Pack == nil || res.Kid != s.Kid {
					t.Errorf("Resolve = %+v, %v", res, err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("Resolve = %v, want %v", err, tc.wantErr)
			}
		})
	}
	// Drafts and unsigned packs never resolve; unknown refs are not found; unpinned strings are refused.
	reg := pack.NewMemoryRegistry(nil)
	if _, err := reg.Put(ctx, packtest.Bare(t, canonical(t))); err != nil {
		t.Fatal(err)
	}
	r := pack.NewResolver(reg, keysFor(s), &pack.ResolverOptions{Host: host})
	if _, err := r.Resolve(ctx, ref, pack.UseReplay); !errors.Is(err, pack.ErrNotUsable) {
		t.Errorf("draft: %v", err)
	}
	if _, err := r.ResolveString(ctx, "other@1.0.0", pack.UseExecute); !errors.Is(err, pack.ErrNotFound) {
		t.Errorf("unknown: %v", err)
	}
	if _, err := r.ResolveString(ctx, "ctxpack.support", pack.UseExecute); !errors.Is(err, pack.ErrUnpinnedRef) {
		t.Errorf("unpinned: %v", err)
	}
	r.Invalidate(ref)
}
