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

func TestRecorderAndPlaybackRoundTrip(t *testing.T) {
	rec := replay.NewRecorder()
	n := 0
	live := rec.Wrap(gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
		n++
		if c.Attempt == 1 {
			return nil, gateway.NewToolError(gateway.CodeTimeout, true, "slow", nil)
		}
		return &gateway.Outcome{Output: map[string]any{"n": n}}, nil
	}))
	ctx := context.Background()
	live.Call(ctx, call("tool_a", 1))
	live.Call(ctx, call("tool_a", 2))
	outs := rec.Outcomes("run_1")
	if len(outs) != 2 || outs[0].Error == nil || outs[0].Error.Code != gateway.CodeTimeout || outs[1].Outcome.Output["n"] != 2 {
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
	if _, err := pb.Call(ctx, call("tool_b", 1)); err == nil || len(pb.Unserved()) != 1 {
		t.Errorf("an unrecorded call was served: %v", err)
	}
	if n != 2 {
		t.Errorf("playback reached the live adapter (%d calls)", n)
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
	secret := "sk_live_do_not_record"
	live := rec.Wrap(gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
		if c.Attempt == 1 {
			panic(secret)
		}
		return &gateway.Outcome{Output: map[string]any{"ok": true}}, nil
	}))
	ctx := context.Background()
	// The panic goes on with its own value, as if the recorder were not there.
	if v := catch(func() { live.Call(ctx, call("tool_a", 1)) }); v != secret {
		t.Fatalf("the wrapped adapter panicked with %v, want the adapter's value", v)
	}
	if _, err := live.Call(ctx, call("tool_a", 2)); err != nil {
		t.Fatal(err)
	}
	outs := rec.Outcomes("run_1")
	if len(outs) != 2 || !outs[0].Panic || outs[0].Attempt != 1 || outs[0].ToolCallID != "tool_a" || outs[0].Outcome != nil || outs[0].Error != nil || outs[1].Panic {
		t.Fatalf("recorded %+v", outs)
	}
	b, _ := json.Marshal(outs)
	if strings.Contains(string(b), secret) || !strings.Contains(string(b), `"panic":true`) {
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

func TestPlaybackOfNoOutcomeAndNoError(t *testing.T) {
	rec := replay.NewRecorder()
	live := rec.Wrap(gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) { return nil, nil }))
	ctx := context.Background()
	live.Call(ctx, call("tool_a", 1))
	pb := replay.NewPlayback(rec.Outcomes("run_1"))
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
