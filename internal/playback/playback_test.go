package playback_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/playback"
	"github.com/contextos/contextos/replay"
)

const card = "4111111111111111"

func call(id string, attempt int) *gateway.Call {
	return &gateway.Call{Envelope: &gateway.ToolCallEnvelope{ToolCallID: id, RunID: "run_1", CapabilityID: "adp.x"}, Attempt: attempt}
}

// attempt is what the gateway reports to Observe for an attempt of call.
func attempt(id string, n int, edit func(a *gateway.Attempt)) gateway.Attempt {
	a := gateway.Attempt{RunID: "run_1", ToolCallID: id, CapabilityID: "adp.x", Attempt: n}
	if edit != nil {
		edit(&a)
	}
	return a
}

// TestRecorderKeepsWhatTheGatewayTook: each attempt is recorded as the
// gateway took it, a panic without its value (nor the gateway's error for
// it), an invalid outcome with only its finite cost and what made it
// invalid.
func TestRecorderKeepsWhatTheGatewayTook(t *testing.T) {
	t.Parallel()
	timeout := gateway.NewToolError(gateway.CodeTimeout, true, "slow", nil)
	tests := []struct {
		name    string
		attempt gateway.Attempt
		want    replay.AdapterOutcome
	}{
		{"error", attempt("tool_a", 1, func(a *gateway.Attempt) { a.Error = timeout }),
			replay.AdapterOutcome{ToolCallID: "tool_a", CapabilityID: "adp.x", Attempt: 1, Error: timeout}},
		{"redacted outcome", attempt("tool_a", 2, func(a *gateway.Attempt) {
			a.Outcome, a.Redacted = &gateway.Outcome{Output: map[string]any{"n": 2, "card": gateway.Redacted}}, true
		}), replay.AdapterOutcome{ToolCallID: "tool_a", CapabilityID: "adp.x", Attempt: 2, Redacted: true,
			Outcome: &gateway.Outcome{Output: map[string]any{"n": 2, "card": gateway.Redacted}}}},
		{"canceled", attempt("tool_a", 1, func(a *gateway.Attempt) { a.Error, a.Canceled = timeout, true }),
			replay.AdapterOutcome{ToolCallID: "tool_a", CapabilityID: "adp.x", Attempt: 1, Error: timeout, Canceled: true}},
		{"panic handed over with an error", attempt("tool_a", 1, func(a *gateway.Attempt) {
			a.Panicked, a.Error = true, gateway.NewToolError(gateway.CodeExecutionFailed, false, "panic: "+card, nil)
		}), replay.AdapterOutcome{ToolCallID: "tool_a", CapabilityID: "adp.x", Attempt: 1, Panic: true}},
		{"invalid output handed over with its members", attempt("tool_a", 1, func(a *gateway.Attempt) {
			a.Invalid = []string{"output"}
			a.Outcome = &gateway.Outcome{Output: map[string]any{"card": card}, Mutations: []string{"m"}, CostCents: 0.5,
				Citations: []gateway.Citation{{EvidenceRef: card}}, Signals: []string{card}}
		}), replay.AdapterOutcome{ToolCallID: "tool_a", CapabilityID: "adp.x", Attempt: 1, Invalid: []string{"output"},
			Outcome: &gateway.Outcome{CostCents: 0.5}}},
		{"invalid cost without an outcome", attempt("tool_a", 1, func(a *gateway.Attempt) { a.Invalid = []string{"cost_cents"} }),
			replay.AdapterOutcome{ToolCallID: "tool_a", CapabilityID: "adp.x", Attempt: 1, Invalid: []string{"cost_cents"}, Outcome: &gateway.Outcome{}}},
		{"invalid tokens with a valid cost", attempt("tool_a", 1, func(a *gateway.Attempt) {
			a.Invalid, a.Outcome = []string{"tokens"}, &gateway.Outcome{Output: map[string]any{"card": card}, CostCents: 0.5}
		}), replay.AdapterOutcome{ToolCallID: "tool_a", CapabilityID: "adp.x", Attempt: 1, Invalid: []string{"tokens"}, Outcome: &gateway.Outcome{CostCents: 0.5}}},
		{"failed attempt with what it spent", attempt("tool_a", 1, func(a *gateway.Attempt) {
			a.Error, a.Outcome = timeout, &gateway.Outcome{Output: map[string]any{"card": card}, Signals: []string{card}, CostCents: 25, Tokens: 2484}
		}), replay.AdapterOutcome{ToolCallID: "tool_a", CapabilityID: "adp.x", Attempt: 1, Error: timeout, Outcome: &gateway.Outcome{CostCents: 25, Tokens: 2484}}},
		{"no outcome and no error", attempt("tool_a", 1, nil),
			replay.AdapterOutcome{ToolCallID: "tool_a", CapabilityID: "adp.x", Attempt: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := playback.NewRecorder()
			rec.Observe(tc.attempt)
			if diff := cmp.Diff([]replay.AdapterOutcome{tc.want}, rec.Outcomes("run_1")); diff != "" {
				t.Errorf("recorded (-want +got):\n%s", diff)
			}
			if b, err := json.Marshal(rec.Outcomes("run_1")); err != nil || strings.Contains(string(b), card) {
				t.Errorf("recorded %s, %v: want JSON without the raw value", b, err)
			}
		})
	}
}

