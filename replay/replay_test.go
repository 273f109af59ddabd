package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

func call(id string, attempt int) *gateway.Call {
	return &gateway.Call{Envelope: &gateway.ToolCallEnvelope{ToolCallID: id, RunID: "run_1", CapabilityID: "adp.x"}, Attempt: attempt}
}

// attempt is what the gateway reports to Observe for an attempt of call.
func attempt(c *gateway.Call) gateway.Attempt {
	return gateway.Attempt{RunID: c.Envelope.RunID, ToolCallID: c.Envelope.ToolCallID, CapabilityID: c.Envelope.CapabilityID, Attempt: c.Attempt}
}

func TestRecorderAndPlaybackRoundTrip(t *testing.T) {
	rec := replay.NewRecorder()
	ctx := context.Background()
	failed := attempt(call("tool_a", 1))
	failed.Error = gateway.NewToolError(gateway.CodeTimeout, true, "slow", nil)
	rec.Observe(failed)
	ok := attempt(call("tool_a", 2))
	ok.Outcome, ok.Redacted = &gateway.Outcome{Output: map[string]any{"n": 2, "card": gateway.Redacted}}, true
	rec.Observe(ok)
	outs := rec.Outcomes("run_1")
	if len(outs) != 2 || outs[0].Error == nil || outs[0].Error.Code != gateway.CodeTimeout || outs[1].Outcome.Output["n"] != 2 || !outs[1].Redacted || outs[0].Redacted {
		t.Fatalf("recorded %+v", outs)
	}
	// Through JSON, as in a packet.
	b, _ := json.Marshal(outs)
	var back []replay.Outcome
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	pb := replay.NewPlayback(back)
	if _, err := pb.Call(ctx, call("tool_a", 1)); err == nil {
		t.Error("the recorded error was not served")
	}
	out, err := pb.Call(ctx, call("tool_a", 2))
	if err != nil || out.Output["n"] != float64(2) {
		t.Errorf("attempt 2 = %+v, %v", out, err)
	}
	// The recorded redaction is reported back, attempt by attempt.
	if pb.RedactedAttempt(call("tool_a", 1)) || !pb.RedactedAttempt(call("tool_a", 2)) || pb.RedactedAttempt(call("tool_b", 1)) {
		t.Error("RedactedAttempt does not report the recorded redaction")
	}
	if _, err := pb.Call(ctx, call("tool_b", 1)); err == nil || len(pb.Unserved()) != 1 {
		t.Errorf("an unrecorded call was served: %v", err)
	}
	rec.Forget("run_1")
	if len(rec.Outcomes("run_1")) != 0 {
		t.Error("Forget kept the outcomes")
	}
}

