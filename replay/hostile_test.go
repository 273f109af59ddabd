package replay_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

// TestHostilePackets: a packet edited after it was sealed — to put a raw
// value back into what playback serves, or to change what a replay must
// report — is refused as tampered, naming no value. (What the recorder
// keeps and what playback serves are tested in internal/playback.)
func TestHostilePackets(t *testing.T) {
	t.Parallel()
	const card = "4111111111111111"
	tests := []struct {
		name string
		edit func(p *replay.Packet)
	}{
		{"raw card number written back into a recorded output", func(p *replay.Packet) {
			p.Outcomes[1].Outcome.Output["card"] = card
		}},
		{"raw card number written into recorded error details", func(p *replay.Packet) {
			p.Outcomes[0].Error.Details["body"] = card
		}},
		{"raw card number written into recorded mutations", func(p *replay.Packet) {
			p.Outcomes[1].Outcome.Mutations = append(p.Outcomes[1].Outcome.Mutations, "card:"+card)
		}},
		{"recorded redaction flag cleared", func(p *replay.Packet) {
			p.Outcomes[1].Redacted = false
		}},
		{"recorded redaction flag set on an attempt", func(p *replay.Packet) {
			p.Outcomes[0].Redacted = true
		}},
		{"recorded panic turned into an outcome", func(p *replay.Packet) {
			p.Outcomes[2].Panic, p.Outcomes[2].Outcome = false, &gateway.Outcome{Output: map[string]any{"card": card}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := fullPacket(t)
			tc.edit(p)
			err := p.CheckIntegrity()
			if !errors.Is(err, replay.ErrTamper) {
				t.Fatalf("CheckIntegrity = %v, want ErrTamper", err)
			}
			if strings.Contains(err.Error(), card) {
				t.Errorf("the error echoes the value: %v", err)
			}
			if !errors.Is(roundTrip(t, p).CheckIntegrity(), replay.ErrTamper) {
				t.Error("after a JSON round trip the edited packet passes")
			}
		})
	}
}
