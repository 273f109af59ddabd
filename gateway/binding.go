package gateway

import (
	"github.com/contextos/contextos/internal/packview"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// packBinding is what binding a run (NewRun) takes from its pack and the
// gateway alone: the pack's adapters and effective permissions, its
// unbound gates and, for each capability of its adapter registry, what a
// run binds of it. A pack is immutable once prepared
// (compiler.Prepared.Pack) and a gateway's registrations and options
// never change, so the gateway builds it once for each pack (see
// packBinding) and every run of the pack shares it, read only.
type packBinding struct {
	adapters map[string]pack.Adapter    // the adapter registry, by id
	perms    map[string]pack.Permission // packview.EffectivePermissions
	unbound  []string                   // packview.UnboundGates
	caps     map[capKey]*capBinding     // every capability of the adapter registry
}

// capKey names a capability by its adapter and its name within it (an id
// joins them with a dot, which either may hold).
type capKey struct{ adapter, capability string }

// capBinding is what a run binds of one surfaced capability besides its
// compiled metadata: everything that depends only on the pack and the
// gateway. It is read only once built.
type capBinding struct {
	id       string // "adapter_id.capability"
	spanName string
	capName  string      // the capability's name within its adapter
	reg      *registered // nil when no adapter is registered under its id
	spec     *capSpec    // nil when the adapter does not register it
	perm     pack.Permission
	// callMeta is the metadata of its call envelopes, callMetaJSON its
	// canonical JSON (see callMetadata).
	callMeta     map[string]any
	callMetaJSON []byte
	mode         runcontext.ApprovalMode // the capability's highest mode (pack.Permission.Mode)
	constraints  []argConstraint         // perm.ArgConstraints, compiled
	// injectsKey: a write's derived idempotency key is set in its args
	// (see injectsKey).
	injectsKey bool
}

// maxPackBindings bounds the pack bindings a gateway keeps: each holds
// parts of its pack, and a long-lived gateway may see many packs (a
// runtime prepares its pack sets again when its own cache of them
// fills). Past it the gateway forgets them all and builds them again on
// demand, as the runtime does its prepared packs.
const maxPackBindings = 256

// packBinding returns p's binding for g's runs, built once per pack (up
// to maxPackBindings at a time) and shared.
func (g *Gateway) packBinding(p *pack.Pack) *packBinding {
	if v, ok := g.bindings.Load(p); ok {
		return v.(*packBinding)
	}
	b := g.bindPack(p)
	g.bindingsMu.Lock()
	defer g.bindingsMu.Unlock()
	if v, loaded := g.bindings.Load(p); loaded {
		return v.(*packBinding)
	}
	if g.bindingCount >= maxPackBindings {
		g.bindings.Clear()
		g.bindingCount = 0
	}
	g.bindings.Store(p, b)
	g.bindingCount++
	return b
}

// bindPack builds packBinding.
func (g *Gateway) bindPack(p *pack.Pack) *packBinding {
	b := &packBinding{adapters: make(map[string]pack.Adapter, len(p.ToolingLayer.AdapterRegistry))}
	for _, a := range p.ToolingLayer.AdapterRegistry {
		b.adapters[a.AdapterID] = a
	}
	b.perms = packview.EffectivePermissions(p) // an explicit deny wins over any allow
	b.unbound = packview.UnboundGates(p, b.perms)
	b.caps = map[capKey]*capBinding{}
	for _, a := range p.ToolingLayer.AdapterRegistry {
		for _, c := range a.Capabilities {
			// A capability whose binding does not build is bound (and its
			// error returned) by the runs that surface it, as before.
			if cb, err := g.bindCapability(b, a.AdapterID, c); err == nil {
				b.caps[capKey{a.AdapterID, c}] = cb
			}
		}
	}
	return b
}

// bindCapability builds the binding of adapter's capability c under b.
func (g *Gateway) bindCapability(b *packBinding, adapter, c string) (*capBinding, error) {
	id := adapter + "." + c
	perm := b.perms[id]
	cb := &capBinding{id: id, spanName: "execute_tool " + id, capName: c, reg: g.adapters[adapter], perm: perm, mode: perm.Mode(b.adapters[adapter]),
		constraints: compileConstraints(perm.ArgConstraints)}
	if cb.reg != nil {
		cb.spec = cb.reg.caps[c]
	}
	if cb.spec != nil {
		cb.injectsKey = injectsKey(cb.spec.schema, cb.constraints)
	}
	var err error
	if cb.callMeta, cb.callMetaJSON, err = g.callMetadata(cb); err != nil {
		return nil, err
	}
	return cb, nil
}

// capBinding returns the binding of adapter's capability c: b's own, or,
// for a capability b does not hold (a compiled context that is not its
// pack's compile may surface any), one built for the run.
func (g *Gateway) capBinding(b *packBinding, adapter, c string) (*capBinding, error) {
	if cb := b.caps[capKey{adapter, c}]; cb != nil {
		return cb, nil
	}
	return g.bindCapability(b, adapter, c)
}
