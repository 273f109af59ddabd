package decision

import "testing"

// TestToolFactIsRef holds isRef, which Build uses to skip a tool result's
// ref already cited without writing it, to comparing with ref itself:
// ids that hold the separator, empty ids, and refs that differ by one
// byte anywhere.
func TestToolFactIsRef(t *testing.T) {
	facts := []ToolFact{{"adp.cap", "tc_1"}, {"adp:cap", "tc"}, {"adp", "cap:tc"}, {"", ""}, {"a", ""}, {"", "b"}, {"é", "ü:"}}
	refs := []string{"", "tool:", "tool::", "tool:adp.cap:tc_1", "tool:adp.cap:tc_2", "tool:adp.cap;tc_1", "Tool:adp.cap:tc_1",
		"tool:adp:cap:tc", "tool:adp:cap:tcx", "tool:a:", "tool::b", "tool:é:ü:", "tool:adp.cap:tc_1 "}
	for _, f := range facts {
		refs = append(refs, f.ref())
		r := f.ref()
		for i := range len(r) {
			refs = append(refs, r[:i]+"?"+r[i+1:], r[:i])
		}
	}
	for _, f := range facts {
		for _, s := range refs {
			if got, want := f.isRef(s), s == f.ref(); got != want {
				t.Fatalf("%+v.isRef(%q) = %v, want %v", f, s, got, want)
			}
		}
	}
}
