package replay_test

import (
	"bytes"
	"encoding/json"
	"errors"
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
