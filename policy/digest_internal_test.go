package policy

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/internal/logic"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// A rule's data digest, written from its prepared variable order, is the
// digest of the map of the values it read (null for a missing one).
func TestDataDigestIsDigestOfReadMap(t *testing.T) {
	p, err := pack.Decode(fixture.Read(t, "ctxpack.support-1.0.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := runcontext.DecodeInvokeRequest(fixture.Read(t, "invoke.support-refund.json"))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(fixture.Read(t, "run-context.support.json"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := Prepare(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	docs := []Document{NewDocument(req.Input, rc), {}}
	for i := range e.rules {
		pr := &e.rules[i]
		if !pr.readsOK {
			t.Fatalf("rule %s: variables refused", pr.rule.RuleID)
		}
		for _, d := range docs {
			read := map[string]any{}
			for _, v := range pr.info.Vars {
				x, _ := d.lookup(v)
				read[v] = x
			}
			want, err := canon.Digest(read)
			if err != nil {
				t.Fatal(err)
			}
			got, err := readDigest(pr, &e.paths, d)
			if err != nil || got != want {
				t.Errorf("rule %s: dataDigest = %s, %v; the map's digest is %s", pr.rule.RuleID, got, err, want)
			}
		}
	}
}

// A variable name with no canonical order of its own (invalid UTF-8,
// which a decoded expression never holds) takes the map's general path.
func TestDataDigestInvalidUTF8Name(t *testing.T) {
	pr := &prepared{info: logic.Info{Vars: []string{"user.role", "a\xff"}}}
	pr.reads, pr.readsOK = canon.NewMembers(pr.info.Vars)
	if pr.readsOK {
		t.Fatal("NewMembers accepted a name that is not valid UTF-8")
	}
	tree := &pathTree{}
	pr.vars = newVarReads(pr.info.Vars, pr.info, nil, nil, tree)
	d := Document{"user": map[string]any{"role": "agent"}}
	want, err := canon.Digest(map[string]any{"user.role": "agent", "a\xff": nil})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readDigest(pr, tree, d); err != nil || got != want {
		t.Errorf("dataDigest = %s, %v; want %s", got, err, want)
	}
}

// readDigest reads pr's variables (their nodes in tree) from d, as an evaluation does, and
// returns their digest.
func readDigest(pr *prepared, tree *pathTree, d Document) (string, error) {
	var b varBufs
	m := pathMemo{tree: tree, doc: d}
	rv := pr.vars.read(&m, &b)
	digest, err := pr.appendDataDigest(nil, &rv)
	return string(digest), err
}

// A path split once at Prepare finds what the dotted path finds, and both
// find what the JsonLogic evaluator's var finds, for any path: empty
// segments, a trailing dot, array indexes in every spelling. A value the
// checks and the digest read that the expression does not see would let
// a gate pass its checks and never hold.
func FuzzLookupSegsMatchesLookup(f *testing.F) {
	for _, p := range []string{"", ".", "a", "a.", ".a", "a..b", "a.b.0", "a.b.01", "a.b.+1", "a.b.-1", "a.b.2", "a.c", "x.y", "a.b.0.z", "a.b.1.z.", "a.b.0."} {
		f.Add(p)
	}
	d := Document{"a": map[string]any{"b": []any{"zero", map[string]any{"z": 1.0}}, "": map[string]any{"b": true}, "c": nil}, "": "empty"}
	f.Fuzz(func(t *testing.T, path string) {
		want, wok := d.lookup(path)
		got, gok := d.lookupSegs(splitPath(path))
		if wok != gok || fmt.Sprint(want) != fmt.Sprint(got) {
			t.Fatalf("path %q: lookup = %v, %v; lookupSegs = %v, %v", path, want, wok, got, gok)
		}
		// Through an evaluation's memo, among other paths sharing its
		// prefixes, read before it and again after.
		checkMemo(t, d, path, want, wok)
		expr, err := json.Marshal(map[string]any{"var": path})
		if err != nil {
			return
		}
		prog, err := logic.Compile(expr)
		if err != nil {
			return // not a path the evaluator takes (Prepare refuses it)
		}
		seen, err := prog.Eval(map[string]any(d), logic.Limits{})
		if err != nil {
			t.Fatalf("path %q: the evaluator fails: %v", path, err)
		}
		if !wok {
			want = nil
		}
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Fatalf("path %q: policy reads %v (found %v), the evaluator sees %v", path, want, wok, seen)
		}
	})
}

// checkMemo resolves path through a pathMemo, in trees where other paths
// (sharing its prefixes or not, before it or after, remembered or past
// memoNodes) were interned and read first, and holds each to want.
func checkMemo(t *testing.T, d Document, path string, want any, wok bool) {
	t.Helper()
	others := []string{"a", "a.b", "a.b.0", "", ".", "a.", "x.y", "a.c.d"}
	var deep []string
	for i := range memoNodes + 8 {
		deep = append(deep, fmt.Sprintf("f%d", i))
	}
	for _, first := range [][]string{nil, others, deep} {
		tree := &pathTree{}
		var nodes []int32
		for _, p := range first {
			nodes = append(nodes, tree.intern(splitPath(p)))
		}
		node := tree.intern(splitPath(path))
		m := pathMemo{tree: tree, doc: d}
		for _, n := range nodes {
			m.get(n)
		}
		for range 2 {
			got, gok := m.get(node)
			if gok != wok || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("path %q after %d others: memo = %v, %v; lookup = %v, %v", path, len(first), got, gok, want, wok)
			}
		}
	}
}

// Every path the fuzz target's seeds name, and deep ones past memoNodes,
// read through one memo in turn, find what lookup finds.
func TestPathMemoMatchesLookup(t *testing.T) {
	d := Document{"a": map[string]any{"b": []any{"zero", map[string]any{"z": 1.0}}, "": map[string]any{"b": true}, "c": nil}, "": "empty"}
	paths := []string{"", ".", "a", "a.", ".a", "a..b", "a.b.0", "a.b.01", "a.b.+1", "a.b.-1", "a.b.2", "a.c", "x.y", "a.b.0.z", "a.b.1.z", "a.b.1.z.", "a.b.0."}
	for i := range memoNodes {
		paths = append(paths, fmt.Sprintf("a.b.1.n%d", i))
	}
	paths = append(paths, "a.b.1.z", "a.b.1")
	tree := &pathTree{}
	nodes := make([]int32, len(paths))
	for i, p := range paths {
		nodes[i] = tree.intern(splitPath(p))
	}
	if len(tree.nodes) <= memoNodes {
		t.Fatalf("%d nodes: none past the memo", len(tree.nodes))
	}
	m := pathMemo{tree: tree, doc: d}
	for pass := range 2 {
		for i, p := range paths {
			want, wok := d.lookup(p)
			if got, gok := m.get(nodes[i]); gok != wok || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("pass %d, path %q: memo = %v, %v; lookup = %v, %v", pass, p, got, gok, want, wok)
			}
		}
	}
}
