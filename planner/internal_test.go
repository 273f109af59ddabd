package planner

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/contextos/contextos"
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

func TestDecisionToolKeys(t *testing.T) {
	t.Parallel()
	type schema struct {
		Properties map[string]struct {
			Type string   `json:"type"`
			Enum []string `json:"enum"`
		} `json:"properties"`
		Required             []string `json:"required"`
		AdditionalProperties bool     `json:"additionalProperties"`
		OneOf                any      `json:"oneOf"`
	}
	for _, tc := range []struct {
		name              string
		decisions         []contextos.DecisionOption
		keys, outcomes    string
		descriptionSuffix string
	}{
		{"none: free strings", nil, "[]", "[]", "complete."},
		{"one key", []contextos.DecisionOption{{DecisionKey: "k", AllowedOutcomes: []string{"approved", "denied"}}}, "[k]", "[approved denied]", "complete."},
		{"several keys: the union, each key's outcomes described", []contextos.DecisionOption{
			{DecisionKey: "a", AllowedOutcomes: []string{"approved", "denied"}},
			{DecisionKey: "b", AllowedOutcomes: []string{"denied", "escalated"}}},
			"[a b]", "[approved denied escalated]", "Outcomes allowed per decision key: a: approved, denied; b: denied, escalated."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tool := decisionTool(tc.decisions)
			var s schema
			if err := json.Unmarshal(tool.Parameters, &s); err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(s.Properties["decision_key"].Enum); got != tc.keys {
				t.Errorf("keys %s, want %s", got, tc.keys)
			}
			if got := fmt.Sprint(s.Properties["outcome"].Enum); got != tc.outcomes {
				t.Errorf("outcomes %s, want %s", got, tc.outcomes)
			}
			if s.OneOf != nil || s.AdditionalProperties || fmt.Sprint(s.Required) != "[decision_key outcome rationale]" ||
				s.Properties["confidence"].Type != "number" || s.Properties["evidence_refs"].Type != "array" || s.Properties["subject_ids"].Type != "array" || s.Properties["outputs"].Type != "object" {
				t.Errorf("parameters %s", tool.Parameters)
			}
			if !strings.HasSuffix(tool.Description, tc.descriptionSuffix) {
				t.Errorf("description %q", tool.Description)
			}
		})
	}
}
