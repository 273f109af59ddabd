package main

import (
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/contextos/contextos/pack"
)

// overlayFlag is --overlay FILE (repeatable): the declared environment
// overlays of the run's environment. Each applies to the pack its base
// names and is recorded in the compiled context's ledger; one that names
// none of the given packs is refused (a typo would otherwise run without
// it), as are two for the same pack.
type overlayFlag struct{ files multiFlag }

func (o *overlayFlag) register(fs *flag.FlagSet) {
	fs.Var(&o.files, "overlay", "environment overlay `FILE` applied to the pack its base names (repeatable, one per pack)")
}

// load reads and decodes the overlays against the refs of the given
// packs. A file that cannot be read is a usage error (usage true); an
// overlay that does not decode or names no given pack is invalid input.
func (o *overlayFlag) load(stdin io.Reader, packs []*pack.Pack) (out []*pack.Overlay, usage bool, err error) {
	var refs []string
	for _, p := range packs {
		if r, err := p.Ref(); err == nil {
			refs = append(refs, r.String())
		}
	}
	bases := map[string]string{}
	for _, name := range o.files {
		data, err := readInput(name, stdin)
		if err != nil {
			return nil, true, err
		}
		ov, err := pack.DecodeOverlay(data)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", name, err)
		}
		if !slices.Contains(refs, ov.Base) {
			return nil, false, fmt.Errorf("%s: overlay %.80q is for %.80q, which is not one of the packs given (%v)", name, ov.OverlayID, ov.Base, refs)
		}
		if prev, dup := bases[ov.Base]; dup {
			return nil, false, fmt.Errorf("%s: overlays %q and %q both apply to %s: a run is in one environment", name, prev, ov.OverlayID, ov.Base)
		}
		bases[ov.Base] = ov.OverlayID
		out = append(out, ov)
	}
	return out, false, nil
}
