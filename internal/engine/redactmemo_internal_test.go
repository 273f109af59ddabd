package engine

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/sensitive"
)

// TestEvidenceRedactionMemo holds what a run's evidence source hands the
// compile, with the runtime remembering the contents it redacted last, to
// sensitive.Redact of each item: the same list again, a secret added to
// one item, the secret gone, a shorter list, a longer one, items in
// another order, and none. The source's own list is never written.
func TestEvidenceRedactionMemo(t *testing.T) {
	t.Parallel()
	const secret = "sk-proj-hr4redactmemosecret0001"
	item := func(ref, content string) compiler.EvidenceItem {
		return compiler.EvidenceItem{EvidenceRef: ref, Kind: "note", Content: content, Trust: compiler.Trusted}
	}
	a, b, c := item("kg:a", "refund window is 30 days"), item("kg:b", "ops note: api_key="+secret), item("kg:c", "orders ship in 2 days")
	plain := item("kg:b", "ops note: nothing here")
	lists := [][]compiler.EvidenceItem{
		{a, plain, c}, {a, plain, c}, {a, b, c}, {a, b, c}, {a, plain, c}, {a}, {a, b, c, b}, {c, b, a}, nil, {a, b, c},
	}
	rt := &Runtime{}
	for i, list := range lists {
		orig := slices.Clone(list)
		p := &pins{rt: rt, runID: "run_memo"}
		got, err := pinnedEvidence{p, compiler.StaticEvidence(list)}.Evidence(context.Background(), compiler.EvidenceQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(list, orig) {
			t.Fatalf("list %d: the source's list was written", i)
		}
		if len(got) != len(list) {
			t.Fatalf("list %d: %d items, want %d", i, len(got), len(list))
		}
		for j := range got {
			want, _ := sensitive.Redact(list[j].Content, sensitive.Secrets)
			if got[j].Content != want {
				t.Fatalf("list %d item %d: %q, want %q", i, j, got[j].Content, want)
			}
		}
		if !slices.Equal(p.fetched(), got) {
			t.Fatalf("list %d: pinned %v, handed %v", i, p.fetched(), got)
		}
	}
}

// Runs retrieving at once share the memo (run with -race): each gets its
// own list's redaction.
func TestEvidenceRedactionMemoConcurrent(t *testing.T) {
	t.Parallel()
	rt := &Runtime{}
	lists := [][]compiler.EvidenceItem{
		{{EvidenceRef: "a", Content: "token=sk-proj-hr4redactmemoconc0001"}, {EvidenceRef: "b", Content: "plain"}},
		{{EvidenceRef: "a", Content: "plain a"}, {EvidenceRef: "b", Content: "password: hunter2hunter2"}},
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for k := range 100 {
				list := lists[(g+k)%2]
				got, err := pinnedEvidence{&pins{rt: rt}, compiler.StaticEvidence(list)}.Evidence(context.Background(), compiler.EvidenceQuery{})
				if err != nil {
					t.Error(err)
					return
				}
				for j := range got {
					if want, _ := sensitive.Redact(list[j].Content, sensitive.Secrets); got[j].Content != want {
						t.Errorf("%q, want %q", got[j].Content, want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// sharedSource returns its own list (not a copy) at every call, as a host's
// source may.
type sharedSource []compiler.EvidenceItem

func (s sharedSource) Evidence(context.Context, compiler.EvidenceQuery) ([]compiler.EvidenceItem, error) {
	return s, nil
}

// TestPinnedEvidenceIsTheRuns: what a run pins of its compile's evidence
// is never a source's own list, which the source may change later; the
// list the module's static source returns (a fresh copy every call) is
// pinned as it is handed to the compile, without another copy.
func TestPinnedEvidenceIsTheRuns(t *testing.T) {
	t.Parallel()
	list := []compiler.EvidenceItem{{EvidenceRef: "kg:a", Kind: "note", Content: "refund window is 30 days", Trust: compiler.Trusted}}
	rt := &Runtime{}
	p := &pins{rt: rt, runID: "run_pin"}
	if _, err := (pinnedEvidence{p, sharedSource(list)}).Evidence(context.Background(), compiler.EvidenceQuery{}); err != nil {
		t.Fatal(err)
	}
	list[0].Content = "edited by the source"
	if got := p.fetched(); got[0].Content != "refund window is 30 days" {
		t.Fatalf("the source's later edit reached the run's pinned evidence: %q", got[0].Content)
	}
	p = &pins{rt: rt, runID: "run_static"}
	got, err := pinnedEvidence{p, compiler.StaticEvidence(list)}.Evidence(context.Background(), compiler.EvidenceQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if pin := p.fetched(); &pin[0] != &got[0] || &got[0] == &list[0] || cap(pin) != len(pin) {
		t.Fatal("the static source's copy was copied again to be pinned (or is the source's own list)")
	}
}

// TestPinsSourcesMadeOnce: a run's wrapped sources are made at the first
// call and the same ones are handed out after (a compile's Prepared
// points at them), wrapping the runtime's sources (the module's empty
// ones when it has none) and pinning into the run's own pins.
func TestPinsSourcesMadeOnce(t *testing.T) {
	t.Parallel()
	list := compiler.StaticEvidence{{EvidenceRef: "kg:a", Kind: "note", Content: "c", Trust: compiler.Trusted}}
	for _, rt := range []*Runtime{{}, {opts: Options{Evidence: list}}} {
		p := &pins{rt: rt, runID: "run_src"}
		ev, mem := p.sources()
		ev2, mem2 := p.sources()
		if ev != ev2 || mem != mem2 {
			t.Fatal("the run's sources were made again")
		}
		pe, ok := ev.(*pinnedEvidence)
		if !ok || pe.p != p {
			t.Fatalf("evidence source %T does not pin into the run's pins", ev)
		}
		if pm, ok := mem.(*pinnedMemory); !ok || pm.p != p {
			t.Fatalf("memory %T does not pin into the run's pins", mem)
		}
		got, err := ev.Evidence(context.Background(), compiler.EvidenceQuery{})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if rt.opts.Evidence != nil {
			want = len(list)
		}
		if len(got) != want || len(p.fetched()) != want {
			t.Fatalf("fetched %d items, pinned %d", len(got), len(p.fetched()))
		}
	}
}
