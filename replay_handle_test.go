package contextos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/playback"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/schemas"
)

// The replay handle (seed 001, DecisionRecord.replay; issue 15): a record
// names the packet captured with it, inside its record_hash, and a packet
// pins its record as stored. checkPacketHandle and checkRecordHandles are
// also run on every packet and run of TestPropertyRandomRuns.

// checkPacketHandle checks one stored packet against the decision store:
//   - expected.decision_record_hash is the stored record's record_hash, and
//     the packet pins that record byte for byte as stored;
//   - the stored record verifies: its hash, replay.record_hash, and the
//     store's chain;
//   - a packet captured with its record (source kind decision_record) is
//     the one the record names: replay.replay_packet_id ==
//     lineage.replay_packet_id == the packet's id; a packet captured later
//     is not named by the record, which names at most its run-time packet.
func checkPacketHandle(ctx context.Context, store decision.Store, p *replay.Packet, fail func(format string, args ...any)) {
	rec, err := store.Get(ctx, p.SourceRef)
	if err != nil {
		fail("packet %s: its record %s: %v", p.ReplayPacketID, p.SourceRef, err)
		return
	}
	if p.Expected.DecisionRecordHash != rec.RecordHash {
		fail("packet %s: expected.decision_record_hash %s, the stored record_hash %s", p.ReplayPacketID, p.Expected.DecisionRecordHash, rec.RecordHash)
	}
	var pinned decision.Record
	if err := json.Unmarshal(p.Record, &pinned); err != nil {
		fail("packet %s: record does not decode: %v", p.ReplayPacketID, err)
		return
	}
	a, errA := canon.JSON(&pinned)
	b, errB := canon.JSON(rec)
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		fail("packet %s pins another record than the store holds:\n%s\n%s", p.ReplayPacketID, a, b)
	}
	if h, err := decision.Hash(rec); err != nil || h != rec.RecordHash {
		fail("record %s: record_hash %s, recomputed %s (%v)", rec.RecordID, rec.RecordHash, h, err)
	}
	if rec.Replay == nil || rec.Replay.RecordHash != rec.RecordHash {
		fail("record %s: replay %+v, record_hash %s", rec.RecordID, rec.Replay, rec.RecordHash)
		return
	}
	if err := store.Verify(ctx); err != nil {
		fail("decision chain: %v", err)
	}
	named := rec.Replay.ReplayPacketID
	if named != rec.Lineage.ReplayPacketID {
		fail("record %s: replay.replay_packet_id %q, lineage.replay_packet_id %q", rec.RecordID, named, rec.Lineage.ReplayPacketID)
	}
	switch {
	case p.SourceKind == replay.SourceDecisionRecord && named != p.ReplayPacketID:
		fail("record %s names packet %q, it was captured with %s", rec.RecordID, named, p.ReplayPacketID)
	case p.SourceKind != replay.SourceDecisionRecord && named == p.ReplayPacketID:
		fail("record %s names the %s packet %s captured after it was stored", rec.RecordID, p.SourceKind, named)
	}
	if rec.Replay.CompiledContextHash != p.CompiledContextHash || rec.Replay.ToolTranscriptChainHash != p.ToolTranscriptChainHash {
		fail("record %s: replay hashes %+v, the packet pins %s and %s", rec.RecordID, rec.Replay, p.CompiledContextHash, p.ToolTranscriptChainHash)
	}
}

// checkRecordHandles checks every stored record of a run: one that names a
// packet names one the packet store has, captured with it; every record
// validates against decision-record.v1.
func checkRecordHandles(ctx context.Context, store decision.Store, packets contextos.PacketStore, runID string, fail func(format string, args ...any)) {
	recs, err := store.List(ctx, decision.Filter{RunID: runID})
	if err != nil {
		fail("records of %s: %v", runID, err)
		return
	}
	for _, rec := range recs {
		b, _ := json.Marshal(rec)
		if err := schemas.Validate("decision-record", b); err != nil {
			fail("record %s: %v", rec.RecordID, err)
		}
		id := rec.Lineage.ReplayPacketID
		if rec.Replay != nil && rec.Replay.ReplayPacketID != id {
			fail("record %s: replay.replay_packet_id %q, lineage.replay_packet_id %q", rec.RecordID, rec.Replay.ReplayPacketID, id)
		}
		if id == "" {
			continue
		}
		if rec.Status == decision.Closed || rec.Status == decision.Deferred {
			fail("%s record %s names packet %s: only the record a packet is captured with names it", rec.Status, rec.RecordID, id)
		}
		p, err := packets.Get(ctx, id)
		if err != nil {
			fail("record %s names packet %s: %v", rec.RecordID, id, err)
			continue
		}
		if p.SourceRef != rec.RecordID || p.SourceKind != replay.SourceDecisionRecord {
			fail("record %s names packet %s, which pins %s (%s)", rec.RecordID, id, p.SourceRef, p.SourceKind)
		}
	}
}

