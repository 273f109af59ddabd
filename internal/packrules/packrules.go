// Package packrules holds the naming rules that pack validation and the
// packages reading a pack share, so that they agree without the rule being
// part of the public API.
package packrules

import "strings"

// AdapterNoun returns the evidence-name noun of an adapter id: the id
// without its "adp_" prefix and without a trailing plural "s"
// (adp_orders → order). An evidence name "<noun>_<capability>" designates
// that adapter's capability, as "adapter_id.capability" does.
func AdapterNoun(adapterID string) string {
	n := strings.TrimPrefix(adapterID, "adp_")
	if len(n) > 1 && strings.HasSuffix(n, "s") {
		n = n[:len(n)-1]
	}
	return n
}
