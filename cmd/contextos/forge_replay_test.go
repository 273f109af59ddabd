package main

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos/replay"
)

// replay --store RECORD_ID replays the packet the record names, and must
// refuse a packet that is not that record's: one whose
// expected.decision_record_hash is not the stored (chain-verified)
// record's record_hash. Here the DECIDED record's packet row holds another
// run's packet (intact and sealed, as its runtime wrote it): the replay
// must not report replay_equal for the DECIDED record.
func TestReplayByRecordRefusesAnotherRecordsPacket(t *testing.T) {
	db := sqliteDB(t)
	dir := t.TempDir()
	plan := writeFile(t, dir, "plan.json", []byte(cardPlan))
	store := []string{"--store", db.spec}
	code, out, errs := runCLI(t, "", runArgs(append(store, "--plan", plan)...)...)
	if code != exitOK {
		t.Fatalf("run: %d %s", code, errs)
	}
	var paused struct {
		RunID string `json:"run_id"`
	}
	json.Unmarshal([]byte(out), &paused)
	resume := append(append([]string{"resume", paused.RunID}, store...), "--approve", "GATE_FINANCE_APPROVAL=user_finance_lead_77:finance_lead")
	resume = append(resume, withoutFlag(withoutFlag(runArgs("--plan", plan), "--request"), "--run-context")[1:]...)
	if code, _, errs := runCLI(t, "", resume...); code != exitOK {
		t.Fatalf("resume: %d %s", code, errs)
	}
	rows, err := db.db.Query(`SELECT data FROM contextos_records`)
	if err != nil {
		t.Fatal(err)
	}
	var decided, decidedPacket string
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		var r struct {
			RecordID string `json:"record_id"`
			Status   string `json:"status"`
			Replay   *struct {
				ReplayPacketID string `json:"replay_packet_id"`
			} `json:"replay"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if r.Status == "DECIDED" && r.Replay != nil {
			decided, decidedPacket = r.RecordID, r.Replay.ReplayPacketID
		}
	}
	rows.Close()
	if decided == "" || decidedPacket == "" {
		t.Fatal("want a DECIDED record naming its packet")
	}
	// A second run (another run id) in the same store, with its own packet.
	rcData, err := os.ReadFile(testFile("run-context.support.json"))
	if err != nil {
		t.Fatal(err)
	}
	rc := writeFile(t, dir, "rc2.json", []byte(strings.Replace(string(rcData), "run_a1b2c3d4e5f60718", "run_b2b2c3d4e5f60718", 1)))
	if code, _, errs := runCLI(t, "", append(withoutFlag(runArgs(append(store, "--plan", plan)...), "--run-context"), "--run-context", rc)...); code != exitOK {
		t.Fatalf("second run: %d %s", code, errs)
	}
	resume[1] = "run_b2b2c3d4e5f60718"
	if code, _, errs := runCLI(t, "", resume...); code != exitOK {
		t.Fatalf("second resume: %d %s", code, errs)
	}
	var other string
	if err := db.db.QueryRow(`SELECT packet_id FROM contextos_packets WHERE packet_id <> ?`, decidedPacket).Scan(&other); err != nil {
		t.Fatal(err)
	}
	replayArgs := append([]string{"replay", "--pack", testFile("ctxpack.support-1.0.0.json"), "--allow-unsigned"}, store...)
	if code, out, errs := runCLI(t, "", append(slices.Clone(replayArgs), decided)...); code != exitOK || !strings.Contains(out, `"replay_equal"`) {
		t.Fatalf("replay of the untouched store: %d %s %s", code, out, errs)
	}
	var original []byte
	if err := db.db.QueryRow(`SELECT data FROM contextos_packets WHERE packet_id = ?`, decidedPacket).Scan(&original); err != nil {
		t.Fatal(err)
	}
	// The DECIDED record's packet row now holds the other run's packet.
	var data []byte
	if err := db.db.QueryRow(`SELECT data FROM contextos_packets WHERE packet_id = ?`, other).Scan(&data); err != nil {
		t.Fatal(err)
	}
	if _, err := db.db.Exec(`UPDATE contextos_packets SET data = ? WHERE packet_id = ?`, data, decidedPacket); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runCLI(t, "", append([]string{"records", "verify"}, store...)...); code != exitOK {
		t.Fatalf("records verify: %d %s", code, out)
	}
	code, out, errs = runCLI(t, "", append(slices.Clone(replayArgs), decided)...)
	if code == exitOK || strings.Contains(out, `"replay_equal"`) {
		t.Errorf("replay of record %s with another run's packet (%s) in its row: exit %d, %s %s", decided, other, code, out, errs)
	}
	// The same, with the other packet's id changed to the record's packet
	// id and sealed again (a seal is a digest anyone can compute).
	var pk replay.Packet
	if err := json.Unmarshal(data, &pk); err != nil {
		t.Fatal(err)
	}
	pk.ReplayPacketID = decidedPacket
	if err := pk.Seal(); err != nil {
		t.Fatal(err)
	}
	resealed, err := json.Marshal(&pk)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.db.Exec(`UPDATE contextos_packets SET data = ? WHERE packet_id = ?`, resealed, decidedPacket); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "", append(slices.Clone(replayArgs), decided)...)
	if code == exitOK || strings.Contains(out, `"replay_equal"`) {
		t.Errorf("replay of record %s with another run's packet, renamed and resealed: exit %d, %s %s", decided, code, out, errs)
	}
	// The record's own packet back, and the record edited in the store
	// (its outcome; its record_hash kept): the packet proves the record
	// as it was sealed, not the one the store now shows.
	if _, err := db.db.Exec(`UPDATE contextos_packets SET data = ? WHERE packet_id = ?`, original, decidedPacket); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runCLI(t, "", append(slices.Clone(replayArgs), decided)...); code != exitOK || !strings.Contains(out, `"replay_equal"`) {
		t.Fatalf("replay with the record's packet restored: %d %s %s", code, out, errs)
	}
	var recData []byte
	if err := db.db.QueryRow(`SELECT data FROM contextos_records WHERE record_id = ?`, decided).Scan(&recData); err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(recData, []byte(`"outcome":"approved"`), []byte(`"outcome":"denied"`), 1)
	if bytes.Equal(edited, recData) {
		t.Fatalf("the record holds no approved outcome: %s", recData)
	}
	if _, err := db.db.Exec(`UPDATE contextos_records SET data = ? WHERE record_id = ?`, edited, decided); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "", append(slices.Clone(replayArgs), decided)...)
	if code == exitOK || strings.Contains(out, `"replay_equal"`) {
		t.Errorf("replay of record %s edited in the store: exit %d, %s %s", decided, code, out, errs)
	}
}
