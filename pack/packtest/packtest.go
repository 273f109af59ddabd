// Package packtest holds test helpers for package pack: the conformance
// suite for Registry implementations, and builders for signed test packs.
//
// A host with its own registry (a database, an artifact store) runs:
//
//	func TestMyRegistry(t *testing.T) {
//		packtest.RunRegistryTests(t, base, func(t *testing.T) pack.Registry { return newMyRegistry(t) })
//		packtest.RunLifecycleTests(t, base, func(t *testing.T, opts *pack.ValidateOptions) (pack.LifecycleRegistry, func(*testing.T) pack.LifecycleRegistry) {
//			return newMyRegistry(t, opts), nil // or a function opening the same storage again
//		})
//	}
package packtest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos/pack"
)

// Signer signs test packs with a fixed, deterministic key.
type Signer struct {
	Kid string
	Key ed25519.PrivateKey
}

// NewSigner returns a signer whose key is derived from seed.
func NewSigner(seed byte) Signer {
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	key := ed25519.NewKeyFromSeed(s)
	return Signer{Kid: pack.KeyID(key.Public().(ed25519.PublicKey)), Key: key}
}

// Public returns the signer's public key.
func (s Signer) Public() ed25519.PublicKey { return s.Key.Public().(ed25519.PublicKey) }

// Sign returns the signed pack file of p.
func (s Signer) Sign(t testing.TB, p *pack.Pack) []byte {
	t.Helper()
	b, err := pack.Sign(p, s.Kid, s.Key, nil)
	if err != nil {
		t.Fatalf("sign %s@%s: %v", p.PackMeta.PackID, p.PackMeta.PackVersion, err)
	}
	return b
}

// WithVersion returns a copy of p with pack_version set to version.
func WithVersion(t testing.TB, p *pack.Pack, version string) *pack.Pack {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var c pack.Pack
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	c.PackMeta.PackVersion = version
	return &c
}

// Bare returns p as a bare (unsigned) pack document.
func Bare(t testing.TB, p *pack.Pack) []byte {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Signoffs returns a sign-off in every role a registry requires by
// default, each by a reviewer of its own: "<team>.<role>" (a registry
// requires one reviewer per role).
func Signoffs(team string) []pack.Signoff {
	var out []pack.Signoff
	for _, r := range pack.DefaultReviewRoles() {
		out = append(out, pack.Signoff{Reviewer: team + "." + string(r), Role: r})
	}
	return out
}

// Publish stores the signed pack file doc in reg and takes it through
// review (Signoffs(reviewer): a reviewer of its own in every default
// role), signing and publication; it returns the published entry.
func Publish(t testing.TB, reg pack.Registry, doc []byte, reviewer string) pack.Entry {
	t.Helper()
	ctx := context.Background()
	e, err := reg.Put(ctx, doc)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	e, err = pack.Publish(ctx, reg, e.Ref, "packtest", Signoffs(reviewer)...)
	if err != nil {
		t.Fatalf("Publish %s: %v", e.Ref, err)
	}
	return e
}

// show formats an entry for a test message, without its document.
func show(e pack.Entry) string {
	return fmt.Sprintf("{%s %s signed=%t reason=%q reviews=%v}", e.Ref, e.State, e.Signed, e.Reason, e.Reviews)
}

// RunRegistryTests checks the Registry contract against fresh registries
// from newRegistry, using base (a pack that passes every gate) to build
// versions.
func RunRegistryTests(t *testing.T, base *pack.Pack, newRegistry func(t *testing.T) pack.Registry) {
	t.Helper()
	s := &registrySuite{ctx: context.Background(), base: base, newRegistry: newRegistry, signer: NewSigner(7)}
	s.ref = func(p *pack.Pack) pack.Ref {
		r, err := p.Ref()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range registryCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, s) })
	}
}

// registrySuite is what RunRegistryTests's cases share: the base pack, the
// registry constructor, a signer, and ref, a pack's ref. Each case builds
// its own registry from it.
type registrySuite struct {
	ctx         context.Context
	base        *pack.Pack
	newRegistry func(t *testing.T) pack.Registry
	signer      Signer
	ref         func(p *pack.Pack) pack.Ref
}

// registryCases are the cases of RunRegistryTests, in order; each
// starts from what it needs, fresh from the constructor.
var registryCases = []struct {
	name string
	run  func(t *testing.T, s *registrySuite)
}{
	{"PutSignedGetRoundTrip", registryPutSignedGetRoundTrip},
	{"SignedPutSkipsNoReview", registrySignedPutSkipsNoReview},
	{"PutBareIsDraft", registryPutBareIsDraft},
	{"Immutable", registryImmutable},
	{"RefusesBadDocuments", registryRefusesBadDocuments},
	{"NotFound", registryNotFound},
	{"Lifecycle", registryLifecycle},
	{"LintRequiresValidPack", registryLintRequiresValidPack},
	{"VersionsSorted", registryVersionsSorted},
	{"ConcurrentSafe", registryConcurrentSafe},
	{"CancelledContext", registryCancelledContext},
}