// catch runs f and returns what it panicked with, or nil.
func catch(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

func TestRecorderRecordsPanicsAndPlaybackRepeatsThem(t *testing.T) {
	rec := replay.NewRecorder()
	panicked := attempt(call("tool_a", 1))
	// The gateway reports its own error with a panic; only the panic is kept.
	panicked.Panicked, panicked.Error = true, gateway.NewToolError(gateway.CodeExecutionFailed, false, "the adapter panicked", nil)
	rec.Observe(panicked)
	ok := attempt(call("tool_a", 2))
	ok.Outcome = &gateway.Outcome{Output: map[string]any{"ok": true}}
	rec.Observe(ok)
	ctx := context.Background()
	outs := rec.Outcomes("run_1")
	if len(outs) != 2 || !outs[0].Panic || outs[0].Attempt != 1 || outs[0].ToolCallID != "tool_a" || outs[0].Outcome != nil || outs[0].Error != nil || outs[1].Panic {
		t.Fatalf("recorded %+v", outs)
	}
	b, _ := json.Marshal(outs)
	if !strings.Contains(string(b), `"panic":true`) {
		t.Errorf("recorded %s", b)
	}
	var back []replay.Outcome
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	pb := replay.NewPlayback(back)
	if v := catch(func() { pb.Call(ctx, call("tool_a", 1)) }); v != replay.ErrRecordedPanic {
		t.Errorf("playback of the panicked attempt: panic %v, want ErrRecordedPanic", v)
	}
	if out, err := pb.Call(ctx, call("tool_a", 2)); err != nil || out.Output["ok"] != true {
		t.Errorf("attempt 2 = %+v, %v", out, err)
	}
	if len(pb.Unserved()) != 0 {
		t.Errorf("unserved: %v", pb.Unserved())
	}
}

// An invalid outcome is recorded with only its finite cost and what made
// it invalid, and served as an equally invalid one.
func TestRecorderKeepsOnlyTheCostOfAnInvalidOutcome(t *testing.T) {
	rec := replay.NewRecorder()
	a := attempt(call("tool_a", 1))
	a.Invalid = []string{"output"}
	a.Outcome = &gateway.Outcome{Output: map[string]any{"card": "4111111111111111"}, Mutations: []string{"m"}, CostCents: 0.5}
	rec.Observe(a)
	outs := rec.Outcomes("run_1")
	if len(outs) != 1 || outs[0].Outcome == nil || outs[0].Outcome.Output != nil || outs[0].Outcome.Mutations != nil || outs[0].Outcome.CostCents != 0.5 {
		t.Fatalf("recorded %+v", outs)
	}
	out, err := replay.NewPlayback(outs).Call(context.Background(), call("tool_a", 1))
	if err != nil || out.CostCents != 0.5 || jsonFinite(out.Output) {
		t.Errorf("served %+v, %v; want an output that is not finite and the cost", out, err)
	}
}

func jsonFinite(v any) bool { _, err := json.Marshal(v); return err == nil }

func TestPlaybackOfNoOutcomeAndNoError(t *testing.T) {
	// Packets recorded before the gateway's own error was: an attempt with
	// neither outcome nor error.
	pb := replay.NewPlayback([]replay.Outcome{{ToolCallID: "tool_a", CapabilityID: "adp.x", Attempt: 1}})
	ctx := context.Background()
	var out *gateway.Outcome
	var err error
	if v := catch(func() { out, err = pb.Call(ctx, call("tool_a", 1)) }); v != nil || out != nil || err != nil {
		t.Errorf("playback = %v, %v, panic %v; the live adapter returned nil, nil", out, err, v)
	}
}

func TestClockRecordsAndPlaysBack(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	i := 0
	c := replay.RecordingClock(func() time.Time { i++; return t0.Add(time.Duration(i) * time.Second) })
	a, b := c.Now(), c.Now()
	readings := c.Readings()
	if len(readings) != 2 || !readings[0].Equal(a) || !readings[1].Equal(b) {
		t.Fatalf("readings = %v", readings)
	}
	next := replay.RecordingClockFrom(c)
	next.Now()
	if len(next.Readings()) != 1 || len(c.Readings()) != 2 {
		t.Error("RecordingClockFrom does not start a new list")
	}
	p := replay.PlaybackClock(readings)
	if !p.Now().Equal(a) || !p.Now().Equal(b) || !p.Now().Equal(b) {
		t.Error("playback does not serve the readings in order, then the last")
	}
	if replay.RecordingClockFrom(p) != p {
		t.Error("a playback clock must keep serving in order across resumes")
	}
	if !replay.PlaybackClock(nil).Now().IsZero() {
		t.Error("an empty playback clock")
	}
}

func TestCompareTranscripts(t *testing.T) {
	res := func(out string) gateway.TranscriptEntry {
		return gateway.TranscriptEntry{Kind: "result", Result: &gateway.ToolResultEnvelope{ToolCallID: "tool_a", CapabilityID: "adp.x", Status: gateway.StatusOK, Output: map[string]any{"v": out}, LatencyMS: 5}}
	}
	c := gateway.TranscriptEntry{Kind: "call", Call: &gateway.ToolCallEnvelope{ToolCallID: "tool_a", CapabilityID: "adp.x"}}
	want := []gateway.TranscriptEntry{c, res("x")}
	latency := res("x")
	latency.Result.LatencyMS = 99
	for name, tc := range map[string]struct {
		got  []gateway.TranscriptEntry
		step int
	}{
		"equal":                {[]gateway.TranscriptEntry{c, res("x")}, -1},
		"latency not compared": {[]gateway.TranscriptEntry{c, latency}, -1},
		"output differs":       {[]gateway.TranscriptEntry{c, res("y")}, 1},
		"shorter":              {[]gateway.TranscriptEntry{c}, 1},
		"longer":               {[]gateway.TranscriptEntry{c, res("x"), c}, 2},
	} {
		t.Run(name, func(t *testing.T) {
			d := replay.CompareTranscripts(want, tc.got)
			switch {
			case tc.step < 0 && d != nil:
				t.Errorf("diff = %+v", d)
			case tc.step >= 0 && (d == nil || d.Step != tc.step || d.Kind != replay.DiffToolTranscript):
				t.Errorf("diff = %+v, want step %d", d, tc.step)
			}
		})
	}
}

func TestCheckIntegrityRefusesIncompletePackets(t *testing.T) {
	for name, p := range map[string]*replay.Packet{
		"empty":       {},
		"bad policy":  {ReplayPacketID: "rp_1", CompiledContextHash: "sha256:x", Invoke: json.RawMessage(`{}`), PackRefs: []string{"a@1.0.0"}, SideEffectPolicy: "live"},
		"invoke hash": {ReplayPacketID: "rp_1", CompiledContextHash: "sha256:x", Invoke: json.RawMessage(`{}`), PackRefs: []string{"a@1.0.0"}, SideEffectPolicy: replay.TranscriptOnly, InvokeHash: "sha256:00"},
	} {
		err := p.CheckIntegrity()
		if !errors.Is(err, replay.ErrInvalid) && !errors.Is(err, replay.ErrTamper) {
			t.Errorf("%s: %v", name, err)
		}
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
		replay.CompareTranscripts(p.Transcript, p.Transcript)
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
