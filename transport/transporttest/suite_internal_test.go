package transporttest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/transport"
)

type resolverFunc func(ctx context.Context, ref transport.SecretRef) (string, error)

func (f resolverFunc) Resolve(ctx context.Context, ref transport.SecretRef) (string, error) {
	return f(ctx, ref)
}

// held is a correct lookup in the fixture, for the broken resolvers to
// start from.
func held(ref transport.SecretRef) (string, error) {
	if v, ok := fixtureSecrets()[ref]; ok {
		return v, nil
	}
	return "", transport.ErrSecretNotFound
}

// TestChecksCatchBrokenResolvers: every check fails for a resolver that
// breaks its promise, and no other check blames a resolver for what it
// does not break, so the suite cannot pass a broken resolver.
func TestChecksCatchBrokenResolvers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		r      transport.SecretResolver
		failed []string // the checks that must report it; the others must not
	}{
		{"correct", resolverFunc(func(ctx context.Context, ref transport.SecretRef) (string, error) {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			return held(ref)
		}), nil},
		{"plain not-found error", resolverFunc(func(ctx context.Context, ref transport.SecretRef) (string, error) {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			if v, err := held(ref); err == nil {
				return v, nil
			}
			return "", errors.New("not here")
		}), []string{"UnknownReferenceIsErrSecretNotFound", "ConcurrentUse"}},
		{"echoes a secret", resolverFunc(func(ctx context.Context, ref transport.SecretRef) (string, error) {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			if v, err := held(ref); err == nil {
				return v, nil
			}
			return "", fmt.Errorf("%w: %s is not %s", transport.ErrSecretNotFound, ref, fixture[0].value)
		}), []string{"ErrorsNeverCarryASecret"}},
		{"ignores its context", resolverFunc(func(_ context.Context, ref transport.SecretRef) (string, error) {
			return held(ref)
		}), []string{"HonoursContext"}},
		{"wrong value", resolverFunc(func(ctx context.Context, ref transport.SecretRef) (string, error) {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			if _, err := held(ref); err != nil {
				return "", err
			}
			return "x", nil
		}), []string{"ResolvesHeldReferences", "ConcurrentUse"}},
		{"value with not-found", resolverFunc(func(ctx context.Context, ref transport.SecretRef) (string, error) {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			v, err := held(ref)
			if err != nil {
				return "fallback", err
			}
			return v, nil
		}), []string{"UnknownReferenceIsErrSecretNotFound"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var failed []string
			for _, chk := range checks {
				if problems := chk.run(c.r); len(problems) > 0 {
					failed = append(failed, chk.name)
					for _, p := range problems {
						if strings.Contains(p, fixture[0].value) {
							t.Errorf("%s: a problem report holds a secret: %s", chk.name, p)
						}
					}
				}
			}
			if d := cmp.Diff(c.failed, failed); d != "" {
				t.Errorf("failed checks (-want +got):\n%s", d)
			}
		})
	}
}
