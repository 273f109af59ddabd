package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/decision/decisiontest"
)

// Exec runs one SQL statement on the database directly, around the
// store: what an operator with write access (or a failing disk) does.
type Exec func(t *testing.T, query string)

// RunTamperTests checks that a durable record store's Verify finds what
// was changed behind its back: a record's bytes edited, a record removed
// from the middle, and one removed from the end of the chain. Each error
// is a *decision.ChainError naming the first broken link.
func RunTamperTests(t *testing.T, newDB func(t *testing.T) (Opener, Exec)) {
	ctx := context.Background()
	seed := func(t *testing.T) (Stores, Exec) {
		open, exec := newDB(t)
		s := open(t, Options{})
		t.Cleanup(func() { _ = s.Close() })
		for _, id := range []string{"dr_1", "dr_2", "dr_3"} {
			if _, err := s.Records().Append(ctx, decisiontest.Sample(id, decision.Decided)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Records().Verify(ctx); err != nil {
			t.Fatalf("Verify of an untouched store = %v", err)
		}
		return s, exec
	}
	for _, tc := range []struct {
		name, query string
		index       int
		recordID    string
	}{
		// dr_2's row now holds dr_1's bytes: Verify decodes the record
		// it finds there.
		{"EditedRecord", `UPDATE contextos_records SET data = (SELECT data FROM contextos_records WHERE record_id = 'dr_1') WHERE record_id = 'dr_2'`, 1, "dr_1"},
		{"RemovedFromTheMiddle", `DELETE FROM contextos_records WHERE record_id = 'dr_2'`, 1, "dr_3"},
		{"RemovedFromTheEnd", `DELETE FROM contextos_records WHERE record_id = 'dr_3'`, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, exec := seed(t)
			exec(t, tc.query)
			err := s.Records().Verify(ctx)
			var ce *decision.ChainError
			if !errors.As(err, &ce) || !errors.Is(err, decision.ErrChain) {
				t.Fatalf("Verify after tampering = %v, want a *decision.ChainError", err)
			}
			if ce.Index != tc.index || ce.RecordID != tc.recordID {
				t.Errorf("Verify names record %d (%q), want %d (%q): %v", ce.Index, ce.RecordID, tc.index, tc.recordID, err)
			}
		})
	}
}
