package engine

import (
	"slices"
	"testing"
)

// A record mismatch in budget_usage names the dimension and both values.
func TestNamedDifferencesBudget(t *testing.T) {
	want := []byte(`{"budget_usage":{"tokens":10,"tool_calls":2,"wall_clock_ms":640},"outcome":"approved"}`)
	got := []byte(`{"budget_usage":{"tokens":10,"tool_calls":3,"wall_clock_ms":812},"outcome":"approved"}`)
	names := namedDifferences(want, got)
	wantNames := []string{"budget_usage (tool_calls 3, the packet has 2; wall_clock_ms 812, the packet has 640)"}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("namedDifferences = %q, want %q", names, wantNames)
	}
	if got := namedDifferences([]byte(`{"a":1,"b":2}`), []byte(`{"a":1,"b":3}`)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("namedDifferences = %q, want [b]", got)
	}
}
