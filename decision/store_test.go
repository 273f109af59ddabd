package decision_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/decision/decisiontest"
)

var ctx = context.Background()

func TestMemoryStoreConformance(t *testing.T) {
	decisiontest.RunStoreTests(t, func(*testing.T) decision.Store { return decision.NewMemoryStore() })
}

func TestFileStoreConformance(t *testing.T) {
	decisiontest.RunStoreTests(t, func(t *testing.T) decision.Store {
		s, err := decision.OpenFileStore(filepath.Join(t.TempDir(), "records.jsonl"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// A changed byte anywhere in a stored record is caught by chain
// verification, which names the first broken record.
func TestFileStoreTamperDetected(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	s, err := decision.OpenFileStore(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"dr_1", "dr_2", "dr_3"} {
		if _, err := s.Append(ctx, decisiontest.Sample(id, "run_1", decision.Decided)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	clean, _ := os.ReadFile(path)
	second := bytes.IndexByte(clean, '\n') + 1
	for _, tc := range []struct {
		name string
		pos  int
	}{{"first record", 20}, {"second record outputs", second + bytes.Index(clean[second:], []byte("4200"))}, {"last byte of last record", len(clean) - 2}} {
		tampered := bytes.Clone(clean)
		tampered[tc.pos] ^= 0x01
		if err := os.WriteFile(path, tampered, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := decision.OpenFileStore(path, nil)
		var ce *decision.ChainError
		if !errors.As(err, &ce) || !errors.Is(err, decision.ErrChain) {
			t.Errorf("%s: OpenFileStore = %v, want a *ChainError", tc.name, err)
		}
	}
	// Every single-byte change is caught.
	for i := range clean {
		if clean[i] == '\n' {
			continue
		}
		tampered := bytes.Clone(clean)
		tampered[i] ^= 0x20
		os.WriteFile(path, tampered, 0o644)
		if _, err := decision.OpenFileStore(path, nil); err == nil {
			t.Fatalf("change at byte %d (%q→%q) not caught", i, clean[i], tampered[i])
		}
	}
	// A record appended after reopening chains onto the stored ones.
	os.WriteFile(path, clean, 0o644)
	s, err = decision.OpenFileStore(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Append(ctx, decisiontest.Sample("dr_4", "run_1", decision.Closed))
	if err != nil {
		t.Fatal(err)
	}
	prev, _ := s.Get(ctx, "dr_3")
	if r.PrevRecordHash != prev.RecordHash || s.Verify(ctx) != nil {
		t.Error("append after reopen does not chain")
	}
	s.Close()
	// A torn last line (no newline) is refused.
	os.WriteFile(path, clean[:len(clean)-1], 0o644)
	if _, err := decision.OpenFileStore(path, nil); !errors.Is(err, decision.ErrChain) {
		t.Errorf("torn record: %v", err)
	}
}
