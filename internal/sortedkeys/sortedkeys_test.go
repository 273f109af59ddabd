package sortedkeys

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		m    map[string]int
		want []string
	}{
		{"nil", nil, []string{}},
		{"one", map[string]int{"a": 1}, []string{"a"}},
		{"bytewise order", map[string]int{"b": 1, "a": 2, "B": 3, "ä": 4, "a0": 5}, []string{"B", "a", "a0", "b", "ä"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Of(tc.m)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Of(%v) (-want +got):\n%s", tc.m, d)
			}
			if cap(got) != len(tc.m) {
				t.Errorf("Of(%v) has capacity %d, want %d (one allocation at the final size)", tc.m, cap(got), len(tc.m))
			}
		})
	}
}

func BenchmarkOf(b *testing.B) {
	m := map[string]int{"adp_orders": 1, "adp_payments": 2, "adp_policy": 3, "adp_crm": 4, "adp_kb": 5}
	b.ReportAllocs()
	for b.Loop() {
		_ = Of(m)
	}
}
