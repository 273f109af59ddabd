package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDump pins what the listing covers: exported declarations and
// exported methods of exported types, exported and embedded fields;
// never tests, unexported names, methods of unexported types, internal
// packages or main packages, except the exported fields and methods of an
// internal type a public alias names.
func TestDump(t *testing.T) {
	lines, idents, fields, err := dump("testdata/mod")
	if err != nil {
		t.Fatal(err)
	}
	const p = "github.com/contextos/contextos/testdata/mod"
	want := []string{
		p + "/sub: method (Generic[T]) Get() T",
		p + "/sub: type Generic struct, V T",
		p + "/sub: type Generic[T any] struct",
		p + ": const Exported = 1",
		p + ": func New(a, b string) *Record",
		p + ": method (*Record) Hash() string",
		p + ": type Alias = Record",
		p + ": type Embedded struct",
		p + ": type Embedded struct, N int",
		p + ": type Finder = hidden.Finder",
		p + ": type Finder = hidden.Finder, embeds fmt.Stringer",
		p + ": type Finder = hidden.Finder, interface method Find(id string) (Problem, error)",
		p + ": type ID string",
		p + ": type Problem = hidden.Problem",
		p + ": type Problem = hidden.Problem, field Path string",
		p + ": type Problem = hidden.Problem, method (Problem) String() string",
		p + ": type Record struct",
		p + ": type Record struct, ID string",
		p + ": type Record struct, embeds Embedded",
		p + ": type Store interface",
		p + ": type Store interface, Get(ctx context.Context, id string) (string, error)",
		p + ": var ErrX error",
	}
	if d := cmp.Diff(want, lines); d != "" {
		t.Errorf("dump (-want +got):\n%s", d)
	}
	// Exported, ErrX, Store, Record, Embedded, ID, Alias, Problem, Finder,
	// New, Hash, Generic, Get; an alias's members are not counted again.
	if idents != 13 || fields != 4 {
		t.Errorf("dump counts = %d identifiers, %d fields; want 13, 4", idents, fields)
	}
}
