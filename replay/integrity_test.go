package replay_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

func TestCheckIntegrityRefusesIncompletePackets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    *replay.Packet
		want error
	}{
		{"empty", &replay.Packet{}, replay.ErrInvalid},
		{"bad policy", &replay.Packet{ReplayPacketID: "rp_1", CompiledContextHash: "sha256:x", Invoke: json.RawMessage(`{}`), PackRefs: []string{"a@1.0.0"}, SideEffectPolicy: "live"}, replay.ErrInvalid},
		{"not sealed", &replay.Packet{ReplayPacketID: "rp_1", CompiledContextHash: "sha256:x", Invoke: json.RawMessage(`{}`), PackRefs: []string{"a@1.0.0"}, SideEffectPolicy: replay.TranscriptOnly, InvokeHash: "sha256:00"}, replay.ErrInvalid},
		{"invoke hash", &replay.Packet{ReplayPacketID: "rp_1", CompiledContextHash: "sha256:x", Invoke: json.RawMessage(`{}`), PackRefs: []string{"a@1.0.0"}, SideEffectPolicy: replay.TranscriptOnly, InvokeHash: "sha256:00", PacketHash: "sha256:00"}, replay.ErrTamper},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if err := tc.p.CheckIntegrity(); !errors.Is(err, tc.want) {
				t.Errorf("CheckIntegrity = %v, want %v", err, tc.want)
			}
		})
	}
}

// FuzzPacket: any decoded packet is checked and sealed without panicking;
// a packet that passes has a transcript that verifies to its chain hash
// and still passes after a JSON round trip; a packet Seal accepts passes,
// and keeps its digest through a round trip.
func FuzzPacket(f *testing.F) {
	f.Add([]byte(`{"replay_packet_id":"rp_1","compiled_context_hash":"sha256:x","invoke":{},"pack_refs":["a@1.0.0"],"side_effect_policy":"transcript_only","invoke_hash":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","transcript":[],"tool_transcript_chain_hash":"` + gateway.GenesisHash + `"}`))
	f.Add([]byte(`{"transcript":[{"seq":0,"kind":"call","call":null}],"decision_record":{"status":"DECIDED"}}`))
	full, err := json.Marshal(fullPacket(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full)
	f.Fuzz(func(t *testing.T, data []byte) {
		var p replay.Packet
		if json.Unmarshal(data, &p) != nil {
			return
		}
		if p.CheckIntegrity() == nil {
			if chain, err := gateway.VerifyTranscript(p.Transcript); err != nil || chain != p.ToolTranscriptChainHash {
				t.Fatalf("an intact packet's transcript does not verify: %v", err)
			}
			if err := roundTrip(t, &p).CheckIntegrity(); err != nil {
				t.Fatalf("an intact packet fails after a JSON round trip: %v", err)
			}
		}
		if p.Seal() != nil {
			return
		}
		if err := p.CheckIntegrity(); err != nil {
			t.Fatalf("a sealed packet fails: %v", err)
		}
		back := roundTrip(t, &p)
		if err := back.CheckIntegrity(); err != nil {
			t.Fatalf("a sealed packet fails after a JSON round trip: %v", err)
		}
		if err := back.Seal(); err != nil || back.PacketHash != p.PacketHash {
			t.Fatalf("resealed after a round trip: %s, %v; sealed %s", back.PacketHash, err, p.PacketHash)
		}
	})
}
