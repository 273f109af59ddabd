package replay_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/contextos/contextos/replay"
)

// forgedRecordPacket returns the ESCALATED corpus packet with its decision
// record rewritten so that a case-sensitive JSON reader (jq, Python, a
// browser, any JSON Schema validator) reads it as DECIDED "approved",
// while encoding/json, which matches member names case-insensitively and
// keeps the last, still decodes the stored ESCALATED record: the record's
// hash, expected.decision_record_hash and the rebuilt record all agree.
// It is sealed again.
func forgedRecordPacket(t *testing.T) *replay.Packet {
	t.Helper()
	p := load("good-escalated-failed-refund.json")
	var buf bytes.Buffer
	if err := json.Compact(&buf, p.Record); err != nil {
		t.Fatal(err)
	}
	rec := buf.Bytes()
	forged := bytes.Replace(rec, []byte(`"status":"ESCALATED"`), []byte(`"status":"DECIDED","outcome":"approved"`), 1)
	forged = append(forged[:len(forged)-1], []byte(`,"Status":"ESCALATED","Outcome":""}`)...)
	if bytes.Equal(forged, rec) {
		t.Fatal("the record has no status to rewrite")
	}
	var seen struct {
		Status  string `json:"status"`
		Outcome string `json:"outcome"`
	}
	// What a case-sensitive reader sees (a map keeps every spelling).
	var m map[string]json.RawMessage
	if err := json.Unmarshal(forged, &m); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(m["status"], &seen.Status)
	json.Unmarshal(m["outcome"], &seen.Outcome)
	if seen.Status != "DECIDED" || seen.Outcome != "approved" {
		t.Fatalf("the forged record reads %+v", seen)
	}
	p.Record = forged
	return p
}

// A packet pins its decision record as the store holds it: canonical
// bytes, each member once and spelled as the record spells it. A record
// that means one thing to encoding/json and another to every
// case-sensitive reader is refused, sealed again or not.
func TestPacketRecordMustBeItsCanonicalForm(t *testing.T) {
	p := forgedRecordPacket(t)
	if err := p.Seal(); !errors.Is(err, replay.ErrTamper) {
		t.Errorf("Seal of a packet whose record reads DECIDED to a case-sensitive reader and ESCALATED to encoding/json = %v, want ErrTamper", err)
	}
	// Sealed as the runtime would have (the seal is a digest anyone can
	// compute), then checked.
	p = forgedRecordPacket(t)
	orig := load("good-escalated-failed-refund.json")
	p.PacketHash = ""
	if err := orig.CheckIntegrity(); err != nil {
		t.Fatalf("the untouched packet: %v", err)
	}
	if err := p.Seal(); err == nil {
		if err := p.CheckIntegrity(); !errors.Is(err, replay.ErrTamper) {
			t.Errorf("CheckIntegrity of the resealed forged packet = %v, want ErrTamper", err)
		}
	}
}

// A packet file edited behind its seal with a member respelled
// ("Status" after "status": encoding/json folds the names and keeps the
// last) still decodes to the sealed packet, so CheckIntegrity passes with
// the original packet_hash, while every case-sensitive reader of the file
// sees the edited value: here expected.status REJECTED and the refund's
// result "failed" in a packet that proves DECIDED and a completed refund.
// DecodePacket, which reads a packet's bytes, refuses them.
func TestDecodePacketRefusesRespelledMembers(t *testing.T) {
	data, err := os.ReadFile("testdata/corpus/good-decided-approved-1200.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.DecodePacket(data); err != nil {
		t.Fatalf("DecodePacket of the untouched packet: %v", err)
	}
	edited := bytes.Replace(data, []byte(`"status": "DECIDED",`), []byte(`"status": "REJECTED", "Status": "DECIDED",`), 1)
	edited = bytes.Replace(edited, []byte(`"status": "completed",`), []byte(`"status": "failed", "Status": "completed",`), 1)
	if bytes.Count(edited, []byte(`"Status"`)) != 2 {
		t.Fatal("the packet has no status to respell")
	}
	var p replay.Packet
	if err := json.Unmarshal(edited, &p); err != nil {
		t.Fatal(err)
	}
	if err := p.CheckIntegrity(); err != nil {
		t.Logf("CheckIntegrity of the edited file (not sealed again): %v", err)
	}
	if _, err := replay.DecodePacket(edited); !errors.Is(err, replay.ErrTamper) {
		t.Errorf("DecodePacket of a packet whose file reads expected.status REJECTED and a failed refund to a case-sensitive reader = %v, want ErrTamper", err)
	}
	dup := bytes.Replace(data, []byte(`"status": "DECIDED",`), []byte(`"status": "REJECTED", "status": "DECIDED",`), 1)
	if _, err := replay.DecodePacket(dup); !errors.Is(err, replay.ErrTamper) {
		t.Errorf("DecodePacket of a packet with a duplicated member = %v, want ErrTamper", err)
	}
}
