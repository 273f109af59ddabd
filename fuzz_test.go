package contextos_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/replay"
)

// FuzzReplayPacket: Replay takes packets from outside (files, stores). Any
// decoded packet is refused or replayed without a panic, and nothing it
// holds reaches a live adapter (the harness adapters have no script for
// the fuzzed calls, and the replay runtime never calls them anyway).
func FuzzReplayPacket(f *testing.F) {
	// Seeds: a small real packet (a run refused before planning) and a
	// bare one; the full refund packet is exercised by the replay tests.
	h := harness(f, contextostest.NewPlanner(), nil)
	req, rc := refundRequest(f, 1200, true)
	req.Input.Context["signals"] = []any{"refund_without_identity"}
	res := h.Invoke(req, rc)
	p, err := h.Replays.Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		f.Fatal(err)
	}
	good, _ := json.Marshal(p)
	f.Add(good)
	f.Add([]byte(`{"replay_packet_id":"rp_1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var pk replay.Packet
		if json.Unmarshal(data, &pk) != nil {
			return
		}
		h.Runtime.Replay(context.Background(), &pk)
	})
}

// FuzzCheckpoint: checkpoints come back from host stores; a corrupt one is
// an error from Load, never a panic, and Resume refuses what it cannot
// continue.
func FuzzCheckpoint(f *testing.F) {
	f.Add([]byte(`{"run_id":"run_1","request":null,"run_context":null,"pending":{"gate_id":"G"}}`))
	f.Add([]byte(`{"run_id":"run_1","stopped":"x","started_at":"bad"}`))
	f.Add([]byte(`{"run_id":"run_1","stopped":"record_not_stored: x","unconfirmed_record":{"record":{"run_id":"run_1","status":"DECIDED","record_id":"dr_1"}}}`))
	f.Add([]byte(`{"run_id":"run_1","pending":{"gate_id":"G"},"unconfirmed_record":{"record":null},"seq":-1}`))
	store := contextos.NewInMemoryCheckpoints()
	h := bareHarness(f, contextostest.NewPlanner(), &contextostest.Options{Runtime: contextos.Options{Checkpoints: store}})
	f.Fuzz(func(t *testing.T, data []byte) {
		var head struct {
			RunID string `json:"run_id"`
		}
		if json.Unmarshal(data, &head) != nil || head.RunID == "" {
			return
		}
		// The data is stored as one of the versions the runtime reads (1
		// to 3, by the input's length); a run the store already holds is
		// a conflict and is skipped.
		cp := &contextos.Checkpoint{RunID: head.RunID, Version: 1 + len(data)%3, Data: data}
		if err := store.Save(context.Background(), cp); err != nil {
			return
		}
		h.Runtime.Resume(context.Background(), head.RunID, contextos.ResumeInput{})
	})
}
