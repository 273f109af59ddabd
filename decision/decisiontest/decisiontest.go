// Package decisiontest holds the conformance suite for decision.Store
// implementations:
//
//	func TestMyStore(t *testing.T) {
//		decisiontest.RunStoreTests(t, func(t *testing.T) decision.Store { return newMyStore(t) })
//	}
package decisiontest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos/decision"
)

// Sample returns a minimal well-formed record of run "run_1" with the
// given record id and status (set RunID for another run).
func Sample(id string, status decision.Status) *decision.Record {
	return sampleIn("run_1", id, status)
}

// sampleIn is Sample in another run.
func sampleIn(run, id string, status decision.Status) *decision.Record {
	return &decision.Record{
		RecordID: id, DecisionKey: "support.refund.execute", DecisionVersion: "1.0.0", Timestamp: "2026-05-04T09:31:42Z",
		Status: status, Actor: decision.Actor{Type: "AGENT", ID: "agt_support"}, IntentRef: "support.refund",
		InputsRefs: decision.InputsRefs{Request: "req_1"}, Outputs: map[string]any{"refund_amount_inr": 4200.0},
		EvidenceRefs: []string{}, PolicyDecisions: []decision.PolicyDecisionRef{}, Approvals: []decision.Approval{},
		Lineage: decision.Lineage{PackVersion: "ctxpack.support@1.0.0", CompiledContextHash: "sha256:00"},
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", RunID: run, TenantID: "tenant_acme_prod",
	}
}

