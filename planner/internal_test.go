package planner

import (
	"regexp"
	"strings"
	"testing"
)

// Names no capability id with a dot maps to: the decision tool's, the
// empty name, and names taken up to the full hash.
func TestToolNameEdges(t *testing.T) {
	hashed := regexp.MustCompile(`^[a-zA-Z0-9_-]{0,55}_[0-9a-f]{8}$`)
	taken := map[string]bool{DecisionTool: true}
	for _, id := range []string{DecisionTool, "", strings.Repeat("é", 40)} {
		if got := toolName(id, taken); !hashed.MatchString(got) || taken[got] {
			t.Errorf("toolName(%q) = %q", id, got)
		}
	}
	// Every hash-suffixed candidate taken: longer hashes, then a count.
	id := "a.b"
	taken = map[string]bool{"a__b": true}
	var names []string
	for range 12 {
		n := toolName(id, taken)
		if taken[n] || len(n) > 64 || !regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`).MatchString(n) {
			t.Fatalf("toolName = %q (taken %v)", n, taken[n])
		}
		taken[n] = true
		names = append(names, n)
	}
	if !strings.HasSuffix(names[7], "_2") || len(names[0]) != len("a__b_")+8 || len(names[1]) != len("a__b_")+16 {
		t.Errorf("names %q", names)
	}
}
