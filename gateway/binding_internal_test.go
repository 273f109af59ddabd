package gateway

import (
	"context"
	"sync"
	"testing"

	"github.com/contextos/contextos/pack"
)

// A gateway builds a pack's binding once and shares it; it keeps at most
// maxPackBindings of them, forgetting them all when it would keep more,
// and builds a forgotten one again on demand. Concurrent runs of one pack
// share one binding.
func TestPackBindingsAreBounded(t *testing.T) {
	t.Parallel()
	g, err := New([]Registration{{AdapterID: "adp_orders", Adapter: AdapterFunc(func(context.Context, *Call) (*Outcome, error) { return &Outcome{}, nil }),
		Capabilities: map[string]Capability{"lookup": {}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	newPack := func() *pack.Pack {
		p := &pack.Pack{}
		p.ToolingLayer.AdapterRegistry = []pack.Adapter{{AdapterID: "adp_orders", Capabilities: []string{"lookup"}, ApprovalMode: "read_only"}}
		p.ToolingLayer.Permissions = []pack.Permission{{PermissionID: "p", AdapterID: "adp_orders", Capability: "lookup", Allow: true}}
		return p
	}
	first := newPack()
	var wg sync.WaitGroup
	got := make([]*packBinding, 8)
	for i := range got {
		wg.Go(func() { got[i] = g.packBinding(first) })
	}
	wg.Wait()
	for _, b := range got {
		if b != got[0] {
			t.Fatal("concurrent runs of one pack got different bindings")
		}
	}
	if cb := got[0].caps[capKey{"adp_orders", "lookup"}]; cb == nil || cb.id != "adp_orders.lookup" || cb.reg == nil || cb.spec == nil || cb.perm.PermissionID != "p" {
		t.Fatalf("binding of adp_orders.lookup: %+v", cb)
	}
	for range maxPackBindings {
		g.packBinding(newPack())
	}
	g.bindingsMu.Lock()
	n := g.bindingCount
	g.bindingsMu.Unlock()
	kept := 0
	g.bindings.Range(func(any, any) bool { kept++; return true })
	if n > maxPackBindings || kept != n {
		t.Fatalf("the gateway keeps %d bindings (counts %d), at most %d", kept, n, maxPackBindings)
	}
	if _, ok := g.bindings.Load(first); ok {
		t.Fatal("the first pack's binding is still kept past the bound")
	}
	if b := g.packBinding(first); b == got[0] || b.caps[capKey{"adp_orders", "lookup"}] == nil {
		t.Fatal("a forgotten binding is not built again")
	}
}

// A capability the pack's adapter registry does not list (a compiled
// context that is not the pack's compile may surface any) is bound for
// the run, not kept.
func TestCapabilityBindingOutsideThePack(t *testing.T) {
	t.Parallel()
	g, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := g.packBinding(&pack.Pack{})
	cb, err := g.capBinding(b, "adp_x", "y")
	if err != nil || cb.id != "adp_x.y" || cb.capName != "y" || cb.spanName != "execute_tool adp_x.y" || cb.reg != nil {
		t.Fatalf("%+v %v", cb, err)
	}
	if len(b.caps) != 0 {
		t.Fatalf("the pack's binding kept %d capabilities, want 0", len(b.caps))
	}
}
