package decision

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLogAndHead: whatever a record log and its head file hold, parsing
// the head and checking the log against it never panics and fails only
// with a typed error (a *LogError or a *ChainError); a log it accepts has
// as many lines as the head seals plus the ones beyond it. The seeds are
// a sealed two-record log and its head, and damaged copies.
func FuzzLogAndHead(f *testing.F) {
	path := filepath.Join(f.TempDir(), "seed.jsonl")
	s, err := OpenFileStore(path, nil)
	if err != nil {
		f.Fatal(err)
	}
	for _, id := range []string{"dr_1", "dr_2"} {
		r := &Record{RecordID: id, DecisionKey: "k", DecisionVersion: "1.0.0", Timestamp: "2026-05-04T09:31:42Z", Status: Decided, RunID: "run_1"}
		if _, err := s.Append(context.Background(), r); err != nil {
			f.Fatal(err)
		}
	}
	s.Close()
	log, _ := os.ReadFile(path)
	hb, _ := os.ReadFile(path + ".head")
	f.Add(log, hb)
	f.Add(log[:len(log)/2], hb)
	f.Add(append(log, log[:20]...), hb)
	f.Add(append(log, log...), hb)
	f.Add([]byte{}, []byte(`{"version":"contextos.decision_head.v1","records":0,"bytes":0,"last_record_hash":"x","seal":"y"}`))
	f.Fuzz(func(t *testing.T, log, hb []byte) {
		h, err := parseHead("records.jsonl", hb)
		if err != nil {
			var le *LogError
			if !errors.As(err, &le) || !errors.Is(err, ErrHead) {
				t.Fatalf("head: untyped error %v", err)
			}
			return
		}
		lines, _, extra, _, err := verifyLog("records.jsonl", log, *h)
		if err != nil {
			var le *LogError
			var ce *ChainError
			if !errors.As(err, &le) && !errors.As(err, &ce) {
				t.Fatalf("log: untyped error %v", err)
			}
			return
		}
		if len(lines) != h.Records+extra {
			t.Fatalf("%d lines for a head of %d records and %d beyond", len(lines), h.Records, extra)
		}
	})
}
