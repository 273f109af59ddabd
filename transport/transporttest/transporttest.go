// Package transporttest holds the conformance suite for package
// transport's plug-in interface, SecretResolver: a host that brings its own
// resolver (a vault, a cloud secret manager, Kubernetes secrets) runs
// RunSecretResolverTests against it, as this repository runs it against
// transport.MapSecrets.
package transporttest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos/transport"
)

// Fixture secrets the suite asks a resolver to hold. Values are long and
// distinctive, so a value that leaks into an error message is found.
var fixture = []struct {
	ref   transport.SecretRef
	value string
}{
	{transport.SecretRef{Name: "payments-token", Key: "value"}, "sk-live-4f1c9a7e2b8d0c3f"},
	{transport.SecretRef{Namespace: "prod", Name: "payments", Key: "client_id"}, "client-7d3a91e0b4c2"},
	{transport.SecretRef{Namespace: "prod", Name: "payments", Key: "client_secret"}, "cs-9e8f7a6b5c4d3e2f1a0b"},
	{transport.SecretRef{Namespace: "prod", Name: "orders-basic", Key: "value"}, "svc-orders:pw-0a1b2c3d4e5f"},
}

// fixtureSecrets returns the secrets RunSecretResolverTests asks newResolver to
// hold: each reference (namespace, name and key; key "value" when the
// reference names none) with its value.
func fixtureSecrets() map[transport.SecretRef]string {
	out := make(map[transport.SecretRef]string, len(fixture))
	for _, f := range fixture {
		out[f.ref] = f.value
	}
	return out
}

// RunSecretResolverTests checks that a SecretResolver keeps the contract
// transport relies on. newResolver returns a resolver holding exactly the
// given secrets (each reference, key "value" when it names none, with its
// value); it is called once per subtest.
//
// The resolver must:
//   - resolve every held reference to its value;
//   - report a reference it does not hold (another name, namespace or key)
//     with an error matching transport.ErrSecretNotFound (errors.Is) and an
//     empty value;
//   - never put a secret value in an error's text;
//   - honour its context: with ctx done it returns an error matching
//     ctx's error and no value;
//   - be safe for concurrent use.
func RunSecretResolverTests(t *testing.T, newResolver func(t *testing.T, secrets map[transport.SecretRef]string) transport.SecretResolver) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			for _, p := range c.run(newResolver(t, fixtureSecrets())) {
				t.Error(p)
			}
		})
	}
}

// checks are the suite's subtests; each returns what the resolver got
// wrong (nothing when it keeps the promise).
var checks = []struct {
	name string
	run  func(r transport.SecretResolver) []string
}{
	{"ResolvesHeldReferences", resolvesHeld},
	{"UnknownReferenceIsErrSecretNotFound", unknownIsNotFound},
	{"ErrorsNeverCarryASecret", errorsCarryNoSecret},
	{"HonoursContext", honoursContext},
	{"ConcurrentUse", concurrentUse},
}

func resolvesHeld(r transport.SecretResolver) (problems []string) {
	for _, f := range fixture {
		got, err := r.Resolve(context.Background(), f.ref)
		if err != nil || got != f.value {
			problems = append(problems, fmt.Sprintf("Resolve(%s) = %q, %s; want the held value", f.ref, redactAll(got), scrubbed(err)))
		}
	}
	return problems
}

func unknownIsNotFound(r transport.SecretResolver) (problems []string) {
	for _, ref := range []transport.SecretRef{
		{Name: "no-such-secret", Key: "value"},
		{Namespace: "staging", Name: "payments", Key: "client_secret"}, // held in another namespace
		{Namespace: "prod", Name: "payments", Key: "private_key"},      // another key of a held secret
		{Name: "payments-token", Key: "client_id"},
	} {
		got, err := r.Resolve(context.Background(), ref)
		if !errors.Is(err, transport.ErrSecretNotFound) || got != "" {
			problems = append(problems, fmt.Sprintf("Resolve(%s) = %q, %s; want \"\" and an error matching transport.ErrSecretNotFound", ref, redactAll(got), scrubbed(err)))
		}
	}
	return problems
}

func errorsCarryNoSecret(r transport.SecretResolver) (problems []string) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, f := range fixture {
		// A reference next to a held one, another missing one, and a held
		// one under a done context: all fail, and no failure may echo a
		// value.
		near := f.ref
		near.Key += "-missing"
		for _, try := range []struct {
			ctx context.Context
			ref transport.SecretRef
		}{{context.Background(), near}, {context.Background(), transport.SecretRef{Name: "no-such-secret", Key: "value"}}, {canceled, f.ref}} {
			if _, err := r.Resolve(try.ctx, try.ref); err != nil && redactAll(err.Error()) != err.Error() {
				problems = append(problems, fmt.Sprintf("Resolve(%s): the error text holds a secret value: %s", try.ref, scrubbed(err)))
			}
		}
	}
	return problems
}

func honoursContext(r transport.SecretResolver) (problems []string) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := r.Resolve(canceled, fixture[0].ref); !errors.Is(err, context.Canceled) || got != "" {
		problems = append(problems, fmt.Sprintf("Resolve with a canceled context = %q, %s; want \"\" and an error matching context.Canceled", redactAll(got), scrubbed(err)))
	}
	expired, cancel2 := context.WithTimeout(context.Background(), 0)
	defer cancel2()
	<-expired.Done()
	if got, err := r.Resolve(expired, fixture[0].ref); !errors.Is(err, context.DeadlineExceeded) || got != "" {
		problems = append(problems, fmt.Sprintf("Resolve with an expired context = %q, %s; want \"\" and an error matching context.DeadlineExceeded", redactAll(got), scrubbed(err)))
	}
	return problems
}

// concurrentUse resolves held and missing references from many goroutines
// at once (run it with -race to catch a data race).
func concurrentUse(r transport.SecretResolver) (problems []string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	missing := transport.SecretRef{Name: "missing", Key: "value"}
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				f := fixture[(g+i)%len(fixture)]
				got, err := r.Resolve(context.Background(), f.ref)
				_, errMissing := r.Resolve(context.Background(), missing)
				if err != nil || got != f.value || !errors.Is(errMissing, transport.ErrSecretNotFound) {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("concurrent Resolve(%s) = %q, %s and Resolve(%s): %s; want the held value and ErrSecretNotFound",
						f.ref, redactAll(got), scrubbed(err), missing, scrubbed(errMissing)))
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return problems
}

// scrubbed is err's text without fixture values, for failure messages.
func scrubbed(err error) string {
	if err == nil {
		return "<nil>"
	}
	return redactAll(err.Error())
}

func redactAll(s string) string {
	for _, f := range fixture {
		s = strings.ReplaceAll(s, f.value, "[REDACTED]")
	}
	return s
}
