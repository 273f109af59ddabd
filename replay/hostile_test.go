package replay_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

// TestHostilePackets: a packet edited after it was sealed — to put a raw
// value back into what playback serves, or to change what a replay must
// report — is refused as tampered, naming no value; what the recorder is
// handed is kept without a panic's value or an invalid outcome's members;
// and playback never serves what it has not recorded.
func TestHostilePackets(t *testing.T) {
	const card = "4111111111111111"
	tamper := func(edit func(p *replay.Packet)) func(t *testing.T) {
		return func(t *testing.T) {
			p := fullPacket(t)
			edit(p)
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
		}
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"raw card number written back into a recorded output", tamper(func(p *replay.Packet) {
			p.Outcomes[1].Outcome.Output["card"] = card
		})},
		{"raw card number written into recorded error details", tamper(func(p *replay.Packet) {
			p.Outcomes[0].Error.Details["body"] = card
		})},
		{"raw card number written into recorded mutations", tamper(func(p *replay.Packet) {
			p.Outcomes[1].Outcome.Mutations = append(p.Outcomes[1].Outcome.Mutations, "card:"+card)
		})},
		{"recorded redaction flag cleared", tamper(func(p *replay.Packet) {
			p.Outcomes[1].Redacted = false
		})},
		{"recorded redaction flag set on an attempt", tamper(func(p *replay.Packet) {
			p.Outcomes[0].Redacted = true
		})},
		{"recorded panic turned into an outcome", tamper(func(p *replay.Packet) {
			p.Outcomes[2].Panic, p.Outcomes[2].Outcome = false, &gateway.Outcome{Output: map[string]any{"card": card}}
		})},
		{"panicked attempt handed to the recorder with an error", func(t *testing.T) {
			rec := replay.NewRecorder()
			a := attempt(call("tool_a", 1))
			a.Panicked, a.Error = true, gateway.NewToolError(gateway.CodeExecutionFailed, false, "panic: "+card, nil)
			rec.Observe(a)
			if o := rec.Outcomes("run_1"); len(o) != 1 || !o[0].Panic || o[0].Error != nil || o[0].Outcome != nil {
				t.Errorf("recorded %+v, want only the panic", o)
			}
		}},
		{"invalid outcome handed to the recorder with its members", func(t *testing.T) {
			rec := replay.NewRecorder()
			a := attempt(call("tool_a", 1))
			a.Invalid = []string{"cost_cents"}
			a.Outcome = &gateway.Outcome{Output: map[string]any{"card": card}, Citations: []gateway.Citation{{EvidenceRef: card}}, Signals: []string{card}}
			rec.Observe(a)
			o := rec.Outcomes("run_1")
			if len(o) != 1 || o[0].Outcome == nil || o[0].Outcome.Output != nil || o[0].Outcome.Citations != nil || o[0].Outcome.Signals != nil {
				t.Errorf("recorded %+v, want the invalid outcome without its members", o)
			}
		}},
		{"playback asked for an attempt it did not record", func(t *testing.T) {
			pb := replay.NewPlayback(fullPacket(t).Outcomes)
			out, err := pb.Call(context.Background(), call("tool_a", 3))
			var te *gateway.ToolError
			if out != nil || !errors.As(err, &te) || te.Retryable || len(pb.Unserved()) != 1 {
				t.Errorf("Call = %+v, %v (unserved %v); want a non-retryable refusal, reported", out, err, pb.Unserved())
			}
			if pb.RedactedAttempt(call("tool_a", 3)) || pb.StopRetrying(call("tool_a", 3)) {
				t.Error("playback reports on an attempt it did not record")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}