// A run captured when it ends: the record names its packet, and the
// packet pins the record as stored, chained after other runs' records.
func TestReplayHandleOfACapturedRun(t *testing.T) {
	ctx := context.Background()
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), lookupPlan(), refundPlan(1200)), nil)
	fail := func(format string, args ...any) { t.Helper(); t.Fatalf(format, args...) }
	var last *contextos.Result
	for _, run := range []string{"run_handle_first", "run_handle_second"} {
		req, rc := refundRequest(t, 1200, true)
		rc.RunID = run
		last = h.Invoke(req, rc)
		if last.ReplayPacketID == "" || last.Status != decision.Decided {
			t.Fatalf("%s: %s, packet %q", run, last.Status, last.ReplayPacketID)
		}
	}
	rec := last.Record
	if rec.PrevRecordHash == decision.GenesisHash {
		t.Fatal("the second run's record should chain onto the first's")
	}
	want, _ := playback.PacketID(last.RunID, rec.RecordID, replay.SourceDecisionRecord)
	if last.ReplayPacketID != want || rec.Replay == nil || rec.Replay.ReplayPacketID != want || rec.Lineage.ReplayPacketID != want {
		t.Fatalf("packet %s; record replay %+v, lineage %+v; want %s", last.ReplayPacketID, rec.Replay, rec.Lineage, want)
	}
	p, err := h.Replays.Get(ctx, last.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	checkPacketHandle(ctx, h.Decisions, p, fail)
	checkRecordHandles(ctx, h.Decisions, h.Replays, last.RunID, fail)
	if out, err := h.Runtime.Replay(ctx, p); err != nil || out.Status != replay.ReplayEqual {
		t.Fatalf("Replay = %+v, %v", out, err)
	}
}

// A packet captured after the record is stored (Runtime.Capture) pins the
// stored record and never changes it; the record names only the packet
// captured with it.
func TestCaptureAfterTheFactKeepsTheRecord(t *testing.T) {
	ctx := context.Background()
	fail := func(format string, args ...any) { t.Helper(); t.Fatalf(format, args...) }
	for _, sampled := range []bool{false, true} {
		rate := 1e-12 // in effect never (0 means "every run" to the harness)
		if sampled {
			rate = 1
		}
		h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{ReplaySampleRate: rate}})
		req, rc := refundRequest(t, 1200, true)
		res := h.Invoke(req, rc)
		if sampled != (res.ReplayPacketID != "") {
			t.Fatalf("sampled %v: packet %q", sampled, res.ReplayPacketID)
		}
		before, err := h.Decisions.List(ctx, decision.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		beforeJSON, _ := json.Marshal(before)
		ids := map[string]bool{}
		for _, kind := range []replay.SourceKind{replay.SourceOperatorCorrection, replay.SourceGoldenCase, replay.SourceDecisionRecord} {
			p, err := h.Runtime.Capture(ctx, res.RunID, kind)
			if err != nil {
				t.Fatalf("Capture(%s): %v", kind, err)
			}
			ids[p.ReplayPacketID] = true
			want, _ := playback.PacketID(res.RunID, res.Record.RecordID, kind)
			if p.ReplayPacketID != want {
				t.Errorf("Capture(%s) id %s, want %s", kind, p.ReplayPacketID, want)
			}
			if kind == replay.SourceDecisionRecord && sampled && p.ReplayPacketID != res.ReplayPacketID {
				t.Errorf("capturing the record again gives %s, the record names %s", p.ReplayPacketID, res.ReplayPacketID)
			}
			// Only a sampled record names its decision_record packet.
			if kind == replay.SourceDecisionRecord && !sampled {
				if res.Record.Replay.ReplayPacketID != "" {
					t.Errorf("an unsampled record names %s", res.Record.Replay.ReplayPacketID)
				}
			} else {
				checkPacketHandle(ctx, h.Decisions, p, fail)
			}
			if p.Expected.DecisionRecordHash != res.Record.RecordHash {
				t.Errorf("Capture(%s): expected hash %s, record_hash %s", kind, p.Expected.DecisionRecordHash, res.Record.RecordHash)
			}
			if out, err := h.Runtime.Replay(ctx, p); err != nil || out.Status != replay.ReplayEqual {
				t.Errorf("Capture(%s) replays %+v, %v", kind, out, err)
			}
		}
		after, _ := h.Decisions.List(ctx, decision.Filter{})
		if afterJSON, _ := json.Marshal(after); !bytes.Equal(beforeJSON, afterJSON) {
			t.Errorf("sampled %v: capturing changed the stored records:\n%s\n%s", sampled, beforeJSON, afterJSON)
		}
		if err := h.Decisions.Verify(ctx); err != nil {
			t.Error(err)
		}
		checkRecordHandles(ctx, h.Decisions, h.Runtime.Packets(), res.RunID, fail)
		if len(ids) != 3 {
			t.Errorf("sampled %v: three kinds captured as packets %v", sampled, ids)
		}
	}
}

