package openai

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/planner"
)

// bodyTransport answers every request with body, as JSON or as an event
// stream.
type bodyTransport struct {
	body   []byte
	stream bool
}

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	ct := "application/json"
	if b.stream {
		ct = "text/event-stream"
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Body: io.NopCloser(strings.NewReader(string(b.body))),
		Request: r, ContentLength: int64(len(b.body))}, nil
}

// fixturePlanner is a planner whose API answers body.
func fixturePlanner(t testing.TB, body []byte, stream bool) *Planner {
	t.Helper()
	p, err := New(Options{Model: "gpt-4.1", BaseURL: "http://fixture.invalid/v1/", MaxRetries: -1, Getenv: func(string) string { return "" },
		HTTPClient: &http.Client{Transport: bodyTransport{body, stream}},
		Prices:     map[string]planner.Price{"gpt-4.1": {InputUSDPerMTok: 2, CachedInputUSDPerMTok: 0.5, OutputUSDPerMTok: 8}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// answer calls the API of p the way Plan does, without a request.
func answer(p *Planner, stream bool) (*planner.Response, error) {
	params := openai.ChatCompletionNewParams{Model: "gpt-4.1"}
	if stream {
		return p.stream(context.Background(), nil, nil, params)
	}
	return p.batch(context.Background(), params)
}

func cents(in, cached, out int) float64 {
	return (float64(in-cached)*2 + float64(cached)*0.5 + float64(out)*8) / 1e6 * 100
}

// Answers in the API's wire format (shapes of the API reference's and the
// SDK's examples, and an Ollama answer) become the right responses.
func TestResponses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file string
		want planner.Response
	}{
		{"completion_tool_calls.json", planner.Response{Stop: planner.StopToolUse,
			ToolCalls: []planner.ToolCall{{ID: "call_62136355", Name: "adp_orders__lookup", Arguments: `{"order_id":"ord_881"}`}, {ID: "call_62136356", Name: "adp_policy__eval", Arguments: `{"order_id":"ord_881","amount_inr":4200}`}},
			Usage:     contextos.PlanUsage{InputTokens: 1911, OutputTokens: 58, CachedInputTokens: 1664, CostCents: cents(1911, 1664, 58)}}},
		{"completion_refusal.json", planner.Response{Stop: planner.StopEnd, Refusal: "I'm sorry, I cannot assist with that request.",
			Usage: contextos.PlanUsage{InputTokens: 81, OutputTokens: 11, CostCents: cents(81, 0, 11)}}},
		{"completion_length.json", planner.Response{Stop: planner.StopLength, Text: "Looking the order up first, then",
			ToolCalls: []planner.ToolCall{{ID: "call_cut", Name: "adp_orders__lookup", Arguments: `{"order_id":"ord_`}},
			Usage:     contextos.PlanUsage{InputTokens: 1800, OutputTokens: 16, CostCents: cents(1800, 0, 16)}}},
		{"completion_ollama.json", planner.Response{Stop: planner.StopToolUse,
			ToolCalls: []planner.ToolCall{{ID: "call_tjb6lxwm", Name: "propose_decision", Arguments: `{"decision_key":"support.refund.execute","outcome":"denied","rationale":"outside the window"}`}},
			Usage:     contextos.PlanUsage{InputTokens: 1502, OutputTokens: 41, CostCents: cents(1502, 0, 41)}}},
		{"stream_text_tool.sse", planner.Response{Stop: planner.StopToolUse, Text: "Looking it up.",
			ToolCalls: []planner.ToolCall{{ID: "call_FXoAjBUMcVv1k40fficJ9cSs", Name: "adp_orders__lookup", Arguments: `{"order_id":"ord_881"}`},
				{ID: "call_9b3kLmQ2", Name: "propose_decision", Arguments: `{"decision_key":"support.refund.execute","outcome":"escalated","rationale":"needs a human"}`}},
			Usage: contextos.PlanUsage{InputTokens: 1910, OutputTokens: 100, CachedInputTokens: 1536, CostCents: cents(1910, 1536, 100)}}},
		{"stream_refusal.sse", planner.Response{Stop: planner.StopEnd, Refusal: "I'm sorry, I cannot assist with that request.",
			Usage: contextos.PlanUsage{InputTokens: 81, OutputTokens: 11, CostCents: cents(81, 0, 11)}}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			stream := strings.HasSuffix(tc.file, ".sse")
			got, err := answer(fixturePlanner(t, body, stream), stream)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Errorf("response mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStopReason(t *testing.T) {
	for finish, want := range map[string]planner.StopReason{
		"tool_calls": planner.StopToolUse, "function_call": planner.StopToolUse, "length": planner.StopLength,
		"content_filter": planner.StopRefusal, "stop": planner.StopEnd, "": planner.StopEnd, "eos": planner.StopEnd,
	} {
		if got := stopReason(finish); got != want {
			t.Errorf("stopReason(%q) = %q, want %q", finish, got, want)
		}
	}
}

// Usage counts are kept as the API gives them, cached tokens bounded by
// the input; a model without a price costs 0.
func TestUsage(t *testing.T) {
	p := fixturePlanner(t, nil, false)
	u := p.usage(openai.CompletionUsage{PromptTokens: 10, CompletionTokens: 100, PromptTokensDetails: openai.CompletionUsagePromptTokensDetails{CachedTokens: 20}})
	if u.InputTokens != 10 || u.OutputTokens != 100 || u.CachedInputTokens != 10 || u.CostCents != cents(10, 10, 100) {
		t.Errorf("usage %+v", u)
	}
	p.priced = false
	if u := p.usage(openai.CompletionUsage{PromptTokens: 10, CompletionTokens: 5}); u.CostCents != 0 || u.InputTokens != 10 {
		t.Errorf("unpriced usage %+v", u)
	}
}

// A stream whose chunks belong to two completions is an error.
func TestStreamMixedCompletions(t *testing.T) {
	body := "data: {\"id\":\"a\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"id\":\"b\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"y\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"id\":\"b\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: [DONE]\n\n"
	if _, err := answer(fixturePlanner(t, []byte(body), true), true); err == nil || !strings.Contains(err.Error(), "does not continue") {
		t.Errorf("error %v", err)
	}
}

// FuzzResponse feeds any body to the decoding of an answer, whole and
// streamed: it never panics, and a decoded response has no empty call, a
// known stop reason and cached tokens within the input.
func FuzzResponse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	sse, _ := filepath.Glob(filepath.Join("testdata", "*.sse"))
	for _, name := range append(files, sse...) {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, strings.HasSuffix(name, ".sse"))
	}
	f.Add([]byte(`data: {"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":5,"function":{"arguments":"{"}}]}}]}`+"\n\n"), true)
	f.Add([]byte(`data: {"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":-1,"id":"a","function":{"name":"n"}}]}}]}`+"\n\n"), true)
	f.Add([]byte(`{"choices":[],"usage":{"prompt_tokens":-4,"completion_tokens":9223372036854775807}}`), false)
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		got, err := answer(fixturePlanner(t, body, stream), stream)
		if err != nil {
			return
		}
		switch got.Stop {
		case planner.StopEnd, planner.StopToolUse, planner.StopLength, planner.StopRefusal:
		default:
			t.Errorf("stop %q", got.Stop)
		}
		for i, c := range got.ToolCalls {
			if c == (planner.ToolCall{}) {
				t.Errorf("call %d is empty", i)
			}
		}
		if u := got.Usage; u.CachedInputTokens < 0 || (u.CachedInputTokens > u.InputTokens && u.CachedInputTokens > 0) {
			t.Errorf("usage %+v", u)
		}
	})
}
