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

// countingRegistry counts Get and Stat calls and can block Get.
type countingRegistry struct {
	pack.Registry
	gets, stats atomic.Int32
	block       chan struct{}
}

func (c *countingRegistry) Get(ctx context.Context, ref pack.Ref) (pack.Entry, error) {
	c.gets.Add(1)
	if c.block != nil {
		<-c.block
	}
	return c.Registry.Get(ctx, ref)
}

func (c *countingRegistry) Stat(ctx context.Context, ref pack.Ref) (pack.Entry, error) {
	c.stats.Add(1)
	return c.Registry.(pack.StateReader).Stat(ctx, ref)
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
	if n, st := reg.gets.Load(), reg.stats.Load(); n != 1 || st != 0 {
		t.Errorf("20 concurrent resolves loaded %d times and read the state %d times, want 1 and 0", n, st)
	}
	// Within ttl_seconds (86400) the cache answers for the document, and
	// the state is read again (one Stat); after it, the same version is
	// fetched again.
	clk.Advance(23 * time.Hour)
	if _, err := r.Resolve(ctx, ref, pack.UseExecute); err != nil || reg.gets.Load() != 1 || reg.stats.Load() != 1 {
		t.Errorf("within TTL: %v, gets %d, stats %d", err, reg.gets.Load(), reg.stats.Load())
	}
	clk.Advance(2 * time.Hour)
	if _, err := r.Resolve(ctx, ref, pack.UseExecute); err != nil || reg.gets.Load() != 2 || reg.stats.Load() != 1 {
		t.Errorf("after TTL: %v, gets %d, stats %d", err, reg.gets.Load(), reg.stats.Load())
	}
	// A revocation during the TTL is seen by the next resolve.
	if _, err := reg.SetState(ctx, ref, pack.StateRevoked, "bad threshold"); err != nil {
		t.Fatal(err)
	}
	_, err := r.Resolve(ctx, ref, pack.UseExecute)
	var se *pack.StateError
	if !errors.As(err, &se) || !errors.Is(err, pack.ErrNotUsable) || se.Reason != "bad threshold" || reg.gets.Load() != 2 || reg.stats.Load() != 2 {
		t.Errorf("revoked within the TTL: %v (gets %d, stats %d)", err, reg.gets.Load(), reg.stats.Load())
	}
	// Revoked packs still resolve for replay and audit, reason kept.
	res, err := r.Resolve(ctx, ref, pack.UseReplay)
	if err != nil || res.State != pack.StateRevoked || res.Reason != "bad threshold" {
		t.Errorf("replay of revoked: %+v, %v", res, err)
	}
}

// The lifecycle state is read again on every resolve for execution or a
// resume, however long the pack's ttl_seconds (the cached document is
// not): a revocation refuses the next run and the next resume, a
// deprecation the next run only, and both stay replayable. Each resolve
// the cache answers costs one state read.
func TestResolverSeesStateAtOnce(t *testing.T) {
	t.Parallel()
	s := packtest.NewSigner(1)
	ref := pack.MustParseRef("ctxpack.support@1.0.0")
	tests := []struct {
		state  pack.State
		reason string
		allow  map[pack.Use]bool
	}{
		{pack.StatePublished, "packtest", map[pack.Use]bool{pack.UseExecute: true, pack.UseResume: true, pack.UseReplay: true}},
		{pack.StateDeprecated, "superseded by 1.1.0", map[pack.Use]bool{pack.UseResume: true, pack.UseReplay: true}},
		{pack.StateRevoked, "leaks payment details", map[pack.Use]bool{pack.UseReplay: true}},
	}
	for _, tc := range tests {
		for _, u := range pack.Uses() {
			t.Run(string(tc.state)+"/"+string(u), func(t *testing.T) {
				t.Parallel()
				reg := &countingRegistry{Registry: publishedRegistry(t, s)}
				clk := &clock{now: time.Unix(1_800_000_000, 0)}
				r := pack.NewResolver(reg, keysFor(s), &pack.ResolverOptions{Host: host, Now: clk.Now})
				if _, err := r.Resolve(ctx, ref, pack.UseExecute); err != nil {
					t.Fatal(err)
				}
				if tc.state != pack.StatePublished {
					if _, err := reg.SetState(ctx, ref, tc.state, tc.reason); err != nil {
						t.Fatal(err)
					}
				}
				clk.Advance(time.Second) // well within ttl_seconds
				res, err := r.Resolve(ctx, ref, u)
				if tc.allow[u] {
					if err != nil {
						t.Fatalf("Resolve(%s) of a %s pack = %v", u, tc.state, err)
					}
				} else {
					var se *pack.StateError
					if !errors.As(err, &se) || !errors.Is(err, pack.ErrNotUsable) || se.State != tc.state || se.Reason != tc.reason || se.Use != u {
						t.Fatalf("Resolve(%s) of a %s pack = %v, want a *StateError", u, tc.state, err)
					}
				}
				wantStats := int32(1)
				if u == pack.UseReplay {
					wantStats = 0 // every state a replayable pack moves to is replayable
				} else if res != nil && (res.State != tc.state || res.Reason != tc.reason) {
					t.Errorf("Resolved state %s (%q), want %s", res.State, res.Reason, tc.state)
				}
				if reg.gets.Load() != 1 || reg.stats.Load() != wantStats {
					t.Errorf("registry reads: %d Get, %d Stat; want 1 and %d", reg.gets.Load(), reg.stats.Load(), wantStats)
				}
			})
		}
	}
}

// getOnly hides a registry's Stat: the resolver reads the state with Get.
type getOnly struct{ pack.Registry }

// failingStat fails state reads, or answers with other content.
type failingStat struct {
	*pack.MemoryRegistry
	err  error
	hash string
}

func (f *failingStat) Stat(ctx context.Context, ref pack.Ref) (pack.Entry, error) {
	if f.err != nil {
		return pack.Entry{}, f.err
	}
	e, err := f.MemoryRegistry.Stat(ctx, ref)
	e.ContentHash = f.hash
	return e, err
}

func TestResolverStateReadFailsClosed(t *testing.T) {
	t.Parallel()
	s := packtest.NewSigner(1)
	ref := pack.MustParseRef("ctxpack.support@1.0.0")
	down := errors.New("registry unreachable")
	tests := []struct {
		name    string
		reg     func(*pack.MemoryRegistry) pack.Registry
		wantErr error
	}{
		{"a registry without Stat is read with Get", func(m *pack.MemoryRegistry) pack.Registry { return getOnly{m} }, pack.ErrNotUsable},
		{"a state read that fails refuses the run", func(m *pack.MemoryRegistry) pack.Registry { return &failingStat{MemoryRegistry: m, err: down} }, down},
		{"other content under the ref", func(m *pack.MemoryRegistry) pack.Registry {
			return &failingStat{MemoryRegistry: m, hash: "sha256:0000000000000000000000000000000000000000000000000000000000000000"}
		}, pack.ErrImmutable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := publishedRegistry(t, s)
			r := pack.NewResolver(tc.reg(m), keysFor(s), &pack.ResolverOptions{Host: host})
			if _, err := r.Resolve(ctx, ref, pack.UseExecute); err != nil {
				t.Fatal(err)
			}
			if _, err := m.SetState(ctx, ref, pack.StateRevoked, "bad"); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Resolve(ctx, ref, pack.UseResume); !errors.Is(err, tc.wantErr) {
				t.Errorf("Resolve = %v, want %v", err, tc.wantErr)
			}
		})
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
