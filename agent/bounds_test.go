package agent

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestChannelOverBoundIsDropped(t *testing.T) {
	cases := []struct {
		channel, want string
	}{
		{"assistant", "assistant"},
		{strings.Repeat("c", MaxChannelBytes), strings.Repeat("c", MaxChannelBytes)},
		{strings.Repeat("c", MaxChannelBytes+1), ""},
		{"bad\xff", ""},
	}
	for _, c := range cases {
		got := bound("k", Event{Kind: EventStatus, Channel: c.channel})
		if len(got) != 1 || got[0].Channel != c.want {
			t.Errorf("channel of %d bytes: got %q", len(c.channel), got[0].Channel)
		}
	}
}

func TestMessageOverBoundIsTruncatedWithSuffix(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		msg  string
	}{
		{"ascii", strings.Repeat("m", MaxMessageBytes+1)},
		{"multibyte_at_cut", strings.Repeat("é", MaxMessageBytes)},
		{"emoji", strings.Repeat("😀", MaxMessageBytes)},
		{"invalid_utf8", strings.Repeat("a\xff", MaxMessageBytes)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, kind := range []EventKind{EventStatus, EventError, EventToolCall} {
				got := bound("k", Event{Kind: kind, Message: c.msg})[0].Message
				if len(got) > MaxMessageBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, TruncatedSuffix) {
					t.Fatalf("%s: %d bytes, valid %v, suffix %v", kind, len(got), utf8.ValidString(got), strings.HasSuffix(got, TruncatedSuffix))
				}
				if len(got) < MaxMessageBytes-3 {
					t.Errorf("%s: cut to %d bytes, more than a character short of the bound", kind, len(got))
				}
			}
		})
	}
	if got := bound("k", Event{Kind: EventStatus, Message: strings.Repeat("m", MaxMessageBytes)})[0].Message; len(got) != MaxMessageBytes || strings.HasSuffix(got, TruncatedSuffix) {
		t.Errorf("a message at the bound was changed")
	}
}

func TestTruncateFallbackWhenBoundIsNotLargerThanSuffix(t *testing.T) {
	cases := []struct {
		s    string
		max  int
		want string
	}{
		{"abcdefghijklmnopqrstuvwxyz", len(TruncatedSuffix), "…"},
		{"abcdefghijklmnopqrstuvwxyz", 3, "…"},
		{"abcdefghijklmnopqrstuvwxyz", 2, ""},
		{"abcdefghijklmnopqrstuvwxyz", len(TruncatedSuffix) + 1, "a" + TruncatedSuffix},
		{"short", 3, "…"},
		{"ab", 3, "ab"},
	}
	for _, c := range cases {
		if got := truncate(c.s, c.max); got != c.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", c.s, c.max, got, c.want)
		}
	}
}

func TestTextOverBoundIsSplitDeterministically(t *testing.T) {
	text := strings.Repeat("a😀é", MaxTextBytes/3) + strings.Repeat("z", MaxTextBytes+5)
	got := bound("k", Event{Kind: EventTextOutput, Channel: "assistant", Text: text, Data: json.RawMessage(`{"n":1}`)})
	if len(got) < 2 {
		t.Fatalf("%d chunks, want ≥ 2", len(got))
	}
	var joined strings.Builder
	for i, ev := range got {
		if len(ev.Text) > MaxTextBytes || !utf8.ValidString(ev.Text) || ev.Text == "" {
			t.Errorf("chunk %d: %d bytes, valid %v", i, len(ev.Text), utf8.ValidString(ev.Text))
		}
		if ev.Channel != "assistant" || string(ev.Data) != `{"n":1}` || ev.AgentKind != "k" {
			t.Errorf("chunk %d lost the event's fields: %+v", i, ev)
		}
		joined.WriteString(ev.Text)
	}
	if joined.String() != text {
		t.Error("the chunks do not rejoin to the text")
	}
	again := bound("k", Event{Kind: EventTextOutput, Text: text})
	for i := range got {
		if got[i].Text != again[i].Text {
			t.Fatal("splitting is not deterministic")
		}
	}
}