func registryPutSignedGetRoundTrip(t *testing.T, s *registrySuite) {
	ctx, base, signer, newRegistry, ref := s.ctx, s.base, s.signer, s.newRegistry, s.ref
	reg := newRegistry(t)
	doc := signer.Sign(t, base)
	e, err := reg.Put(ctx, doc)
	if err != nil {
		t.Fatal(err)
	}
	// A signed file passed every gate but is not reviewed yet: it is
	// stored with its signature, in state linted.
	if e.State != pack.StateLinted || !e.Signed || e.Ref != ref(base) || len(e.Reviews) != 0 {
		t.Errorf("Put = %s, want a linted entry with the signed document for %s", show(e), ref(base))
	}
	got, err := reg.Get(ctx, ref(base))
	if err != nil || string(got.Document) != string(doc) || got.ContentHash != e.ContentHash {
		t.Errorf("Get = %s, %v; want the stored document back", show(got), err)
	}
}

func registrySignedPutSkipsNoReview(t *testing.T, s *registrySuite) {
	ctx, base, signer, newRegistry := s.ctx, s.base, s.signer, s.newRegistry
	reg := newRegistry(t)
	e, err := reg.Put(ctx, signer.Sign(t, base))
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []pack.State{pack.StateReviewed, pack.StateSigned, pack.StatePublished, pack.StatePinned} {
		if got, err := reg.SetState(ctx, e.Ref, to, "skip"); !errors.Is(err, pack.ErrTransition) {
			t.Errorf("SetState(%s) of an unreviewed signed file = %s, %v; want ErrTransition", to, show(got), err)
		}
	}
	if got, err := reg.Get(ctx, e.Ref); err != nil || got.State != pack.StateLinted {
		t.Errorf("after refused moves Get = %s, %v; want linted", show(got), err)
	}
}

func registryPutBareIsDraft(t *testing.T, s *registrySuite) {
	ctx, base, signer, newRegistry := s.ctx, s.base, s.signer, s.newRegistry
	reg := newRegistry(t)
	e, err := reg.Put(ctx, Bare(t, base))
	if err != nil || e.State != pack.StateDraft || e.Signed {
		t.Fatalf("Put(bare) = %s, %v; want draft", show(e), err)
	}
	// Signing later attaches the signed file to the same version.
	e, err = reg.Put(ctx, signer.Sign(t, base))
	if err != nil || !e.Signed || e.State != pack.StateDraft {
		t.Errorf("Put(signed same content) = %s, %v; want signed document, state kept", show(e), err)
	}
}

func registryImmutable(t *testing.T, s *registrySuite) {
	ctx, base, signer, newRegistry, ref := s.ctx, s.base, s.signer, s.newRegistry, s.ref
	reg := newRegistry(t)
	if _, err := reg.Put(ctx, signer.Sign(t, base)); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Put(ctx, signer.Sign(t, base)); err != nil {
		t.Errorf("re-Put of identical content = %v, want nil", err)
	}
	changed := WithVersion(t, base, base.PackMeta.PackVersion)
	changed.BusinessContext.NonNegotiables = append(changed.BusinessContext.NonNegotiables, "never change published packs")
	if _, err := reg.Put(ctx, signer.Sign(t, changed)); !errors.Is(err, pack.ErrImmutable) {
		t.Errorf("Put of different content under %s = %v, want ErrImmutable", ref(base), err)
	}
}

func registryRefusesBadDocuments(t *testing.T, s *registrySuite) {
	ctx, base, signer, newRegistry := s.ctx, s.base, s.signer, s.newRegistry
	reg := newRegistry(t)
	doc := signer.Sign(t, base)
	tampered := []byte(string(doc))
	tampered[len(tampered)/2] ^= 0x01
	for name, d := range map[string][]byte{"not json": []byte(`{`), "tampered": tampered, "empty": nil} {
		if _, err := reg.Put(ctx, d); err == nil {
			t.Errorf("Put(%s) accepted", name)
		}
	}
}

