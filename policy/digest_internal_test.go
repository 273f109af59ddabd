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
			got, err := readDigest(pr, d)
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
	pr.vars = newVarReads(pr.info.Vars, pr.info, nil, nil)
	d := Document{"user": map[string]any{"role": "agent"}}
	want, err := canon.Digest(map[string]any{"user.role": "agent", "a\xff": nil})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readDigest(pr, d); err != nil || got != want {
		t.Errorf("dataDigest = %s, %v; want %s", got, err, want)
	}
}

// readDigest reads pr's variables from d, as an evaluation does, and
// returns their digest.
func readDigest(pr *prepared, d Document) (string, error) {
	var b varBufs
	rv := pr.vars.read(d, &b)
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
