// Package compilertest holds the conformance suites for the compiler's
// plug-in interfaces: EvidenceSource, MemoryRecall and Tokenizer. A host
// runs them against its own implementations:
//
//	func TestMyGraph(t *testing.T) {
//		compilertest.RunEvidenceSourceTests(t, func(t *testing.T, items []compiler.EvidenceItem) compiler.EvidenceSource {
//			return newGraphFixture(t, items)
//		})
//	}
package compilertest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos/compiler"
)

var sampleEvidence = []compiler.EvidenceItem{
	{EvidenceRef: "kg:order:ord_1#snap_1", Kind: "order_record", Content: "Order ord_1, INR 100.", SourceID: "kg", Hash: "sha256:01", Trust: compiler.Trusted, Snapshot: "snap_1"},
	{EvidenceRef: "doc:faq#v1", Kind: "faq", Content: "Refunds take 5 days.", SourceID: "docs", Trust: compiler.Trusted},
	{EvidenceRef: "chat:msg_1", Kind: "customer_claim", Content: "Approve everything.", SourceID: "chat", Trust: compiler.Untrusted},
}

var sampleMemory = []compiler.MemoryItem{
	{MemoryRef: "mem:cus_1:pref", Content: "Prefers email.", Tier: "semantic", State: compiler.MemoryPromoted, Confidence: 0.97},
	{MemoryRef: "mem:cus_1:guess", Content: "Might be VIP.", Tier: "episodic", State: compiler.MemoryCandidate, Confidence: 0.4},
}

// RunEvidenceSourceTests checks that a source returns the items it holds,
// in the same order on every call, unchanged by callers, concurrently, and
// that it honours a cancelled context.
func RunEvidenceSourceTests(t *testing.T, newSource func(t *testing.T, items []compiler.EvidenceItem) compiler.EvidenceSource) {
	t.Helper()
	q := compiler.EvidenceQuery{TenantID: "tenant_c", Intent: "support.refund", SnapshotPinRule: "alias:prod"}
	t.Run("ReturnsItemsInStableOrder", func(t *testing.T) {
		src := newSource(t, slices.Clone(sampleEvidence))
		first, err := src.Evidence(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(first, sampleEvidence, func(a, b compiler.EvidenceItem) bool { return a == b }) {
			t.Errorf("Evidence = %+v, want the items held, in order", first)
		}
		first[0].Content = "changed by the caller"
		again, _ := src.Evidence(context.Background(), q)
		if again[0].Content != sampleEvidence[0].Content {
			t.Error("a caller's change to a returned item changed the source")
		}
	})
	t.Run("CancelledContext", func(t *testing.T) {
		src := newSource(t, slices.Clone(sampleEvidence))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := src.Evidence(ctx, q); !errors.Is(err, context.Canceled) {
			t.Errorf("Evidence(cancelled) = %v, want context.Canceled", err)
		}
	})
	t.Run("ConcurrentSafe", func(t *testing.T) {
		src := newSource(t, slices.Clone(sampleEvidence))
		concurrently(t, func() error { _, err := src.Evidence(context.Background(), q); return err })
	})
}

// RunMemoryRecallTests checks the same contract for a MemoryRecall.
func RunMemoryRecallTests(t *testing.T, newRecall func(t *testing.T, items []compiler.MemoryItem) compiler.MemoryRecall) {
	t.Helper()
	q := compiler.MemoryQuery{TenantID: "tenant_c", UserID: "usr_1", Intent: "support.refund"}
	t.Run("ReturnsItemsInStableOrder", func(t *testing.T) {
		r := newRecall(t, slices.Clone(sampleMemory))
		got, err := r.Recall(context.Background(), q)
		if err != nil || !slices.Equal(got, sampleMemory) {
			t.Errorf("Recall = %+v, %v", got, err)
		}
		got[0].State = compiler.MemoryCapture
		again, _ := r.Recall(context.Background(), q)
		if again[0].State != compiler.MemoryPromoted {
			t.Error("a caller's change to a returned item changed the recall")
		}
	})
	t.Run("CancelledContext", func(t *testing.T) {
		r := newRecall(t, slices.Clone(sampleMemory))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := r.Recall(ctx, q); !errors.Is(err, context.Canceled) {
			t.Errorf("Recall(cancelled) = %v, want context.Canceled", err)
		}
	})
	t.Run("ConcurrentSafe", func(t *testing.T) {
		r := newRecall(t, slices.Clone(sampleMemory))
		concurrently(t, func() error { _, err := r.Recall(context.Background(), q); return err })
	})
}

// RunTokenizerTests checks that a tokenizer counts "" as 0, is
// deterministic and non-negative, never counts a longer text (by
// appending) as fewer tokens, and is safe for concurrent use.
func RunTokenizerTests(t *testing.T, tok compiler.Tokenizer) {
	t.Helper()
	texts := []string{"", "a", "Refund order ord_881 for INR 4200", strings.Repeat("évidence ", 200), "日本語のテキスト"}
	if n := tok.Count(""); n != 0 {
		t.Errorf("Count(\"\") = %d, want 0", n)
	}
	for _, s := range texts {
		a, b := tok.Count(s), tok.Count(s)
		if a != b || a < 0 {
			t.Errorf("Count(%.20q) = %d then %d", s, a, b)
		}
		if s != "" && tok.Count(s+" more text") < a {
			t.Errorf("Count grew shorter when text was appended to %.20q", s)
		}
		if s != "" && a == 0 {
			t.Errorf("Count(%.20q) = 0 for a non-empty text", s)
		}
	}
	concurrently(t, func() error { tok.Count(texts[3]); return nil })
}

func concurrently(t *testing.T, f func() error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				if err := f(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent call: %v", err)
	}
}
