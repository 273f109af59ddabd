package ontology_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/ontology"
	"github.com/google/go-cmp/cmp"
)

// FuzzParse: a declared ontology (host options, --ontology) is either
// refused with ErrOntology or is namespace@version with a strict semantic
// version that prints back as given; never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"ont.support@1.0.0", "ont.support@1.10.0", "ont.support", "@1.0.0", "a@b@1.0.0", "ont@v1.0.0", "ont@1.0", "ont@1.0.0-rc.1+b", "ont @1.0.0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ns, v, err := ontology.Parse(s)
		if err != nil {
			if !errors.Is(err, ontology.ErrOntology) {
				t.Fatalf("Parse(%q) = %v, not ErrOntology", s, err)
			}
			return
		}
		if ns == "" || strings.ContainsAny(ns, "@ \t\r\n") || ns+"@"+v.Original() != s || v.String() != v.Original() {
			t.Fatalf("Parse(%q) = %q, %v", s, ns, v)
		}
	})
}

// Highest compares versions as semantic versions (1.10.0 beats 1.9.0) and
// skips what does not parse.
func TestHighest(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		declared []string
		want     string
	}{
		{"semantic order", []string{"ont.support@1.9.0", "ont.support@1.10.0", "ont.support@1.2.0", "bad"}, "1.10.0"},
		{"nothing valid", []string{"bad", "ont.x@v1"}, ""},
		{"none", nil, ""},
		{"across namespaces", []string{"ont.a@2.0.0", "ont.b@1.5.0"}, "2.0.0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(c.want, ontology.Highest(c.declared)); diff != "" {
				t.Errorf("Highest (-want +got):\n%s", diff)
			}
		})
	}
}