// flakyPackets fails its first Save.
type flakyPackets struct {
	*contextos.InMemoryPackets
	failed atomic.Bool
}

var errPacketStoreDown = errors.New("packet store down")

func (f *flakyPackets) Save(ctx context.Context, p *replay.Packet) error {
	if f.failed.CompareAndSwap(false, true) {
		return errPacketStoreDown
	}
	return f.InMemoryPackets.Save(ctx, p)
}

// A capture that fails at the end of the run leaves the record naming a
// packet the store lacks (it was named before the record was hashed);
// Capture with SourceDecisionRecord makes exactly that packet.
func TestFailedCaptureIsRestoredByCapture(t *testing.T) {
	ctx := context.Background()
	fail := func(format string, args ...any) { t.Helper(); t.Fatalf(format, args...) }
	packets := &flakyPackets{InMemoryPackets: contextos.NewInMemoryPackets()}
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Replays: packets}})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	named := res.Record.Lineage.ReplayPacketID
	if res.ReplayPacketID != "" || named == "" {
		t.Fatalf("result packet %q, record names %q: want none captured and one named", res.ReplayPacketID, named)
	}
	if _, err := packets.Get(ctx, named); !errors.Is(err, contextos.ErrNotFound) {
		t.Fatalf("Get(%s) = %v", named, err)
	}
	p, err := h.Runtime.Capture(ctx, res.RunID, replay.SourceDecisionRecord)
	if err != nil {
		t.Fatal(err)
	}
	if p.ReplayPacketID != named {
		t.Fatalf("Capture gives %s, the record names %s", p.ReplayPacketID, named)
	}
	checkPacketHandle(ctx, h.Decisions, p, fail)
	checkRecordHandles(ctx, h.Decisions, packets, res.RunID, fail)
	if out, err := h.Runtime.Replay(ctx, p); err != nil || out.Status != replay.ReplayEqual {
		t.Fatalf("Replay = %+v, %v", out, err)
	}
}

// A paused run's DEFERRED record names no packet (none is captured with
// it); the run's terminal record names the packet captured when it ends,
// and the CLOSED record that closes the DEFERRED one does not.
func TestReplayHandleAcrossAPause(t *testing.T) {
	ctx := context.Background()
	fail := func(format string, args ...any) { t.Helper(); t.Fatalf(format, args...) }
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), nil)
	req, rc := refundRequest(t, 4200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertPending(t, res, "GATE_FINANCE_APPROVAL")
	if res.Record.Lineage.ReplayPacketID != "" || res.Record.Replay.ReplayPacketID != "" {
		t.Fatalf("the DEFERRED record names a packet: %+v", res.Record.Replay)
	}
	done := h.Approve(res, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
	if done.Status != decision.Decided || done.ReplayPacketID == "" || done.Record.Replay.ReplayPacketID != done.ReplayPacketID {
		t.Fatalf("after approval: %s, packet %q, record names %+v", done.Status, done.ReplayPacketID, done.Record.Replay)
	}
	recs, _ := h.Decisions.List(ctx, decision.Filter{RunID: res.RunID})
	var statuses []decision.Status
	for _, r := range recs {
		statuses = append(statuses, r.Status)
	}
	if len(recs) != 3 || recs[2].Status != decision.Closed {
		t.Fatalf("records %v, want DEFERRED, DECIDED, CLOSED", statuses)
	}
	checkRecordHandles(ctx, h.Decisions, h.Replays, res.RunID, fail)
	p, err := h.Replays.Get(ctx, done.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	checkPacketHandle(ctx, h.Decisions, p, fail)
}
