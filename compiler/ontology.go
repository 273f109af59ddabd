package compiler

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/contextos/contextos/internal/ontology"
	"github.com/contextos/contextos/pack"
)

// checkOntology is stage 4's ontology check: the pack's ontology version
// must exist in the target environment (seed 003), that is, the host
// declares it. Versions compare as semantic versions; an error names the
// namespace and says how to declare it.
func checkOntology(ont pack.Ontology, declared []string) error {
	want, err := semver.StrictNewVersion(ont.Version)
	if err != nil {
		return fail(4, ErrOntology, nil, "the pack's ontology %s version %.40q is not a semantic version", ont.Namespace, ont.Version)
	}
	var same []string
	found := false
	for i, d := range declared {
		ns, v, err := ontology.Parse(d) // every entry, so a typo is never skipped
		if err != nil {
			return fail(4, ErrOntology, nil, "declared ontology %d %.80q is not namespace@version with a semantic version", i, d)
		}
		switch {
		case ns != ont.Namespace:
		case v.Equal(want):
			found = true
		default:
			same = append(same, v.String())
		}
	}
	if found {
		return nil
	}
	how := fmt.Sprintf("declare it with contextos.Options.Ontologies (compiler.Options.Ontologies) or --ontology %s@%s on the command line", ont.Namespace, ont.Version)
	if len(same) > 0 {
		return fail(4, ErrOntology, nil, "the pack needs ontology namespace %s at version %s; the host declares %s only at %s: %s",
			ont.Namespace, ont.Version, ont.Namespace, strings.Join(same, ", "), how)
	}
	return fail(4, ErrOntology, nil, "the pack needs ontology namespace %s at version %s; the host declares no version of %s: %s",
		ont.Namespace, ont.Version, ont.Namespace, how)
}
