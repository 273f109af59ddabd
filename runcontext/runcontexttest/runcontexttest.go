// Package runcontexttest holds the conformance suite for runcontext's
// plug-in interface, KeyResolver. A host's resolver (a JWKS client, a KMS
// lookup) runs it in its own tests:
//
//	func TestResolver(t *testing.T) {
//		runcontexttest.RunKeyResolverTests(t, func(t *testing.T, keys map[string]ed25519.PublicKey) runcontext.KeyResolver {
//			return newMyResolver(t, keys)
//		})
//	}
package runcontexttest

import (
	"context"
	"crypto/ed25519"
	"errors"
	"sync"
	"testing"

	"github.com/contextos/contextos/runcontext"
)

// NewResolver returns a resolver that serves exactly keys (kid → key).
type NewResolver func(t *testing.T, keys map[string]ed25519.PublicKey) runcontext.KeyResolver

// RunKeyResolverTests checks the KeyResolver contract: known kids resolve
// to their key, unknown kids fail with ErrUnknownKey, a cancelled context
// is honoured, concurrent use is safe, and a claim signed with a served key
// verifies through the resolver.
func RunKeyResolverTests(t *testing.T, newResolver NewResolver) {
	t.Helper()
	k1 := ed25519.NewKeyFromSeed(seed(1))
	k2 := ed25519.NewKeyFromSeed(seed(2))
	keys := map[string]ed25519.PublicKey{"kid_1": k1.Public().(ed25519.PublicKey), "kid_2": k2.Public().(ed25519.PublicKey)}

	t.Run("ResolvesKnownKids", func(t *testing.T) {
		r := newResolver(t, keys)
		for kid, want := range keys {
			got, err := r.PublicKey(context.Background(), kid)
			if err != nil || !got.Equal(want) {
				t.Errorf("PublicKey(%q) = %x, %v; want %x", kid, got, err, want)
			}
		}
	})
	t.Run("UnknownKid", func(t *testing.T) {
		r := newResolver(t, keys)
		for _, kid := range []string{"kid_3", "", "KID_1"} {
			if _, err := r.PublicKey(context.Background(), kid); !errors.Is(err, runcontext.ErrUnknownKey) {
				t.Errorf("PublicKey(%q) error = %v, want ErrUnknownKey", kid, err)
			}
		}
	})
	t.Run("CancelledContext", func(t *testing.T) {
		r := newResolver(t, keys)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := r.PublicKey(ctx, "kid_1"); !errors.Is(err, context.Canceled) {
			t.Errorf("PublicKey(cancelled) error = %v, want context.Canceled", err)
		}
	})
	t.Run("ConcurrentSafe", func(t *testing.T) {
		r := newResolver(t, keys)
		var wg sync.WaitGroup
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 50; j++ {
					if _, err := r.PublicKey(context.Background(), "kid_2"); err != nil {
						t.Errorf("concurrent PublicKey: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
	})
	t.Run("VerifiesSignedClaim", func(t *testing.T) {
		r := newResolver(t, keys)
		c := &runcontext.IdentityClaim{
			Iss: "conformance", Sub: "agent:conformance/agent@1.0.0", RunID: "run_conformance", TenantID: "tenant_c",
			PrincipalChain: []runcontext.Principal{}, Scopes: []string{}, Nbf: 1000, Exp: 2000,
		}
		if err := runcontext.SignClaim(c, "kid_2", k2); err != nil {
			t.Fatal(err)
		}
		want := runcontext.ClaimExpectations{Now: unix(1500), RunID: c.RunID, TenantID: c.TenantID, AgentURN: c.Sub}
		if err := runcontext.VerifyClaim(context.Background(), c, r, want); err != nil {
			t.Errorf("VerifyClaim via resolver = %v", err)
		}
		if err := runcontext.SignClaim(c, "kid_1", k2); err != nil { // kid_1 names the other key
			t.Fatal(err)
		}
		if err := runcontext.VerifyClaim(context.Background(), c, r, want); !errors.Is(err, runcontext.ErrClaim) {
			t.Errorf("VerifyClaim with mismatched kid = %v, want ErrClaim", err)
		}
	})
}

func seed(b byte) []byte {
	s := make([]byte, ed25519.SeedSize)
	s[0] = b
	return s
}
