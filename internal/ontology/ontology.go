// Package ontology parses the ontology versions a host declares,
// "namespace@version" with a semantic version, for the compiler's stage-4
// ontology check and the runtime's compatibility facts.
package ontology

import (
	"errors"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// ErrOntology is compiler.ErrOntology: a declared ontology that does not
// parse, or a pack's ontology version the host does not declare.
var ErrOntology = errors.New("compiler: ontology version not declared by the host")

// Parse parses a declared ontology, "namespace@version", with a semantic
// version (1.10.0 is later than 1.9.0). An error matches ErrOntology.
func Parse(s string) (namespace string, version *semver.Version, err error) {
	ns, v, ok := strings.Cut(s, "@")
	if !ok || ns == "" || strings.ContainsAny(ns, "@ \t\r\n") {
		return "", nil, fmt.Errorf("%w: %.80q is not namespace@version", ErrOntology, s)
	}
	ver, err := semver.StrictNewVersion(v)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %.80q: version %.40q is not a semantic version", ErrOntology, s, v)
	}
	return ns, ver, nil
}

// Highest returns the highest declared ontology version, compared as
// semantic versions ("" when none parses): the version a runtime declares
// for packs' compatibility.requires.ontology.
func Highest(declared []string) string {
	var best *semver.Version
	for _, d := range declared {
		if _, v, err := Parse(d); err == nil && (best == nil || v.GreaterThan(best)) {
			best = v
		}
	}
	if best == nil {
		return ""
	}
	return best.Original()
}