func TestDataOverBoundIsReplacedWithDroppedReason(t *testing.T) {
	t.Parallel()
	str := func(n int, c string) json.RawMessage { return json.RawMessage(`"` + strings.Repeat(c, n) + `"`) }
	cases := []struct {
		name string
		data json.RawMessage
		want string
	}{
		{"at_bound", str(MaxDataBytes-2, "x"), string(str(MaxDataBytes-2, "x"))},
		{"over_bound", str(MaxDataBytes-1, "x"), `{"dropped":{"reason":"oversize"}}`},
		// HTML escaping would make this 6× larger: it is measured unescaped.
		{"html_at_bound", str(MaxDataBytes-2, "<"), string(str(MaxDataBytes-2, "<"))},
		{"whitespace_is_not_counted", json.RawMessage("{ \"a\" :\n" + string(str(MaxDataBytes-8, "x")) + " }"), `{"a":` + string(str(MaxDataBytes-8, "x")) + `}`},
		{"not_json", json.RawMessage(`{"a":`), `{"dropped":{"reason":"invalid"}}`},
		{"null", json.RawMessage(`null`), ``},
		{"invalid_utf8", json.RawMessage("{\"a\":\"\xff\"}"), `{"a":"` + "\uFFFD" + `"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, kind := range []EventKind{EventTextOutput, EventStatus, EventToolCall, EventError} {
				got := bound("k", Event{Kind: kind, Message: "m", Data: c.data})[0]
				if string(got.Data) != c.want {
					t.Fatalf("%s: data %.80q…, want %.80q…", kind, got.Data, c.want)
				}
			}
			comp := Completion{Data: c.data}.bounded()
			if string(comp.Data) != c.want {
				t.Fatalf("completion data %.80q…, want %.80q…", comp.Data, c.want)
			}
		})
	}
}

func TestCompletionDataOverBoundIsReplacedWithDroppedReason(t *testing.T) {
	comp := Completion{Data: json.RawMessage(`{"big":"` + strings.Repeat("x", MaxDataBytes) + `"}`)}.bounded()
	if string(comp.Data) != `{"dropped":{"reason":"oversize"}}` {
		t.Fatalf("data %.60q", comp.Data)
	}
}

func TestFinalTextOverBoundIsTruncatedWithSuffixUTF8Safely(t *testing.T) {
	for _, text := range []string{strings.Repeat("😀", MaxFinalTextBytes/4+1), "x" + strings.Repeat("😀", MaxFinalTextBytes/4), strings.Repeat("\xffa", MaxFinalTextBytes/2)} {
		got := Completion{FinalText: text}.bounded().FinalText
		if len(got) > MaxFinalTextBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, TruncatedSuffix) {
			t.Errorf("final text: %d bytes, valid %v", len(got), utf8.ValidString(got))
		}
	}
	if got := (Completion{FinalText: "done"}).bounded().FinalText; got != "done" {
		t.Errorf("short final text changed to %q", got)
	}
}

func TestPayloadRulesPerKind(t *testing.T) {
	cases := []struct {
		in   Event
		want Event
	}{
		{Event{Kind: EventTextOutput, Text: "t", Message: "m"}, Event{AgentKind: "k", Kind: EventTextOutput, Text: "t"}},
		{Event{Kind: EventTextOutput}, Event{AgentKind: "k", Kind: EventTextOutput}},
		{Event{Kind: EventTextOutput, Text: "a\xffb"}, Event{AgentKind: "k", Kind: EventTextOutput, Text: "a\uFFFDb"}},
		{Event{Kind: EventStatus, Text: "t", Message: "m"}, Event{AgentKind: "k", Kind: EventStatus, Message: "m"}},
		{Event{Kind: EventError, Text: "t"}, Event{AgentKind: "k", Kind: EventError, Message: "error"}},
		{Event{Kind: EventError, Message: " \n"}, Event{AgentKind: "k", Kind: EventError, Message: "error"}},
		{Event{Kind: EventToolCall, Text: "t"}, Event{AgentKind: "k", Kind: EventToolCall}},
		{Event{Kind: EventToolResult, Text: "t", Message: "m"}, Event{AgentKind: "k", Kind: EventToolResult, Message: "m"}},
		{Event{Kind: "made_up", Text: "t"}, Event{AgentKind: "k", Kind: EventUnknown}},
		{Event{AgentKind: "spoofed", Kind: EventUnknown}, Event{AgentKind: "k", Kind: EventUnknown}},
	}
	for _, c := range cases {
		got := bound("k", c.in)
		if len(got) != 1 || got[0].AgentKind != c.want.AgentKind || got[0].Kind != c.want.Kind || got[0].Text != c.want.Text || got[0].Message != c.want.Message || got[0].Channel != c.want.Channel {
			t.Errorf("bound(%+v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestEventJSON(t *testing.T) {
	cases := []struct {
		ev   Event
		want string
	}{
		{Event{AgentKind: "k", Kind: EventTextOutput}, `{"agent_kind":"k","kind":"text_output","text":""}`},
		{Event{AgentKind: "k", Kind: EventStatus, Message: "<&>"}, `{"agent_kind":"k","kind":"status","message":"<&>"}`},
		{Event{AgentKind: "k", Kind: EventToolCall, Channel: "tool", Data: json.RawMessage(`{"a":"<b>"}`)}, `{"agent_kind":"k","kind":"tool_call","channel":"tool","data":{"a":"<b>"}}`},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(c.ev); err != nil || strings.TrimSuffix(buf.String(), "\n") != c.want {
			t.Errorf("Encode(%+v) = %s, %v; want %s", c.ev, buf.String(), err, c.want)
		}
		// json.Marshal HTML-escapes what MarshalJSON returns; the JSON is
		// the same value.
		b, err := json.Marshal(c.ev)
		var back Event
		if err != nil || json.Unmarshal(b, &back) != nil || back.Message != c.ev.Message || back.Kind != c.ev.Kind {
			t.Errorf("Marshal(%+v) = %s, %v", c.ev, b, err)
		}
	}
}

// FuzzBounds: every bounded event obeys the bounds, text splitting rejoins
// to the (redacted, valid UTF-8) text, and messages stay valid UTF-8.
func FuzzBounds(f *testing.F) {
	f.Add("hello", "status", "msg", []byte(`{"a":1}`), 0)
	f.Add(strings.Repeat("😀", 20000), "assistant", strings.Repeat("é", 3000), []byte(`"<>"`), 1)
	f.Add("a\xffb", "\xff", "\xff\xfe", []byte("{\"a\":\"\xff\"}"), 2)
	f.Add("", "", "", []byte(`null`), 3)
	kinds := []EventKind{EventTextOutput, EventStatus, EventError, EventToolCall, EventToolResult, EventUnknown, "bogus"}
	f.Fuzz(func(t *testing.T, text, channel, message string, data []byte, k int) {
		if k < 0 {
			k = -k
		}
		kind := kinds[k%len(kinds)]
		// Grow the text past the bound now and then.
		if len(text) > 0 && len(text) < 64 && k%5 == 1 {
			text = strings.Repeat(text, MaxTextBytes/len(text)+2)
		}
		if len(message) > 0 && len(message) < 64 && k%3 == 1 {
			message = strings.Repeat(message, MaxMessageBytes/len(message)+2)
		}
		evs := bound("fuzz", Event{Kind: kind, Channel: channel, Text: text, Message: message, Data: data})
		var joined strings.Builder
		for _, ev := range evs {
			if ev.AgentKind != "fuzz" || len(ev.Channel) > MaxChannelBytes || !utf8.ValidString(ev.Channel) {
				t.Fatalf("kind or channel: %+v", ev)
			}
			if len(ev.Text) > MaxTextBytes || !utf8.ValidString(ev.Text) {
				t.Fatalf("text of %d bytes", len(ev.Text))
			}
			if len(ev.Message) > MaxMessageBytes || !utf8.ValidString(ev.Message) {
				t.Fatalf("message of %d bytes", len(ev.Message))
			}
			if ev.Kind == EventTextOutput && ev.Message != "" || ev.Kind != EventTextOutput && ev.Text != "" || ev.Kind == EventError && ev.Message == "" {
				t.Fatalf("payload rules: %+v", ev)
			}
			if len(ev.Data) > 0 {
				var buf bytes.Buffer
				if json.Compact(&buf, ev.Data) != nil || buf.Len() > MaxDataBytes || !utf8.Valid(ev.Data) {
					t.Fatalf("data of %d bytes is not bounded JSON", len(ev.Data))
				}
			}
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("marshal: %v", err)
			}
			joined.WriteString(ev.Text)
		}
		// Secrets are redacted before the text is cut (a long run of
		// zeros reads as a card number), so the pieces rejoin to the
		// redacted text.
		if kind == EventTextOutput && joined.String() != strings.ToValidUTF8(redactText(text), "\uFFFD") {
			t.Fatal("the pieces do not rejoin to the redacted text")
		}
		if kind != EventTextOutput && len(evs) != 1 {
			t.Fatalf("%d events for a %s event", len(evs), kind)
		}
		if utf8.ValidString(message) && len(message) <= MaxMessageBytes && kind != EventTextOutput && strings.TrimSpace(message) != "" && evs[0].Message != message {
			t.Fatal("a message within the bound was changed")
		}
	})
}
