package anthropic_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeAPI is a loopback Messages API: it answers POST /v1/messages from
// a script, in the API's wire format (a message object, or its SSE
// events when the request says "stream": true), and records every
// request.
type fakeAPI struct {
	t   testing.TB
	srv *httptest.Server

	mu     sync.Mutex
	script []reply
	// repeat, when set, answers every request past the script.
	repeat   *reply
	requests []request
	// canceled receives one value per slow reply whose request ended
	// (the client went away) before it answered.
	canceled chan struct{}
}

// reply is one scripted reply: an answer, an error status, an error
// event in a stream, or a slow reply that waits for its request to be
// canceled.
type reply struct {
	answer *answer
	// status, header and body make an error reply.
	status int
	header map[string]string
	body   string
	// event is an SSE error event's data, sent after message_start.
	event string
	// cut ends a streamed answer before message_stop.
	cut bool
	// restart sends a second message_start, with no content, after the
	// answer's blocks.
	restart bool
	// noUsage leaves the usage out of the message, or of a stream's
	// message_delta.
	noUsage bool
	slow    bool
}

// answer is a scripted model answer.
type answer struct {
	blocks []block
	stop   string
	// refusal is stop_details.explanation of a refusal.
	refusal string
	// Usage: input tokens (not cached), cache reads, cache writes, output.
	in, read, write, out int
}

// block is a text block (name "") or a tool_use block with its
// arguments' text (sent as the input when it is JSON, else as a JSON
// string, as a model that quotes its input does).
type block struct {
	text     string
	id, name string
	args     string
}

func text(s string) block                  { return block{text: s} }
func tool(id, name, args string) block     { return block{id: id, name: name, args: args} }
func ok(a *answer) reply                   { return reply{answer: a} }
func failure(status int, typ string) reply { return reply{status: status, body: errorBody(typ)} }

// errorBody is the API's error body.
func errorBody(typ string) string {
	return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":"the fake says %s"}}`, typ, typ)
}

// request is a request the fake saw.
type request struct {
	at     time.Time
	header http.Header
	body   []byte
}

func newFake(t testing.TB, script ...reply) *fakeAPI {
	f := &fakeAPI{t: t, script: script, canceled: make(chan struct{}, 16)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the fake's base URL.
func (f *fakeAPI) URL() string { return f.srv.URL }

// seen returns the requests so far.
func (f *fakeAPI) seen() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.requests...)
}

// left is how many scripted replies were not used.
func (f *fakeAPI) left() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.script)
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, request{at: time.Now(), header: r.Header.Clone(), body: body})
	var rp reply
	var have bool
	if len(f.script) > 0 {
		rp, have = f.script[0], true
		f.script = f.script[1:]
	} else if f.repeat != nil {
		rp, have = *f.repeat, true
		f.requests = f.requests[:0] // a benchmark's requests are not kept
	}
	f.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		f.t.Errorf("fake: %s %s", r.Method, r.URL.Path)
		writeError(w, http.StatusNotFound, nil, errorBody("not_found_error"))
		return
	}
	if !have {
		f.t.Errorf("fake: unscripted request %d", len(f.seen()))
		writeError(w, http.StatusBadRequest, map[string]string{"x-should-retry": "false"}, errorBody("invalid_request_error"))
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		f.t.Errorf("fake: request body: %v", err)
	}
	switch {
	case rp.slow:
		select {
		case <-r.Context().Done():
			f.canceled <- struct{}{}
		case <-time.After(30 * time.Second):
			f.t.Errorf("fake: the slow request was never canceled")
		}
	case rp.status != 0:
		writeError(w, rp.status, rp.header, rp.body)
	case req.Stream:
		writeStream(w, req.Model, rp)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_fake")
		raw := messageJSON(req.Model, rp.answer)
		if rp.noUsage {
			var m map[string]json.RawMessage
			_ = json.Unmarshal(raw, &m)
			delete(m, "usage")
			raw, _ = json.Marshal(m)
		}
		_, _ = w.Write(raw)
	}
}

