package pack

import (
	"fmt"
	"github.com/contextos/contextos/internal/sortedkeys"

	"github.com/Masterminds/semver/v3"
)

// RuntimeContractVersion is the runtime contract this module implements:
// what a host declares as Host["runtime"] unless it says otherwise, and
// what packs check through contract_meta.compatibility.requires.runtime.
const RuntimeContractVersion = "1.0.0"

// Host declares what a runtime provides, for compatibility checks: a
// version per component ("runtime", "ontology", and any other key a pack
// may require).
type Host map[string]string

// CheckCompatibility checks every contract_meta.compatibility.requires
// entry against host with semantic-version constraints. A required
// component the host does not declare, a host version that does not parse
// or does not satisfy the constraint, or a constraint that does not parse
// all refuse the pack with ErrIncompatible: an old or unknown runtime fails
// closed.
func CheckCompatibility(p *Pack, host Host) error {
	reqs := p.ContractMeta.Compatibility.Requires
	if len(reqs) == 0 {
		return fmt.Errorf("%w: pack declares no compatibility.requires", ErrIncompatible)
	}
	for _, k := range sortedkeys.Of(reqs) {
		c, err := semver.NewConstraint(reqs[k])
		if err != nil {
			return fmt.Errorf("%w: requires.%s %q is not a version constraint", ErrIncompatible, k, clip(reqs[k]))
		}
		have, ok := host[k]
		if !ok {
			return fmt.Errorf("%w: pack requires %s %s but the host declares no %s version", ErrIncompatible, k, reqs[k], k)
		}
		v, err := semver.NewVersion(have)
		if err != nil {
			return fmt.Errorf("%w: host %s version %q is not a semantic version", ErrIncompatible, k, clip(have))
		}
		if !c.Check(v) {
			return fmt.Errorf("%w: pack requires %s %s, host has %s", ErrIncompatible, k, reqs[k], have)
		}
	}
	return nil
}
