package contextos_test

import (
	"context"
	"errors"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/replay"
)

// editedRecords is a decision store whose Get, once edit is set, returns
// a stored record changed behind the store's back.
type editedRecords struct {
	*decision.MemoryStore
	edit func(r *decision.Record)
}

func (s *editedRecords) Get(ctx context.Context, id string) (*decision.Record, error) {
	r, err := s.MemoryStore.Get(ctx, id)
	if err == nil && s.edit != nil {
		s.edit(r)
	}
	return r, err
}

// ReplayRecord replays the decision a stored record proves: the packet
// the record names, held to the record as stored. Another run's packet
// put in its packet's place (and re-sealed under its id: the seal is a
// digest anyone can recompute), or the record edited in the store, is
// refused with replay.ErrTamper, though Replay of that packet alone is
// replay_equal.
func TestReplayRecordHoldsThePacketToTheStoredRecord(t *testing.T) {
	ctx := context.Background()
	records := &editedRecords{MemoryStore: decision.NewMemoryStore()}
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), lookupPlan(), refundPlan(900)),
		&contextostest.Options{Runtime: contextos.Options{Decisions: records}})
	scriptDefaults(h, "")
	var recs [2]*decision.Record
	for i, amount := range []int{1200, 900} {
		req, rc := refundRequest(t, amount, true)
		req.RequestID += "_" + string(rune('a'+i))
		rc.RunID += "_" + string(rune('a'+i))
		res, err := h.Runtime.Invoke(ctx, req, rc)
		if err != nil || res.Status != decision.Decided || res.ReplayPacketID == "" {
			t.Fatalf("run %d: %v %+v", i, err, res)
		}
		recs[i] = res.Record
	}
	if out, err := h.Runtime.ReplayRecord(ctx, recs[0].RecordID); err != nil || out.Status != replay.ReplayEqual {
		t.Fatalf("ReplayRecord of an honest record = %+v, %v", out, err)
	}

	// The second run's packet in the first record's packet's place.
	other, err := h.Replays.Get(ctx, recs[1].Replay.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	other.ReplayPacketID, other.PacketHash = recs[0].Replay.ReplayPacketID, ""
	if err := other.Seal(); err != nil {
		t.Fatal(err)
	}
	if out, err := h.Runtime.Replay(ctx, other); err != nil || out.Status != replay.ReplayEqual {
		t.Fatalf("the re-sealed packet alone replays %+v, %v: the test needs one that does", out, err)
	}
	if err := h.Replays.Save(ctx, other); err != nil {
		t.Fatal(err)
	}
	if out, err := h.Runtime.ReplayRecord(ctx, recs[0].RecordID); !errors.Is(err, replay.ErrTamper) {
		t.Errorf("ReplayRecord with another run's packet in the record's packet's place = %+v, %v; want replay.ErrTamper", out, err)
	}

	// The second record edited in the store: its outcome changed.
	records.edit = func(r *decision.Record) { r.Outcome = "denied" }
	if out, err := h.Runtime.ReplayRecord(ctx, recs[1].RecordID); !errors.Is(err, replay.ErrTamper) {
		t.Errorf("ReplayRecord of a record edited in the store = %+v, %v; want replay.ErrTamper", out, err)
	}
	records.edit = nil
	if _, err := h.Runtime.ReplayRecord(ctx, "dr_nobody"); !errors.Is(err, decision.ErrNotFound) {
		t.Errorf("ReplayRecord of an unknown record: %v; want decision.ErrNotFound", err)
	}

	// A run that was not sampled has no packet to replay.
	unsampled := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{ReplaySampleRate: 1e-12}})
	scriptDefaults(unsampled, "")
	req, rc := refundRequest(t, 1200, true)
	res, err := unsampled.Runtime.Invoke(ctx, req, rc)
	if err != nil || res.Status != decision.Decided || res.ReplayPacketID != "" {
		t.Fatalf("unsampled run: %v %+v", err, res)
	}
	if _, err := unsampled.Runtime.ReplayRecord(ctx, res.Record.RecordID); !errors.Is(err, contextos.ErrNotFound) {
		t.Errorf("ReplayRecord of a record that names no packet: %v; want ErrNotFound", err)
	}
}

// swappedRecords is a host decision store whose Get of one record id
// returns another record, whole and unedited (a row keyed by the wrong
// id): its hash and its packet are both genuine.
type swappedRecords struct {
	*decision.MemoryStore
	from, to string
}

func (s *swappedRecords) Get(ctx context.Context, id string) (*decision.Record, error) {
	if id == s.from {
		id = s.to
	}
	return s.MemoryStore.Get(ctx, id)
}

// ReplayRecord(A) is a replay of A's decision: a store answering A with
// record B (genuine, with its genuine packet) is refused, not reported
// replay_equal as though A's decision were proven.
func TestReplayRecordRefusesAnotherRecord(t *testing.T) {
	ctx := context.Background()
	records := &swappedRecords{MemoryStore: decision.NewMemoryStore()}
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), lookupPlan(), refundPlan(900)),
		&contextostest.Options{Runtime: contextos.Options{Decisions: records}})
	scriptDefaults(h, "")
	var recs [2]*decision.Record
	for i, amount := range []int{1200, 900} {
		req, rc := refundRequest(t, amount, true)
		req.RequestID += "_" + string(rune('a'+i))
		rc.RunID += "_" + string(rune('a'+i))
		res, err := h.Runtime.Invoke(ctx, req, rc)
		if err != nil || res.Status != decision.Decided || res.ReplayPacketID == "" {
			t.Fatalf("run %d: %v %+v", i, err, res)
		}
		recs[i] = res.Record
	}
	records.from, records.to = recs[0].RecordID, recs[1].RecordID
	if out, err := h.Runtime.ReplayRecord(ctx, recs[0].RecordID); !errors.Is(err, replay.ErrTamper) {
		t.Errorf("ReplayRecord(%s) answered with record %s = %+v, %v; want replay.ErrTamper", recs[0].RecordID, recs[1].RecordID, out, err)
	}
}
