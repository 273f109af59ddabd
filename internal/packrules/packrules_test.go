package packrules_test

import (
	"testing"

	"github.com/contextos/contextos/internal/packrules"
	"github.com/google/go-cmp/cmp"
)

func TestAdapterNoun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ id, want string }{
		{"adp_orders", "order"},
		{"adp_payments", "payment"},
		{"adp_crm", "crm"},
		{"orders", "order"},
		{"adp_s", "s"}, // a lone "s" is not a plural
		{"adp_", ""},
		{"", ""},
	} {
		t.Run(tc.id, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, packrules.AdapterNoun(tc.id)); diff != "" {
				t.Errorf("AdapterNoun(%q) (-want +got):\n%s", tc.id, diff)
			}
		})
	}
}