func writeError(w http.ResponseWriter, status int, header map[string]string, body string) {
	for k, v := range header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_fake_error")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// The wire objects of a message.
type (
	wireMessage struct {
		ID           string          `json:"id"`
		Type         string          `json:"type"`
		Role         string          `json:"role"`
		Model        string          `json:"model"`
		Content      []any           `json:"content"`
		StopReason   *string         `json:"stop_reason"`
		StopSequence *string         `json:"stop_sequence"`
		StopDetails  *wireRefusal    `json:"stop_details"`
		Usage        json.RawMessage `json:"usage"`
	}
	wireRefusal struct {
		Type        string `json:"type"`
		Category    string `json:"category"`
		Explanation string `json:"explanation"`
	}
	wireText struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	wireToolUse struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
)

// input is a tool block's input: its arguments when they are JSON, else
// the arguments as a JSON string.
func (b block) input() json.RawMessage {
	if json.Valid([]byte(b.args)) {
		return json.RawMessage(b.args)
	}
	s, _ := json.Marshal(b.args)
	return s
}

func usageJSON(a *answer, out int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":%d,"service_tier":"standard"}`,
		a.in, a.write, a.read, out))
}

func refusalOf(a *answer) *wireRefusal {
	if a.stop != "refusal" {
		return nil
	}
	return &wireRefusal{Type: "refusal", Category: "general_harms", Explanation: a.refusal}
}

// messageJSON is a's message object.
func messageJSON(model string, a *answer) []byte {
	m := wireMessage{ID: "msg_01Fake", Type: "message", Role: "assistant", Model: model, Content: []any{},
		StopReason: &a.stop, StopDetails: refusalOf(a), Usage: usageJSON(a, a.out)}
	for _, b := range a.blocks {
		if b.name == "" {
			m.Content = append(m.Content, wireText{Type: "text", Text: b.text})
		} else {
			m.Content = append(m.Content, wireToolUse{Type: "tool_use", ID: b.id, Name: b.name, Input: b.input()})
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return out
}

// chunks cuts s into pieces of at most n bytes (the API streams text and
// arguments in pieces).
func chunks(s string, n int) []string {
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

// writeStream sends rp's answer as the API's SSE events.
func writeStream(w http.ResponseWriter, model string, rp reply) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("request-id", "req_fake_stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(event string, data any) {
		raw, err := json.Marshal(data)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, raw)
		if fl != nil {
			fl.Flush()
		}
	}
	a := rp.answer
	if a == nil {
		a = &answer{}
	}
	start := wireMessage{ID: "msg_01Fake", Type: "message", Role: "assistant", Model: model, Content: []any{}, Usage: usageJSON(a, 1)}
	send("message_start", map[string]any{"type": "message_start", "message": start})
	if rp.event != "" {
		fmt.Fprintf(w, "event: error\ndata: %s\n\n", rp.event)
		return
	}
	send("ping", map[string]any{"type": "ping"})
	for i, b := range a.blocks {
		if b.name == "" {
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": wireText{Type: "text", Text: ""}})
			for _, c := range chunks(b.text, 7) {
				send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": c}})
			}
		} else {
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": wireToolUse{Type: "tool_use", ID: b.id, Name: b.name, Input: json.RawMessage(`{}`)}})
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
			for _, c := range chunks(b.args, 9) {
				send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": c}})
			}
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	if rp.cut {
		return
	}
	if rp.restart {
		send("message_start", map[string]any{"type": "message_start", "message": start})
	}
	md := map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": a.stop, "stop_sequence": nil, "stop_details": refusalOf(a)},
		"usage": json.RawMessage(`{"output_tokens":` + strconv.Itoa(a.out) + `}`)}
	if rp.noUsage {
		delete(md, "usage")
	}
	send("message_delta", md)
	send("message_stop", map[string]any{"type": "message_stop"})
}

// prettyJSON indents raw for a golden file.
func prettyJSON(t testing.TB, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		t.Fatalf("indent: %v", err)
	}
	b.WriteByte('\n')
	return b.Bytes()
}
