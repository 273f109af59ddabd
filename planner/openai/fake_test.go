package openai_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// A fake Chat Completions server on loopback. It answers POST
// /v1/chat/completions with its scripted replies in order, in the API's
// wire format: a chat.completion object, or (for a request with "stream":
// true) a text/event-stream of chat.completion.chunk objects ending with
// a usage chunk (when stream_options.include_usage) and [DONE]. The
// shapes follow the API reference's examples.

// call is a scripted tool call.
type call struct{ id, name, args string }

// usage is a scripted answer's usage.
type usage struct{ prompt, completion, cached int }

// reply is one scripted answer: an error status, a response that never
// comes (slow), or a completion.
type reply struct {
	status int               // an error status (with body), or 0
	header map[string]string // headers of an error status
	body   string            // the body of an error status
	slow   bool              // wait until the request is cancelled
	// streamError ends a stream with an error event instead of [DONE].
	streamError string
	// cut ends a stream before its finish reason (a dropped connection).
	cut bool
	// noUsage leaves the usage out: of a completion, and of a stream (as
	// a server that ignores stream_options.include_usage).
	noUsage bool
	// runningUsage puts the running totals in every chunk (as vLLM's
	// continuous usage stats do), the final totals in the usage chunk.
	runningUsage bool
	// shrinkingUsage sends, after the usage chunk, another reporting
	// smaller counts (a broken server).
	shrinkingUsage bool

	text, refusal string
	calls         []call
	finish        string
	usage         usage
}

// seen is a request the server received.
type seen struct {
	at     time.Time
	header http.Header
	body   []byte
	stream bool
}

type fakeServer struct {
	t        testing.TB
	srv      *httptest.Server
	mu       sync.Mutex
	replies  []reply
	requests []seen
	// canceled receives one value per slow request whose context ended.
	canceled chan struct{}
	// repeat answers every request with the last reply once the others
	// are used (for benchmarks).
	repeat bool
	// chunkBytes is the size of the text and argument fragments a stream
	// sends (default 7).
	chunkBytes int
}

func newFake(t testing.TB, replies ...reply) *fakeServer {
	f := &fakeServer{t: t, replies: replies, canceled: make(chan struct{}, 16), chunkBytes: 7}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// url is the base URL to give the planner.
func (f *fakeServer) url() string { return f.srv.URL + "/v1/" }

// seen returns the requests so far.
func (f *fakeServer) seen() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.requests...)
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var in struct {
		Stream        bool `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		f.t.Errorf("fake: request body is not JSON: %v", err)
	}
	f.mu.Lock()
	if !f.repeat {
		f.requests = append(f.requests, seen{at: time.Now(), header: r.Header.Clone(), body: body, stream: in.Stream})
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		f.mu.Unlock()
		f.t.Errorf("fake: %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}
	if len(f.replies) == 0 {
		f.mu.Unlock()
		f.t.Errorf("fake: unexpected request %d", len(f.requests))
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	rep := f.replies[0]
	if !f.repeat || len(f.replies) > 1 {
		f.replies = f.replies[1:]
	}
	f.mu.Unlock()

	switch {
	case rep.slow:
		<-r.Context().Done()
		f.canceled <- struct{}{}
		return
	case rep.status != 0:
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		io.WriteString(w, rep.body)
		return
	case in.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		chunks := f.chunks(rep, in.StreamOptions.IncludeUsage && !rep.noUsage)
		if rep.cut {
			for len(chunks) > 0 && !bytes.Contains(chunks[len(chunks)-1], []byte(`"finish_reason":"`)) {
				chunks = chunks[:len(chunks)-1]
			}
			chunks = chunks[:len(chunks)-1]
		}
		for _, c := range chunks {
			fmt.Fprintf(w, "data: %s\n\n", c)
		}
		if rep.cut {
			return
		}
		if rep.streamError != "" {
			fmt.Fprintf(w, "data: %s\n\n", rep.streamError)
			return
		}
		io.WriteString(w, "data: [DONE]\n\n")
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Write(completion(rep))
	}
}

const (
	fakeID        = "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG"
	fakeCreated   = 1741570283
	fakeModelName = "gpt-4.1-2025-04-14"
)

