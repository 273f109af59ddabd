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

// FuzzStoredRecord: whatever bytes a store holds for a record, decoding
// them never panics and fails only with an *UnreadableError naming the
// record at its index; checking them as a chain link fails only with a
// *ChainError or, for a link that holds but does not decode, an
// *UnreadableError.
func FuzzStoredRecord(f *testing.F) {
	_, good, err := Seal(&Record{RecordID: "dr_1", DecisionKey: "k", DecisionVersion: "1.0.0", Timestamp: "2026-05-04T09:31:42Z", Status: Decided, RunID: "run_1"}, GenesisHash)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"budget_usage":{"tokens":9223372036854776000},"record_id":"dr_x"}`))
	f.Add([]byte(`{"record_id":7}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeStored(b, 3)
		if err != nil {
			var ue *UnreadableError
			if !errors.As(err, &ue) || len(ue.Records) != 1 || ue.Records[0].Index != 3 || r != nil {
				t.Fatalf("DecodeStored = %v, %v", r, err)
			}
		}
		switch err := VerifyChain([][]byte{b}, GenesisHash, 0); {
		case err == nil:
		case errors.Is(err, ErrChain):
			var ce *ChainError
			if !errors.As(err, &ce) {
				t.Fatalf("chain error %v is no *ChainError", err)
			}
		case errors.Is(err, ErrUnreadable):
		default:
			t.Fatalf("VerifyChain: untyped error %v", err)
		}
	})
}
