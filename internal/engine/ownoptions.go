package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
)

// ownOptions makes o the runtime's own copy of the host's options: the
// lists and maps a runtime reads after New — for each run's compile
// preparation, gateway and replay — are copied (the adapters'
// capabilities with their scopes and argument schemas, the gateway's
// redactors, the ontologies and the overlays), so a host that edits its
// Options, or the values they hold, after New changes no control of a
// live runtime and no replay. The adapters themselves and the stores are
// the host's plug-ins and stay shared. Overlays must be non-nil.
func ownOptions(o *Options) error {
	if o.Adapters != nil {
		regs := make([]gateway.Registration, len(o.Adapters))
		for i, reg := range o.Adapters {
			if reg.Capabilities != nil {
				caps := make(map[string]gateway.Capability, len(reg.Capabilities))
				for name, c := range reg.Capabilities {
					c.Scopes, c.ArgsSchema = slices.Clone(c.Scopes), bytes.Clone(c.ArgsSchema)
					caps[name] = c
				}
				reg.Capabilities = caps
			}
			regs[i] = reg
		}
		o.Adapters = regs
	}
	o.Gateway.Redactors = maps.Clone(o.Gateway.Redactors)
	o.Ontologies = slices.Clone(o.Ontologies)
	if o.Overlays != nil {
		ovs := make([]*pack.Overlay, len(o.Overlays))
		for i, ov := range o.Overlays {
			c, err := cloneOverlay(ov)
			if err != nil {
				return fmt.Errorf("%w: Overlays[%d]: %w", ErrConfig, i, err)
			}
			ovs[i] = c
		}
		o.Overlays = ovs
	}
	return nil
}

// cloneOverlay copies ov through its JSON form. Numbers stay as written
// (json.Number), as pack.DecodeOverlay leaves them, so the copy has the
// overlay's digest.
func cloneOverlay(ov *pack.Overlay) (*pack.Overlay, error) {
	b, err := json.Marshal(ov)
	if err != nil {
		return nil, err
	}
	var c pack.Overlay
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	return &c, nil
}
