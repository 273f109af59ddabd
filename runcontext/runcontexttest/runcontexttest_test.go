package runcontexttest_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/runcontext/runcontexttest"
)

// The in-memory resolver passes the conformance suite.
func TestStaticKeysConformance(t *testing.T) {
	runcontexttest.RunKeyResolverTests(t, func(t *testing.T, keys map[string]ed25519.PublicKey) runcontext.KeyResolver {
		return runcontext.NewStaticKeys(keys)
	})
}
