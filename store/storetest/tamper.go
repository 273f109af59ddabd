package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/decision/decisiontest"
	"github.com/contextos/contextos/replay"
)

// Exec runs one SQL statement on the database directly, around the
// store: what an operator with write access (or a failing disk), or an
// earlier release, does. Its arguments are bound to $1, $2, ….
type Exec func(t *testing.T, query string, args ...any)

// RunTamperTests checks that a durable record store's Verify finds what
// was changed behind its back: a record's bytes or a column it is found
// by edited, a record removed
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
		// dr_2's row now holds dr_1's bytes.
		{"EditedRecord", `UPDATE contextos_records SET data = (SELECT data FROM contextos_records WHERE record_id = 'dr_1') WHERE record_id = 'dr_2'`, 1, "dr_2"},
		// A column List filters on no longer matches the record: the
		// record would be hidden from its tenant.
		{"EditedColumn", `UPDATE contextos_records SET tenant_id = 'tenant_other' WHERE record_id = 'dr_2'`, 1, "dr_2"},
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
	// The record_id columns of two rows swapped (no hash recomputed): Get
	// by id must not return the other record, as List never selects a
	// record by a column its record does not hold.
	t.Run("SwappedIDColumns", func(t *testing.T) {
		s, exec := seed(t)
		exec(t, `UPDATE contextos_records SET record_id = 'dr_x' WHERE record_id = 'dr_1'`)
		exec(t, `UPDATE contextos_records SET record_id = 'dr_1' WHERE record_id = 'dr_2'`)
		exec(t, `UPDATE contextos_records SET record_id = 'dr_2' WHERE record_id = 'dr_x'`)
		for _, id := range []string{"dr_1", "dr_2"} {
			r, err := s.Records().Get(ctx, id)
			if err == nil {
				t.Errorf("Get(%s) after its row's id column was swapped = record %s, want an error", id, r.RecordID)
			} else if !errors.Is(err, decision.ErrChain) {
				t.Errorf("Get(%s) after its row's id column was swapped = %v, want a *decision.ChainError", id, err)
			}
		}
	})
	// A packet row whose packet_id column names another packet than it
	// holds: Get by id must not return that other packet.
	t.Run("SwappedPacketIDColumn", func(t *testing.T) {
		s, exec := seed(t)
		p := packet()
		if err := s.Packets().Save(ctx, p); err != nil {
			t.Fatal(err)
		}
		exec(t, `UPDATE contextos_packets SET packet_id = 'rp_2' WHERE packet_id = 'rp_1'`)
		if got, err := s.Packets().Get(ctx, "rp_2"); err == nil {
			t.Errorf("Get(rp_2) = packet %s, want an error", got.ReplayPacketID)
		}
	})
	// A packet row whose bytes read two ways: a member repeated in
	// another spelling ("Expected" after "expected"), which encoding/json
	// takes as the one member and another reader does not. Get must refuse
	// it as replay.DecodePacket does a packet file.
	t.Run("PacketThatReadsTwoWays", func(t *testing.T) {
		s, exec := seed(t)
		p := packet()
		if err := s.Packets().Save(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Packets().Get(ctx, "rp_1"); err != nil {
			t.Fatalf("Get of the packet as saved: %v", err)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		twoWays := append(bytes.TrimSuffix(b, []byte("}")), []byte(`,"Source_Ref":"dr_other","SOURCE_KIND":"decision_record"}`)...)
		exec(t, `UPDATE contextos_packets SET data = $1 WHERE packet_id = 'rp_1'`, twoWays)
		if got, err := s.Packets().Get(ctx, "rp_1"); err == nil {
			t.Errorf("Get of a packet that reads two ways = source_ref %s, want an error", got.SourceRef)
		} else if !errors.Is(err, replay.ErrTamper) {
			t.Errorf("Get of a packet that reads two ways: %v, want replay.ErrTamper", err)
		}
	})
}

// RunUnreadableTests runs decisiontest.RunUnreadableTests against a
// durable record store: the records an earlier release stored (one that
// does not decode as a decision.Record among them) are written as rows,
// with the chain's head, directly into the database a fresh handle has
// migrated, and then read through that handle.
//
// A column of an unreadable record edited behind the store's back still
// breaks Verify at that record: the columns are held to the record's own
// members, read without decoding it.
func RunUnreadableTests(t *testing.T, newDB func(t *testing.T) (Opener, Exec)) {
	write := func(t *testing.T, stored [][]byte) (decision.Store, Exec) {
		open, exec := newDB(t)
		s := open(t, Options{})
		t.Cleanup(func() { _ = s.Close() })
		last := ""
		for i, b := range stored {
			var k struct {
				RecordID       string `json:"record_id"`
				RunID          string `json:"run_id"`
				TenantID       string `json:"tenant_id"`
				Status         string `json:"status"`
				PrevRecordHash string `json:"prev_record_hash"`
				RecordHash     string `json:"record_hash"`
			}
			if err := json.Unmarshal(b, &k); err != nil {
				t.Fatal(err)
			}
			exec(t, `INSERT INTO contextos_records (seq, record_id, run_id, tenant_id, status, prev_hash, record_hash, data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
				int64(i+1), k.RecordID, k.RunID, k.TenantID, k.Status, k.PrevRecordHash, k.RecordHash, b)
			last = k.RecordHash
		}
		if len(stored) > 0 {
			exec(t, `INSERT INTO contextos_record_head (id, seq, record_hash) VALUES (1, $1, $2)`, int64(len(stored)), last)
		}
		return s.Records(), exec
	}
	decisiontest.RunUnreadableTests(t, func(t *testing.T, stored [][]byte) decision.Store {
		s, _ := write(t, stored)
		return s
	})
	t.Run("EditedColumnOfAnUnreadableRecord", func(t *testing.T) {
		s, exec := write(t, decisiontest.UnreadableChain(t))
		exec(t, `UPDATE contextos_records SET tenant_id = 'tenant_other' WHERE record_id = 'dr_2'`)
		err := s.Verify(context.Background())
		var ce *decision.ChainError
		if !errors.As(err, &ce) || ce.Index != 1 || ce.RecordID != "dr_2" {
			t.Errorf("Verify after editing a column of unreadable dr_2 = %v, want a *decision.ChainError at record 1 (dr_2)", err)
		}
	})
}
