package decision_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/decision/decisiontest"
	"github.com/contextos/contextos/internal/canon"
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

// A record an earlier release stored that no longer decodes (a token
// count of 2^63−1) is named, and every other record still reads, in
// memory and in the file store (written as that release wrote it, then
// sealed by an operator's repair and opened again).
func TestMemoryStoreUnreadable(t *testing.T) {
	decisiontest.RunUnreadableTests(t, func(_ *testing.T, stored [][]byte) decision.Store {
		return decision.MemoryStoreHolding(stored)
	})
}

func TestFileStoreUnreadable(t *testing.T) {
	decisiontest.RunUnreadableTests(t, func(t *testing.T, stored [][]byte) decision.Store {
		path := filepath.Join(t.TempDir(), "records.jsonl")
		if len(stored) > 0 {
			var log []byte
			for _, b := range stored {
				log = append(append(log, b...), '\n')
			}
			if err := os.WriteFile(path, log, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := decision.RepairFileStore(path, &decision.RepairOptions{SealUnsealed: true}); err != nil {
				t.Fatalf("RepairFileStore of a log with an unreadable record: %v", err)
			}
		}
		s, err := decision.OpenFileStore(path, nil)
		if err != nil {
			t.Fatalf("OpenFileStore of a log with an unreadable record: %v", err)
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
		if _, err := s.Append(ctx, decisiontest.Sample(id, decision.Decided)); err != nil {
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
	r, err := s.Append(ctx, decisiontest.Sample("dr_4", decision.Closed))
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

// replay.record_hash is the one member record_hash does not cover (it
// copies it): a stored copy that differs from record_hash is caught by
// chain verification all the same, as is an edited packet id, which
// record_hash covers. Each edit leaves the line in canonical form.
func TestFileStoreReplayHandleTamperDetected(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	s, err := decision.OpenFileStore(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"dr_1", "dr_2"} {
		r := decisiontest.Sample(id, decision.Decided)
		r.SetReplayPacketID("rp_" + id)
		stored, err := s.Append(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Replay.RecordHash != stored.RecordHash {
			t.Fatalf("replay.record_hash %q, record_hash %q", stored.Replay.RecordHash, stored.RecordHash)
		}
	}
	s.Close()
	clean, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(clean, []byte("\n"))
	for _, tc := range []struct {
		name   string
		edit   func(r *decision.Record)
		reason string
	}{
		{"replay.record_hash", func(r *decision.Record) { r.Replay.RecordHash = "sha256:" + strings.Repeat("0", 64) }, "replay.record_hash is not the record's record_hash"},
		{"replay.replay_packet_id", func(r *decision.Record) { r.Replay.ReplayPacketID = "rp_dr_9" }, "record_hash does not match the record"},
		{"lineage.replay_packet_id", func(r *decision.Record) { r.Lineage.ReplayPacketID = "rp_dr_9" }, "record_hash does not match the record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r decision.Record
			if err := json.Unmarshal(lines[0], &r); err != nil {
				t.Fatal(err)
			}
			tc.edit(&r)
			line, err := canon.JSON(&r)
			if err != nil {
				t.Fatal(err)
			}
			tampered := slices.Concat(line, []byte("\n"), lines[1])
			if err := os.WriteFile(path, tampered, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = decision.OpenFileStore(path, nil)
			var ce *decision.ChainError
			if !errors.As(err, &ce) || ce.Index != 0 || ce.Reason != tc.reason {
				t.Errorf("OpenFileStore = %v, want a *ChainError at record 0: %s", err, tc.reason)
			}
		})
	}
}

// Verify reads the in-memory chain a page at a time: a broken link on
// either side of a page's end, or past the first page, is named at its
// index.
func TestMemoryStoreVerifyPastAPage(t *testing.T) {
	const n = 700
	chain := func() [][]byte {
		var out [][]byte
		prev := decision.GenesisHash
		for i := range n {
			c, b, err := decision.Seal(decisiontest.Sample(fmt.Sprintf("dr_%04d", i), decision.Decided), prev)
			if err != nil {
				t.Fatal(err)
			}
			out, prev = append(out, b), c.RecordHash
		}
		return out
	}
	if err := decision.MemoryStoreHolding(chain()).Verify(ctx); err != nil {
		t.Fatalf("Verify of an untouched chain of %d: %v", n, err)
	}
	for _, at := range []int{255, 256, 600, n - 1} {
		stored := chain()
		stored[at] = bytes.Replace(stored[at], []byte(`"refund_amount_inr":4200`), []byte(`"refund_amount_inr":4201`), 1)
		var ce *decision.ChainError
		if err := decision.MemoryStoreHolding(stored).Verify(ctx); !errors.As(err, &ce) || ce.Index != at {
			t.Errorf("Verify with record %d edited = %v, want a *ChainError at %d", at, err, at)
		}
	}
	stored := append(chain()[:500:500], decisiontest.UnreadableChain(t)...)
	// The unreadable chain starts from the genesis hash: it breaks at 500.
	var ce *decision.ChainError
	if err := decision.MemoryStoreHolding(stored).Verify(ctx); !errors.As(err, &ce) || ce.Index != 500 {
		t.Errorf("Verify of a chain restarted at 500 = %v, want a *ChainError at 500", err)
	}
}
