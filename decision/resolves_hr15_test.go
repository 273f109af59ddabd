package decision

import (
	"slices"
	"testing"
)

// FuzzResolvesMatchesIndex: Facts.resolves (the refs looked up where the
// facts keep them) answers as the index of every ref citations built
// before did, for refs near a tool ref ("tool:" prefixes, colons inside
// the capability or call id, a ref that is two sources at once).
func FuzzResolvesMatchesIndex(f *testing.F) {
	f.Add("a.b", "call_1", "kg:x", "policy:r1", "tool:a.b:call_1")
	f.Add("a:b", "c", "tool:a", "", "tool:a:b:c")
	f.Add("", "", "tool:", "tool::", "tool::")
	f.Fuzz(func(t *testing.T, capID, callID, ev, pol, ref string) {
		facts := &Facts{
			Admitted:    map[string]string{ev: "note", "": ""},
			ToolResults: []ToolFact{{CapabilityID: capID, ToolCallID: callID}, {CapabilityID: capID + ":" + callID, ToolCallID: ""}},
			PolicyRefs:  []string{pol},
			Artifacts:   []string{ref + "#"},
		}
		known := map[string]bool{}
		for r := range facts.Admitted {
			known[r] = true
		}
		for _, tf := range facts.ToolResults {
			known[tf.ref()] = true
		}
		for _, r := range slices.Concat(facts.PolicyRefs, facts.Artifacts) {
			known[r] = true
		}
		for _, r := range []string{ref, capID, callID, ev, pol, "tool:" + capID + ":" + callID, "tool:" + ref, ref + "#", "tool:" + capID + callID} {
			if got := facts.resolves(r); got != known[r] {
				t.Fatalf("resolves(%q) = %v, the index says %v (facts %+v)", r, got, known[r], facts)
			}
		}
	})
}
