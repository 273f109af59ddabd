package pack_test

import (
	"encoding/json"
	"testing"

	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
)

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	return fixture.Read(t, name)
}

// canonical returns a fresh copy of the seed's full example pack.
func canonical(t testing.TB) *pack.Pack {
	t.Helper()
	p, err := pack.Decode(readFile(t, "ctxpack.support-1.0.0.json"))
	if err != nil {
		t.Fatalf("canonical pack does not decode: %v", err)
	}
	return p
}

func mutated(t testing.TB, f func(p *pack.Pack)) *pack.Pack {
	t.Helper()
	p := canonical(t)
	f(p)
	return p
}

func problems(t *testing.T, err error) []pack.Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	ve, ok := err.(*pack.ValidationError)
	if !ok {
		t.Fatalf("error %v is not a *pack.ValidationError", err)
	}
	return ve.Problems
}

func ptr[T any](v T) *T { return &v }

func rawJSON(s string) json.RawMessage { return json.RawMessage(s) }
