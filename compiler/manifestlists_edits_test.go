package compiler_test

import (
	"slices"
	"testing"

	"github.com/contextos/contextos/compiler"
)

// TestToolManifestCapabilitiesAreTheirOwn holds the tool manifest's
// capability lists, cut from one array, to lists of their own: a caller
// appending to one entry's list or editing it changes no other entry's,
// the ledger's tools, or the next compile's (from the same Prepared).
func TestToolManifestCapabilitiesAreTheirOwn(t *testing.T) {
	s := canonicalScenario(t)
	p, err := compiler.Prepare(s.inputs(), &s.opts)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := p.Compile(ctx, s.req, s.rc)
	if err != nil {
		t.Fatal(err)
	}
	m := cc.Manifests.ToolManifest
	if len(m) < 2 {
		t.Fatalf("tool manifest = %+v, want several entries", m)
	}
	want := make([][]string, len(m))
	for i, e := range m {
		if cap(e.Capabilities) != len(e.Capabilities) {
			t.Fatalf("entry %d: capabilities have room past their end (%d of %d)", i, len(e.Capabilities), cap(e.Capabilities))
		}
		want[i] = slices.Clone(e.Capabilities)
	}
	tools := slices.Clone(cc.ContextLedger.Tools)
	for i := range m {
		m[i].Capabilities = append(m[i].Capabilities, "appended")
	}
	for i := range m {
		if got := m[i].Capabilities; !slices.Equal(got[:len(got)-1], want[i]) || got[len(got)-1] != "appended" {
			t.Fatalf("entry %d: capabilities = %v after appends to every entry, want %v and the append", i, got, want[i])
		}
		m[i].Capabilities[0] = "edited"
	}
	if !slices.Equal(cc.ContextLedger.Tools, tools) {
		t.Fatalf("ledger tools = %v after edits of the manifest, want %v", cc.ContextLedger.Tools, tools)
	}
	again, err := p.Compile(ctx, s.req, s.rc)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range again.Manifests.ToolManifest {
		if !slices.Equal(e.Capabilities, want[i]) {
			t.Fatalf("next compile, entry %d: capabilities = %v, want %v", i, e.Capabilities, want[i])
		}
	}
}