// RunStoreTests checks the Store contract: appended records come back
// equal with hashes set, chained in order; ids are unique; List filters;
// Verify passes on an untouched store; concurrent appends keep every
// record and a valid chain, and of concurrent appends of one id exactly
// one is stored and the others are ErrDuplicate; a cancelled context is honoured by every
// method; a refused append leaves no trace in the chain; records handed in
// and out are copies; a record's replay handle is kept, with
// replay.record_hash set to the record_hash.
func RunStoreTests(t *testing.T, newStore func(t *testing.T) decision.Store) {
	t.Helper()
	ctx := context.Background()
	t.Run("AppendChainsAndReturns", func(t *testing.T) {
		s := newStore(t)
		a, err := s.Append(ctx, Sample("dr_1", decision.Deferred))
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Append(ctx, Sample("dr_2", decision.Decided))
		if err != nil {
			t.Fatal(err)
		}
		if a.PrevRecordHash != decision.GenesisHash || b.PrevRecordHash != a.RecordHash || a.RecordHash == "" {
			t.Errorf("chain: a %s→%s, b %s→%s", a.PrevRecordHash, a.RecordHash, b.PrevRecordHash, b.RecordHash)
		}
		if h, _ := decision.Hash(b); h != b.RecordHash {
			t.Errorf("record_hash %s, recomputed %s", b.RecordHash, h)
		}
		got, err := s.Get(ctx, "dr_2")
		if err != nil || got.RecordHash != b.RecordHash || got.Outputs["refund_amount_inr"] != 4200.0 {
			t.Errorf("Get = %+v, %v", got, err)
		}
		if err := s.Verify(ctx); err != nil {
			t.Errorf("Verify = %v", err)
		}
	})
	t.Run("UniqueIDsAndNotFound", func(t *testing.T) {
		s := newStore(t)
		s.Append(ctx, Sample("dr_1", decision.Decided))
		if _, err := s.Append(ctx, sampleIn("run_2", "dr_1", decision.Decided)); !errors.Is(err, decision.ErrDuplicate) {
			t.Errorf("duplicate id = %v", err)
		}
		if _, err := s.Get(ctx, "dr_nope"); !errors.Is(err, decision.ErrNotFound) {
			t.Errorf("Get(unknown) = %v", err)
		}
	})
	t.Run("ListFilters", func(t *testing.T) {
		s := newStore(t)
		s.Append(ctx, Sample("dr_1", decision.Deferred))
		s.Append(ctx, Sample("dr_2", decision.Decided))
		s.Append(ctx, sampleIn("run_2", "dr_3", decision.Decided))
		for _, c := range []struct {
			f    decision.Filter
			want int
		}{{decision.Filter{}, 3}, {decision.Filter{RunID: "run_1"}, 2}, {decision.Filter{Status: decision.Decided}, 2}, {decision.Filter{RunID: "run_2", Status: decision.Deferred}, 0}} {
			got, err := s.List(ctx, c.f)
			if err != nil || len(got) != c.want {
				t.Errorf("List(%+v) = %d records, %v; want %d", c.f, len(got), err, c.want)
			}
		}
		all, _ := s.List(ctx, decision.Filter{})
		if all[0].RecordID != "dr_1" || all[2].RecordID != "dr_3" {
			t.Error("List is not in append order")
		}
	})
	t.Run("ConcurrentAppends", func(t *testing.T) {
		s := newStore(t)
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Append(ctx, sampleIn("run_c", fmt.Sprintf("dr_%d", i), decision.Decided)); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		all, _ := s.List(ctx, decision.Filter{})
		if len(all) != 20 {
			t.Errorf("%d records kept, want 20", len(all))
		}
		if err := s.Verify(ctx); err != nil {
			t.Errorf("Verify after concurrent appends = %v", err)
		}
	})
	t.Run("ConcurrentDuplicateAppends", func(t *testing.T) {
		// Writers racing with the same ids onto a chain that has a head:
		// each id is stored once, every other append of it is
		// ErrDuplicate, and the chain stays one chain.
		s := newStore(t)
		if _, err := s.Append(ctx, Sample("dr_0", decision.Decided)); err != nil {
			t.Fatal(err)
		}
		const ids, writers = 6, 4
		var stored [ids]atomic.Int32
		var wg sync.WaitGroup
		for i := range ids * writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := i % ids
				switch _, err := s.Append(ctx, sampleIn("run_d", fmt.Sprintf("dr_d%d", id), decision.Decided)); {
				case err == nil:
					stored[id].Add(1)
				case !errors.Is(err, decision.ErrDuplicate):
					t.Errorf("append of dr_d%d = %v, want success or ErrDuplicate", id, err)
				}
			}()
		}
		wg.Wait()
		for id := range stored {
			if n := stored[id].Load(); n != 1 {
				t.Errorf("dr_d%d stored %d times, want once", id, n)
			}
		}
		if all, err := s.List(ctx, decision.Filter{}); err != nil || len(all) != ids+1 {
			t.Errorf("List = %d records, %v; want %d", len(all), err, ids+1)
		}
		if err := s.Verify(ctx); err != nil {
			t.Errorf("Verify after racing duplicate appends = %v", err)
		}
	})
	t.Run("CancelledContext", func(t *testing.T) {
		s := newStore(t)
		s.Append(ctx, Sample("dr_1", decision.Decided))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Append(cctx, sampleIn("run_x", "dr_x", decision.Decided)); !errors.Is(err, context.Canceled) {
			t.Errorf("Append(cancelled) = %v", err)
		}
		if _, err := s.Get(cctx, "dr_1"); !errors.Is(err, context.Canceled) {
			t.Errorf("Get(cancelled) = %v", err)
		}
		if _, err := s.List(cctx, decision.Filter{}); !errors.Is(err, context.Canceled) {
			t.Errorf("List(cancelled) = %v", err)
		}
		if err := s.Verify(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Verify(cancelled) = %v", err)
		}
	})
	t.Run("RefusedAppendLeavesNoTrace", func(t *testing.T) {
		s := newStore(t)
		a, _ := s.Append(ctx, Sample("dr_1", decision.Decided))
		s.Append(ctx, Sample("dr_1", decision.Escalated))
		s.Append(ctx, Sample("", decision.Escalated))
		b, err := s.Append(ctx, Sample("dr_2", decision.Decided))
		if err != nil || b.PrevRecordHash != a.RecordHash {
			t.Fatalf("the append after refused ones does not chain onto the last stored record: %+v, %v", b, err)
		}
		all, _ := s.List(ctx, decision.Filter{})
		if len(all) != 2 || all[0].Status != decision.Decided {
			t.Errorf("refused appends left %d records, first %s", len(all), all[0].Status)
		}
		if err := s.Verify(ctx); err != nil {
			t.Errorf("Verify = %v", err)
		}
	})
	t.Run("ReplayHandle", func(t *testing.T) {
		s := newStore(t)
		in := Sample("dr_1", decision.Decided)
		in.SetReplayPacketID("rp_1")
		in.Replay.ToolTranscriptChainHash = "sha256:11"
		in.Lineage.ToolTranscriptChainHash = "sha256:11"
		// A stale copy of a hash is the store's to overwrite.
		in.Replay.RecordHash = "sha256:stale"
		out, err := s.Append(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "dr_1")
		if err != nil || got.Replay == nil {
			t.Fatalf("Get = %+v, %v", got, err)
		}
		for _, r := range []*decision.Record{out, got} {
			h, _ := decision.Hash(r)
			switch {
			case r.Replay.RecordHash != r.RecordHash || h != r.RecordHash:
				t.Errorf("replay.record_hash %s, record_hash %s, recomputed %s", r.Replay.RecordHash, r.RecordHash, h)
			case r.Replay.ReplayPacketID != "rp_1" || r.Lineage.ReplayPacketID != "rp_1":
				t.Errorf("packet id: replay %q, lineage %q", r.Replay.ReplayPacketID, r.Lineage.ReplayPacketID)
			case r.Replay.CompiledContextHash != "sha256:00" || r.Replay.ToolTranscriptChainHash != "sha256:11":
				t.Errorf("replay hashes %+v", r.Replay)
			}
		}
		// The packet id is inside record_hash; replay.record_hash is not.
		c := *got
		rp := *got.Replay
		c.Replay = &rp
		c.Replay.RecordHash = ""
		if h, _ := decision.Hash(&c); h != got.RecordHash {
			t.Error("record_hash covers replay.record_hash")
		}
		c.Replay.ReplayPacketID = "rp_2"
		if h, _ := decision.Hash(&c); h == got.RecordHash {
			t.Error("record_hash does not cover replay.replay_packet_id")
		}
		if err := s.Verify(ctx); err != nil {
			t.Errorf("Verify = %v", err)
		}
	})
	t.Run("StoredRecordsAreCopies", func(t *testing.T) {
		s := newStore(t)
		in := Sample("dr_1", decision.Decided)
		out, err := s.Append(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		in.Outputs["refund_amount_inr"] = 1.0
		out.Outputs["refund_amount_inr"] = 2.0
		got, _ := s.Get(ctx, "dr_1")
		got.Outputs["refund_amount_inr"] = 3.0
		again, err := s.Get(ctx, "dr_1")
		if err != nil || again.Outputs["refund_amount_inr"] != 4200.0 {
			t.Errorf("a caller's change reached the stored record: %v, %v", again.Outputs, err)
		}
		if err := s.Verify(ctx); err != nil {
			t.Errorf("Verify = %v", err)
		}
	})
}