func TestRecorderKeepsRunsApartAndForgets(t *testing.T) {
	t.Parallel()
	rec := playback.NewRecorder()
	rec.Observe(attempt("tool_a", 1, nil))
	other := attempt("tool_b", 1, nil)
	other.RunID = "run_2"
	rec.Observe(other)
	rec.Observe(attempt("tool_a", 2, nil))
	want := []replay.AdapterOutcome{
		{ToolCallID: "tool_a", CapabilityID: "adp.x", Attempt: 1},
		{ToolCallID: "tool_a", CapabilityID: "adp.x", Attempt: 2},
	}
	got := rec.Outcomes("run_1")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("run_1 (-want +got):\n%s", diff)
	}
	got[0].ToolCallID = "changed"
	if rec.Outcomes("run_1")[0].ToolCallID != "tool_a" {
		t.Error("Outcomes returned the recorder's own list")
	}
	rec.Forget("run_1")
	if n := len(rec.Outcomes("run_1")); n != 0 {
		t.Errorf("Forget kept %d outcomes", n)
	}
	if n := len(rec.Outcomes("run_2")); n != 1 {
		t.Errorf("Forget(run_1) dropped run_2's outcomes: %d left", n)
	}
}

// catch runs f and returns what it panicked with, or nil.
func catch(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// TestPlaybackServesWhatWasRecorded: recorded outcomes go through JSON (as
// in a packet) and are served attempt by attempt, with the recorded
// redaction and cancellation reported back; what was not recorded is
// refused and reported, never served.
func TestPlaybackServesWhatWasRecorded(t *testing.T) {
	t.Parallel()
	rec := playback.NewRecorder()
	for _, a := range []gateway.Attempt{
		attempt("tool_a", 1, func(a *gateway.Attempt) {
			a.Error, a.Canceled = gateway.NewToolError(gateway.CodeTimeout, true, "slow", nil), true
		}),
		attempt("tool_a", 2, func(a *gateway.Attempt) {
			a.Outcome, a.Redacted = &gateway.Outcome{Output: map[string]any{"n": 2, "card": gateway.Redacted}}, true
		}),
		attempt("tool_b", 1, func(a *gateway.Attempt) { a.Panicked = true }),
		attempt("tool_c", 1, func(a *gateway.Attempt) {
			a.Invalid, a.Outcome = []string{"output", "cost_cents"}, &gateway.Outcome{Output: map[string]any{"x": 1}}
		}),
		attempt("tool_d", 1, nil),
		attempt("tool_e", 1, func(a *gateway.Attempt) {
			a.Error, a.Outcome = gateway.NewToolError(gateway.CodeExecutionFailed, false, "exit 3", nil), &gateway.Outcome{CostCents: 25, Tokens: 2484}
		}),
		attempt("tool_f", 1, func(a *gateway.Attempt) {
			a.Invalid, a.Outcome = []string{"tokens"}, &gateway.Outcome{Output: map[string]any{"x": 1}, Tokens: 7}
		}),
	} {
		rec.Observe(a)
	}
	b, err := json.Marshal(rec.Outcomes("run_1"))
	if err != nil {
		t.Fatal(err)
	}
	var back []replay.AdapterOutcome
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	pb := playback.NewPlayback(back)
	ctx := context.Background()

	type served struct {
		Output    map[string]any
		NaNOutput bool
		NaNCost   bool
		Cost      float64
		Tokens    int
		Code      string
		Panic     any
		Redacted  bool
		StopRetry bool
	}
	serve := func(c *gateway.Call) served {
		var s served
		var out *gateway.Outcome
		var err error
		s.Panic = catch(func() { out, err = pb.Call(ctx, c) })
		var te *gateway.ToolError
		if errors.As(err, &te) {
			s.Code = te.Code
		}
		if out != nil {
			if _, jerr := json.Marshal(out.Output); jerr != nil {
				s.NaNOutput = true
			} else {
				s.Output = out.Output
			}
			s.NaNCost = math.IsNaN(out.CostCents)
			if !s.NaNCost {
				s.Cost = out.CostCents
			}
			s.Tokens = out.Tokens
		}
		s.Redacted, s.StopRetry = pb.RedactedAttempt(c), pb.StopRetrying(c)
		return s
	}
	tests := []struct {
		name string
		call *gateway.Call
		want served
	}{
		{"recorded error, caller gone", call("tool_a", 1), served{Code: gateway.CodeTimeout, StopRetry: true}},
		{"recorded redacted outcome", call("tool_a", 2), served{Output: map[string]any{"n": float64(2), "card": gateway.Redacted}, Redacted: true}},
		{"recorded panic", call("tool_b", 1), served{Panic: playback.ErrRecordedPanic}},
		{"recorded invalid outcome", call("tool_c", 1), served{NaNOutput: true, NaNCost: true}},
		{"recorded nothing", call("tool_d", 1), served{}},
		{"recorded failure that spent", call("tool_e", 1), served{Code: gateway.CodeExecutionFailed, Cost: 25, Tokens: 2484}},
		{"recorded invalid tokens", call("tool_f", 1), served{Tokens: -1}},
		{"not recorded", call("tool_a", 3), served{Code: gateway.CodeExecutionFailed}},
	}
	// Sequential: the cases share the playback, whose Unserved is checked after.
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, serve(tc.call), cmpopts.EquateErrors()); diff != "" {
				t.Errorf("served (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff([]string{"adp.x tool_a#3"}, pb.Unserved()); diff != "" {
		t.Errorf("Unserved (-want +got):\n%s", diff)
	}
	if _, err := pb.Call(ctx, call("tool_a", 3)); err == nil {
		t.Fatal("an unrecorded call was served")
	} else {
		var te *gateway.ToolError
		if !errors.As(err, &te) || te.Retryable {
			t.Errorf("refusal %v: want a non-retryable tool error", err)
		}
	}
}

func TestClockRecordsAndPlaysBack(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	i := 0
	c := playback.RecordingClock(func() time.Time { i++; return t0.Add(time.Duration(i) * time.Second) })
	a, b := c.Now(), c.Now()
	readings := c.Readings()
	if diff := cmp.Diff([]time.Time{a, b}, readings); diff != "" {
		t.Fatalf("readings (-want +got):\n%s", diff)
	}
	p := playback.PlaybackClock(readings)
	got := []time.Time{p.Now(), p.Now(), p.Now()}
	if diff := cmp.Diff([]time.Time{a, b, b}, got); diff != "" {
		t.Errorf("playback does not serve the readings in order, then the last (-want +got):\n%s", diff)
	}
	if !playback.PlaybackClock(nil).Now().IsZero() {
		t.Error("an empty playback clock")
	}
}

func TestCompareTranscripts(t *testing.T) {
	t.Parallel()
	res := func(out string) gateway.TranscriptEntry {
		return gateway.TranscriptEntry{Kind: "result", Result: &gateway.ToolResultEnvelope{ToolCallID: "tool_a", CapabilityID: "adp.x", Status: gateway.StatusOK, Output: map[string]any{"v": out}, LatencyMS: 5}}
	}
	c := gateway.TranscriptEntry{Kind: "call", Call: &gateway.ToolCallEnvelope{ToolCallID: "tool_a", CapabilityID: "adp.x"}}
	want := []gateway.TranscriptEntry{c, res("x")}
	latency := res("x")
	latency.Result.LatencyMS = 99
	tests := []struct {
		name string
		got  []gateway.TranscriptEntry
		want *replay.Diff
	}{
		{"equal", []gateway.TranscriptEntry{c, res("x")}, nil},
		{"latency not compared", []gateway.TranscriptEntry{c, latency}, nil},
		{"output differs", []gateway.TranscriptEntry{c, res("y")},
			&replay.Diff{Kind: replay.DiffToolTranscript, Step: 1, Detail: "transcript step 1 (result adp.x) differs"}},
		{"shorter", []gateway.TranscriptEntry{c},
			&replay.Diff{Kind: replay.DiffToolTranscript, Step: 1, Detail: "the replay has 1 transcript entries, the packet 2"}},
		{"longer", []gateway.TranscriptEntry{c, res("x"), c},
			&replay.Diff{Kind: replay.DiffToolTranscript, Step: 2, Detail: "the replay has 3 transcript entries, the packet 2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, playback.CompareTranscripts(want, tc.got)); diff != "" {
				t.Errorf("diff (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzCompareTranscripts: any decoded transcript compares equal with
// itself, and a comparison with a shorter one names the first missing step.
func FuzzCompareTranscripts(f *testing.F) {
	f.Add([]byte(`[{"seq":0,"kind":"call","call":{"tool_call_id":"t","capability_id":"adp.x"}},{"seq":1,"kind":"result","result":{"tool_call_id":"t","status":"ok"}}]`))
	f.Add([]byte(`[{"seq":0,"kind":"call","call":null}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var entries []gateway.TranscriptEntry
		if json.Unmarshal(data, &entries) != nil || len(entries) == 0 {
			return
		}
		if d := playback.CompareTranscripts(entries, entries); d != nil {
			t.Fatalf("a transcript differs from itself: %+v", d)
		}
		d := playback.CompareTranscripts(entries, entries[:len(entries)-1])
		if d == nil || d.Step != len(entries)-1 || d.Kind != replay.DiffToolTranscript {
			t.Fatalf("a shorter transcript: %+v, want step %d", d, len(entries)-1)
		}
	})
}

// TestPacketIDIsDerived: the id depends on the run, the record and the
// kind, and on nothing else.
func TestPacketIDIsDerived(t *testing.T) {
	t.Parallel()
	a, err := playback.PacketID("run_1", "dr_1", replay.SourceDecisionRecord)
	if err != nil || !strings.HasPrefix(a, "rp_") {
		t.Fatalf("PacketID = %q, %v", a, err)
	}
	if b, _ := playback.PacketID("run_1", "dr_1", replay.SourceDecisionRecord); b != a {
		t.Errorf("not deterministic: %s, %s", a, b)
	}
	for _, other := range [][3]string{{"run_2", "dr_1", "decision_record"}, {"run_1", "dr_2", "decision_record"}, {"run_1", "dr_1", "golden_case"}} {
		if b, _ := playback.PacketID(other[0], other[1], replay.SourceKind(other[2])); b == a {
			t.Errorf("PacketID%v = %s, the same as for run_1 dr_1 decision_record", other, b)
		}
	}
}

// A recorded reading carries no monotonic clock reading: the duration
// between two readings is the same live as after the packet's JSON round
// trip, which a replay serves (the wall and monotonic clocks drift apart
// by nanoseconds, enough to move a millisecond count of wall_clock_ms).
func TestClockReadingsHaveNoMonotonicPart(t *testing.T) {
	t.Parallel()
	c := playback.RecordingClock(time.Now)
	a := c.Now()
	time.Sleep(time.Millisecond)
	b := c.Now()
	for _, r := range []time.Time{a, b} {
		if strings.Contains(r.String(), " m=") {
			t.Fatalf("reading %s keeps its monotonic clock reading", r)
		}
	}
	raw, err := json.Marshal(c.Readings())
	if err != nil {
		t.Fatal(err)
	}
	var back []time.Time
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if live, replayed := b.Sub(a), back[1].Sub(back[0]); live != replayed {
		t.Errorf("live duration %v, replayed %v", live, replayed)
	}
}

// TestRecorderEditsNothingItIsTold: the runtime's recorder observes the
// attempts as the gateway holds them, with no copy (the call's result
// and transcript entry are built from them): Observe must leave every
// attempt it is told as it was.
func TestRecorderEditsNothingItIsTold(t *testing.T) {
	t.Parallel()
	rec := playback.NewRecorder()
	for _, a := range []gateway.Attempt{
		attempt("tool_a", 1, func(a *gateway.Attempt) {
			a.Error, a.Canceled = gateway.NewToolError(gateway.CodeTimeout, true, "slow", map[string]any{"after_ms": 30.0}), true
		}),
		attempt("tool_a", 2, func(a *gateway.Attempt) {
			a.Outcome, a.Redacted = &gateway.Outcome{Output: map[string]any{"n": 2.0, "lines": []any{map[string]any{"sku": "a"}}},
				Mutations: []string{"m"}, Artifacts: []string{"art"}, Citations: []gateway.Citation{{EvidenceRef: "kg:x"}}, RiskTags: []string{"pii"}, Signals: []string{"s"}, CostCents: 3, Tokens: 9}, true
		}),
		attempt("tool_b", 1, func(a *gateway.Attempt) { a.Panicked = true }),
		attempt("tool_c", 1, func(a *gateway.Attempt) {
			a.Invalid, a.Outcome = []string{"output", "cost_cents"}, &gateway.Outcome{Tokens: 4}
		}),
		attempt("tool_e", 1, func(a *gateway.Attempt) {
			a.Error, a.Outcome = gateway.NewToolError(gateway.CodeExecutionFailed, false, "exit 3", map[string]any{"exit": 3.0}), &gateway.Outcome{CostCents: 25, Tokens: 2484}
		}),
	} {
		before, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		rec.Observe(a)
		after, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if string(before) != string(after) {
			t.Errorf("Observe changed the attempt it was told:\n before %s\n after  %s", before, after)
		}
	}
	if n := len(rec.Outcomes("run_1")); n != 5 {
		t.Fatalf("recorded %d outcomes, want 5", n)
	}
}