func registryNotFound(t *testing.T, s *registrySuite) {
	ctx, newRegistry := s.ctx, s.newRegistry
	reg := newRegistry(t)
	if _, err := reg.Get(ctx, pack.MustParseRef("nope@1.0.0")); !errors.Is(err, pack.ErrNotFound) {
		t.Errorf("Get(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := reg.Versions(ctx, "nope"); !errors.Is(err, pack.ErrNotFound) {
		t.Errorf("Versions(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := reg.SetState(ctx, pack.MustParseRef("nope@1.0.0"), pack.StatePublished, ""); !errors.Is(err, pack.ErrNotFound) {
		t.Errorf("SetState(unknown) = %v, want ErrNotFound", err)
	}
	// An unknown ref or id that looks like a secret (a key pasted as a
	// pack id) is never echoed.
	const key = "sk-live-packtestsecretref0001"
	if _, err := reg.Get(ctx, pack.MustParseRef(key+"@1.0.0")); !errors.Is(err, pack.ErrNotFound) || strings.Contains(err.Error(), key) {
		t.Errorf("Get(secret-looking ref) = %v, want ErrNotFound without the ref", err)
	}
	if _, err := reg.Versions(ctx, key); !errors.Is(err, pack.ErrNotFound) || strings.Contains(err.Error(), key) {
		t.Errorf("Versions(secret-looking id) = %v, want ErrNotFound without the id", err)
	}
}

func registryLifecycle(t *testing.T, s *registrySuite) {
	ctx, base, signer, newRegistry, ref := s.ctx, s.base, s.signer, s.newRegistry, s.ref
	reg := newRegistry(t)
	r := ref(base)
	if _, err := reg.Put(ctx, Bare(t, base)); err != nil {
		t.Fatal(err)
	}
	step := func(to pack.State, reason string, wantErr error) {
		t.Helper()
		e, err := reg.SetState(ctx, r, to, reason)
		if wantErr != nil {
			if !errors.Is(err, wantErr) {
				t.Errorf("SetState(%s) = %v, want %v", to, err, wantErr)
			}
			return
		}
		if err != nil || e.State != to || e.Reason != reason {
			t.Errorf("SetState(%s) = %s, %v", to, show(e), err)
		}
	}
	step(pack.StatePublished, "", pack.ErrTransition) // draft cannot skip to published
	step(pack.StateLinted, "", nil)
	step(pack.StateReviewed, "", pack.ErrTransition) // no sign-off recorded
	lr, ok := reg.(pack.LifecycleRegistry)
	if !ok {
		// Without recorded reviews nothing gets further.
		step(pack.StateSigned, "", pack.ErrTransition)
		return
	}
	if e, err := lr.Review(ctx, r, Signoffs("rev")...); err != nil || e.State != pack.StateReviewed {
		t.Fatalf("Review = %s, %v; want reviewed", show(e), err)
	}
	step(pack.StateSigned, "", pack.ErrTransition) // nothing signed yet
	if _, err := reg.Put(ctx, signer.Sign(t, base)); err != nil {
		t.Fatal(err)
	}
	step(pack.StateSigned, "", nil)
	step(pack.StatePublished, "", nil)
	step(pack.StatePinned, "", pack.ErrTransition)     // pins are per environment
	step(pack.StateDeprecated, "", pack.ErrTransition) // needs a reason
	step(pack.StateDeprecated, "superseded by 1.1.0", nil)
	step(pack.StatePublished, "", pack.ErrTransition) // no way back
	step(pack.StateRevoked, "refund threshold bug", nil)
	step(pack.StateDraft, "", pack.ErrTransition) // revoked is final
	got, err := reg.Get(ctx, r)
	if err != nil || got.State != pack.StateRevoked || got.Reason != "refund threshold bug" {
		t.Errorf("Get after revoke = %s, %v; want revoked with reason kept", show(got), err)
	}
}

func registryLintRequiresValidPack(t *testing.T, s *registrySuite) {
	ctx, base, newRegistry := s.ctx, s.base, s.newRegistry
	reg := newRegistry(t)
	bad := WithVersion(t, base, "9.9.9")
	bad.EvaluationLayer.ReleaseGates = nil
	e, err := reg.Put(ctx, Bare(t, bad))
	if err != nil {
		t.Fatalf("Put(draft with problems) = %v; drafts may be invalid", err)
	}
	if _, err := reg.SetState(ctx, e.Ref, pack.StateLinted, ""); !errors.Is(err, pack.ErrTransition) {
		t.Errorf("lint of invalid draft = %v, want ErrTransition", err)
	}
}

func registryVersionsSorted(t *testing.T, s *registrySuite) {
	ctx, base, signer, newRegistry := s.ctx, s.base, s.signer, s.newRegistry
	reg := newRegistry(t)
	for _, v := range []string{"1.10.0", "1.2.0", "2.0.0", "1.2.10"} {
		if _, err := reg.Put(ctx, signer.Sign(t, WithVersion(t, base, v))); err != nil {
			t.Fatal(err)
		}
	}
	es, err := reg.Versions(ctx, base.PackMeta.PackID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Ref.Version())
	}
	if fmt.Sprint(got) != "[1.2.0 1.2.10 1.10.0 2.0.0]" {
		t.Errorf("Versions = %v, want semver order", got)
	}
}

func registryConcurrentSafe(t *testing.T, s *registrySuite) {
	ctx, base, signer, newRegistry, ref := s.ctx, s.base, s.signer, s.newRegistry, s.ref
	reg := newRegistry(t)
	doc := signer.Sign(t, base)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := 0; i < 16; i++ {
		wg.Add(2)
		go func() { defer wg.Done(); _, err := reg.Put(ctx, doc); errs <- err }()
		go func() {
			defer wg.Done()
			if _, err := reg.Get(ctx, ref(base)); err != nil && !errors.Is(err, pack.ErrNotFound) {
				errs <- err
				return
			}
			errs <- nil
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Put/Get: %v", err)
		}
	}
}

func registryCancelledContext(t *testing.T, s *registrySuite) {
	ctx, base, newRegistry, ref := s.ctx, s.base, s.newRegistry, s.ref
	reg := newRegistry(t)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := reg.Get(cctx, ref(base)); !errors.Is(err, context.Canceled) {
		t.Errorf("Get(cancelled) = %v, want context.Canceled", err)
	}
}