// completion is rep as a chat.completion object.
func completion(rep reply) []byte {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{}}
	if rep.text != "" {
		msg["content"] = rep.text
	}
	if rep.refusal != "" {
		msg["refusal"] = rep.refusal
	}
	if len(rep.calls) > 0 {
		var calls []any
		for _, c := range rep.calls {
			calls = append(calls, map[string]any{"id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": c.args}})
		}
		msg["tool_calls"] = calls
	}
	cc := map[string]any{
		"id": fakeID, "object": "chat.completion", "created": fakeCreated, "model": fakeModelName,
		"choices":            []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": rep.finish}},
		"usage":              usageJSON(rep.usage),
		"service_tier":       "default",
		"system_fingerprint": "fp_b705f0c291",
	}
	if rep.noUsage {
		delete(cc, "usage")
	}
	return mustJSON(cc)
}

func usageJSON(u usage) map[string]any {
	return map[string]any{
		"prompt_tokens": u.prompt, "completion_tokens": u.completion, "total_tokens": u.prompt + u.completion,
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.cached, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
	}
}

// chunks is rep as chat.completion.chunk objects: the role, the text,
// the refusal and each call in fragments of f.chunkBytes, the finish
// reason, then the usage.
func (f *fakeServer) chunks(rep reply, includeUsage bool) [][]byte {
	sent := 0 // the chunks sent so far, as running completion tokens
	chunk := func(delta map[string]any, finish any) []byte {
		c := map[string]any{"id": fakeID, "object": "chat.completion.chunk", "created": fakeCreated, "model": fakeModelName,
			"service_tier": "default", "system_fingerprint": "fp_b705f0c291",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}}
		if includeUsage {
			c["usage"] = nil
			if rep.runningUsage {
				sent++
				c["usage"] = usageJSON(usage{prompt: rep.usage.prompt, completion: min(sent, rep.usage.completion), cached: rep.usage.cached})
			}
		}
		return mustJSON(c)
	}
	out := [][]byte{chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)}
	for _, s := range split(rep.text, f.chunkBytes) {
		out = append(out, chunk(map[string]any{"content": s}, nil))
	}
	for _, s := range split(rep.refusal, f.chunkBytes) {
		out = append(out, chunk(map[string]any{"refusal": s}, nil))
	}
	for i, c := range rep.calls {
		out = append(out, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.id, "type": "function",
			"function": map[string]any{"name": c.name, "arguments": ""}}}}, nil))
		for _, s := range split(c.args, f.chunkBytes) {
			out = append(out, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": s}}}}, nil))
		}
	}
	out = append(out, chunk(map[string]any{}, rep.finish))
	if includeUsage {
		out = append(out, mustJSON(map[string]any{"id": fakeID, "object": "chat.completion.chunk", "created": fakeCreated, "model": fakeModelName,
			"service_tier": "default", "system_fingerprint": "fp_b705f0c291", "choices": []any{}, "usage": usageJSON(rep.usage)}))
		if rep.shrinkingUsage {
			out = append(out, mustJSON(map[string]any{"id": fakeID, "object": "chat.completion.chunk", "created": fakeCreated, "model": fakeModelName,
				"choices": []any{}, "usage": usageJSON(usage{prompt: 1, completion: 1})}))
		}
	}
	return out
}

// split cuts s into pieces of at most n bytes (bytes, as a server may cut
// inside a character only at token bounds; the test texts are ASCII).
func split(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func mustJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSpace(b.Bytes())
}

// toolCalls is the scripted calls' common shapes.
func lookupCall(id string) call {
	return call{id, "adp_orders__lookup", `{"order_id":"ord_881"}`}
}

func evalCall(id string) call {
	return call{id, "adp_policy__eval", `{"order_id":"ord_881","amount_inr":4200}`}
}

func refundCall(id string, amount int) call {
	return call{id, "adp_payments__issue_refund", fmt.Sprintf(`{"order_id":"ord_881","amount_inr":%d,"currency":"INR","reason":"delivered, in window"}`, amount)}
}

func decisionCall(id, outcome string) call {
	return call{id, "propose_decision", `{"decision_key":"support.refund.execute","outcome":"` + outcome +
		`","rationale":"Order delivered and inside the return window; identity verified.","confidence":0.9,` +
		`"evidence_refs":["kg:order:ord_881#snapshot_kg_2026_05_03_T0930"],"subject_ids":["order:ord_881"]}`}
}

// canonicalReplies are a competent model's answers: lookup and eval in
// parallel, then the refund with the approved decision.
func canonicalReplies() []reply {
	return []reply{
		{calls: []call{lookupCall("call_lookup_1"), evalCall("call_eval_1")}, finish: "tool_calls", usage: usage{prompt: 1900, completion: 60, cached: 0}},
		{text: "Both checks pass; issuing the refund.", calls: []call{refundCall("call_refund_1", 4200), decisionCall("call_decide_1", "approved")},
			finish: "tool_calls", usage: usage{prompt: 2400, completion: 140, cached: 1792}},
	}
}
