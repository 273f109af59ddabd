package pack

import (
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/packrules"
)

// designatesByScan is the definition designates indexes: the first
// adapter id in byte order whose noun and "_" begin the name.
func designatesByScan(ids []string, name string) (string, string, bool) {
	ids = slices.Sorted(slices.Values(ids))
	for _, id := range ids {
		noun := packrules.AdapterNoun(id)
		if noun != "" && strings.HasPrefix(name, noun+"_") {
			return id, strings.TrimPrefix(name, noun+"_"), true
		}
	}
	return "", "", false
}

func TestDesignatesMatchesScan(t *testing.T) {
	ids := []string{"adp_orders", "adp_order", "adp_order_items", "adp_order_item", "adp_b", "adp_a_b", "adp_a", "adp_s", "adp_", "zz_x", "adp_crm_s"}
	p := &Pack{}
	for _, id := range ids {
		p.ToolingLayer.AdapterRegistry = append(p.ToolingLayer.AdapterRegistry, Adapter{AdapterID: id})
	}
	v := newValidator(p)
	for _, name := range []string{
		"order_lookup", "order_item_lookup", "order_items_lookup", "orders_lookup", "a_b_c", "b_c", "a_c", "s_x",
		"_x", "zz_x_y", "crm_s_read", "crm_read", "order_", "order", "", "_", "__", "unknown_read", "policy_eval",
	} {
		wa, wc, wok := designatesByScan(ids, name)
		a, c, ok := v.designates(name)
		if a != wa || c != wc || ok != wok {
			t.Errorf("designates(%q) = %q, %q, %v; the scan gives %q, %q, %v", name, a, c, ok, wa, wc, wok)
		}
	}
}
