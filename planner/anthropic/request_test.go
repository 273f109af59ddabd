package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/planner"
	"github.com/contextos/contextos/planner/anthropic"
	"github.com/contextos/contextos/planner/internal/plannertest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// recorder is a planner that records what it was asked and what its
// planner answered.
type recorder struct {
	p    contextos.Planner
	mu   sync.Mutex
	reqs []*contextos.PlanRequest
	errs []error
}

func (r *recorder) Plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	plan, err := r.p.Plan(ctx, req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	r.errs = append(r.errs, err)
	return plan, err
}

func (r *recorder) lastErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) == 0 {
		return nil
	}
	return r.errs[len(r.errs)-1]
}

// wire is the part of a request body the tests read.
type wire struct {
	Model       string   `json:"model"`
	MaxTokens   int      `json:"max_tokens"`
	Temperature *float64 `json:"temperature"`
	Stream      bool     `json:"stream"`
	System      []struct {
		Type         string          `json:"type"`
		Text         string          `json:"text"`
		CacheControl json.RawMessage `json:"cache_control"`
	} `json:"system"`
	Messages []struct {
		Role    string      `json:"role"`
		Content []wireBlock `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

type wireBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      []wireBlock     `json:"content"`
	CacheControl json.RawMessage `json:"cache_control"`
}

func decodeWire(t *testing.T, body []byte) wire {
	t.Helper()
	var w wire
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatalf("request body: %v", err)
	}
	return w
}

// jsonDiff decodes want and got and returns their cmp.Diff, "" when the
// two documents hold the same JSON value.
func jsonDiff(t *testing.T, want, got []byte) string {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(want, &x); err != nil {
		t.Fatalf("%s: %v", want, err)
	}
	if err := json.Unmarshal(got, &y); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	return cmp.Diff(x, y)
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the request sent (run with -update to accept):\n%s", path, got)
	}
}

// TestRequest checks the requests of the canonical run: headers, model,
// max tokens, temperature, system and context with cache breakpoints,
// tools as the conversation has them, the history as tool_use and
// tool_result blocks (results as data, in one user message), against
// golden bodies of the first two turns.
func TestRequest(t *testing.T) {
	f := newFake(t, ok(lookupAndEval()), ok(refundAndDecide()))
	temp := 0.2
	rec := &recorder{p: newPlanner(t, f, false, func(o *anthropic.Options) { o.Temperature = &temp })}
	h := plannertest.New(t, rec, nil)
	res := h.Invoke()
	contextostest.AssertPending(t, res, plannertest.FinanceGate)
	reqs := f.seen()
	if len(reqs) != 2 || len(rec.reqs) != 2 {
		t.Fatalf("%d requests, %d plan requests", len(reqs), len(rec.reqs))
	}
	golden(t, "request_turn0.json", prettyJSON(t, reqs[0].body))
	golden(t, "request_turn1.json", prettyJSON(t, reqs[1].body))

	for i, r := range reqs {
		for k, want := range map[string]string{"X-Api-Key": testKey, "Anthropic-Version": "2023-06-01", "Content-Type": "application/json"} {
			if got := r.header.Get(k); got != want {
				t.Errorf("request %d: %s = %q, want %q", i, k, got, want)
			}
		}
		if r.header.Get("Authorization") != "" {
			t.Errorf("request %d sends an Authorization header", i)
		}
		conv, err := planner.Render(rec.reqs[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		w := decodeWire(t, r.body)
		if w.Model != testModel || w.MaxTokens != anthropic.DefaultMaxTokens || w.Temperature == nil || *w.Temperature != temp || w.Stream {
			t.Errorf("request %d: model %q, max_tokens %d, temperature %v, stream %v", i, w.Model, w.MaxTokens, w.Temperature, w.Stream)
		}
		// System: one block, the conversation's system, cached.
		if len(w.System) != 1 || w.System[0].Type != "text" || w.System[0].Text != conv.System || string(w.System[0].CacheControl) != `{"type":"ephemeral"}` {
			t.Errorf("request %d: system %+v", i, w.System)
		}
		// Tools: the conversation's, in order, with their parameters.
		if len(w.Tools) != len(conv.Tools) {
			t.Fatalf("request %d: %d tools, want %d", i, len(w.Tools), len(conv.Tools))
		}
		for j, tl := range conv.Tools {
			got := w.Tools[j]
			if got.Name != tl.Name || got.Description != tl.Description {
				t.Errorf("request %d: tool %d = %s %q, want %s %q", i, j, got.Name, got.Description, tl.Name, tl.Description)
			}
			if diff := jsonDiff(t, tl.Parameters, got.InputSchema); diff != "" {
				t.Errorf("request %d: tool %d (%s) input schema mismatch (-want +got):\n%s", i, j, tl.Name, diff)
			}
		}
		// The context message first, with the breakpoint on its block.
		m0 := w.Messages[0]
		if m0.Role != "user" || len(m0.Content) == 0 || m0.Content[0].Text != conv.Messages[0].Text || string(m0.Content[0].CacheControl) != `{"type":"ephemeral"}` {
			t.Errorf("request %d: first message %+v", i, m0)
		}
	}
	names := []string{}
	for _, tl := range decodeWire(t, reqs[0].body).Tools {
		names = append(names, tl.Name)
	}
	if diff := cmp.Diff([]string{fnLookup, fnRefund, fnEval, fnDecision}, names); diff != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", diff)
	}

	// Turn 1: context, the assistant's calls, then both results and the
	// runtime's word to go on in one user message, the results first,
	// each the step's result as JSON data.
	w := decodeWire(t, reqs[1].body)
	if len(w.Messages) != 3 {
		t.Fatalf("turn 1 has %d messages, want 3", len(w.Messages))
	}
	asst, results := w.Messages[1], w.Messages[2]
	if asst.Role != "assistant" || len(asst.Content) != 2 || asst.Content[0].Type != "tool_use" || asst.Content[0].Name != fnLookup ||
		string(asst.Content[0].Input) != `{"order_id":"ord_881"}` || asst.Content[1].Name != fnEval {
		t.Errorf("assistant message %+v", asst)
	}
	if results.Role != "user" || len(results.Content) != 3 || results.Content[2].Type != "text" {
		t.Fatalf("results message %+v", results)
	}
	for j, b := range results.Content[:2] {
		if b.Type != "tool_result" || b.ToolUseID != asst.Content[j].ID || len(b.Content) != 1 || !json.Valid([]byte(b.Content[0].Text)) {
			t.Errorf("result %d: %+v", j, b)
		}
		if len(b.CacheControl) != 0 {
			t.Errorf("result %d has a cache breakpoint", j)
		}
	}
	if !strings.Contains(results.Content[0].Content[0].Text, plannertest.CustomerID) {
		t.Errorf("the lookup result does not carry the order: %s", results.Content[0].Content[0].Text)
	}
}

// A replan turn with results: the results and the replan reason are one
// user message, the results first.
func TestRequestMergesReplanIntoResults(t *testing.T) {
	textOnly := &answer{blocks: []block{text("Done looking.")}, stop: "end_turn", in: 10, out: 3}
	f := newFake(t, ok(lookupAndEval()), ok(textOnly), ok(refundAndDecide()))
	h := plannertest.New(t, newPlanner(t, f, false, nil), nil)
	res := h.Invoke()
	contextostest.AssertPending(t, res, plannertest.FinanceGate)
	reqs := f.seen()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	w := decodeWire(t, reqs[2].body)
	roles := []string{}
	for _, m := range w.Messages {
		roles = append(roles, m.Role)
	}
	if diff := cmp.Diff([]string{"user", "assistant", "user"}, roles); diff != "" {
		t.Fatalf("roles mismatch (-want +got):\n%s", diff)
	}
	last := w.Messages[2].Content
	if len(last) != 3 || last[0].Type != "tool_result" || last[1].Type != "tool_result" || last[2].Type != "text" ||
		!strings.Contains(last[2].Text, planner.ReplanNoToolCall) {
		t.Errorf("last message %+v", last)
	}
}

// The same answers batch and streamed give byte-identical plans, and the
// stream's plan deltas spell the answers' text and calls.
func TestStreamMatchesBatch(t *testing.T) {
	script := func() []reply { return []reply{ok(lookupAndEval()), ok(refundAndDecide())} }
	plans := map[bool][]byte{}
	for _, stream := range []bool{false, true} {
		f := newFake(t, script()...)
		h := plannertest.New(t, newPlanner(t, f, stream, nil), nil)
		res := h.Approve(h.Invoke())
		plannertest.AssertDecided(t, res, "approved")
		raw, err := json.Marshal(h.Plans(res))
		if err != nil {
			t.Fatal(err)
		}
		plans[stream] = raw
	}
	if !bytes.Equal(plans[false], plans[true]) {
		t.Errorf("plans differ:\nbatch  %s\nstream %s", plans[false], plans[true])
	}

	// The deltas of a streamed run.
	f := newFake(t, script()...)
	h := plannertest.New(t, newPlanner(t, f, true, nil), nil)
	req, rc := h.Request()
	type call struct{ name, args string }
	text := map[int]string{}
	calls := map[int]map[int]*call{}
	turn := 0 // the deltas before the first plan event are turn 0's
	calls[0] = map[int]*call{}
	for ev, err := range h.Runtime().Stream(context.Background(), req, rc) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == contextos.EventPlan {
			turn++
			calls[turn] = map[int]*call{}
		}
		if ev.Kind != contextos.EventPlanDelta {
			continue
		}
		d := ev.Delta
		text[turn] += d.Text
		if d.ToolName != "" || d.ToolArgs != "" {
			c := calls[turn][d.ToolIndex]
			if c == nil {
				c = &call{}
				calls[turn][d.ToolIndex] = c
			}
			if d.ToolName != "" {
				if c.name != "" || c.args != "" {
					t.Errorf("turn %d call %d: a name after the first fragment", turn, d.ToolIndex)
				}
				c.name = d.ToolName
			}
			c.args += d.ToolArgs
		}
	}
	if text[0] != "I'll look up the order and check the refund policy." || text[1] != "" {
		t.Errorf("text deltas %v", text)
	}
	want := map[int]map[int]*call{
		0: {0: {plannertest.Lookup, `{"order_id":"ord_881"}`}, 1: {plannertest.Eval, `{"order_id": "ord_881", "amount_inr": 4200}`}},
		1: {0: {plannertest.Refund, `{"order_id":"ord_881","amount_inr":4200,"currency":"INR"}`}, 1: {planner.DecisionTool, refundAndDecide().blocks[1].args}},
		2: {},
	}
	if diff := cmp.Diff(want, calls, cmp.AllowUnexported(call{})); diff != "" {
		t.Errorf("tool deltas mismatch (-want +got):\n%s", diff)
	}
}

func TestNewOptions(t *testing.T) {
	t.Parallel()
	noEnv := func(string) string { return "" }
	tooHot, nan := 1.5, float64(0)
	nan /= nan
	for _, tc := range []struct {
		name string
		o    anthropic.Options
		want string
	}{
		{"no model", anthropic.Options{APIKey: testKey, Getenv: noEnv}, "Model is required"},
		{"no key", anthropic.Options{Model: testModel, Getenv: noEnv}, "ANTHROPIC_API_KEY"},
		{"base url", anthropic.Options{Model: testModel, APIKey: testKey, BaseURL: "api.example.com", Getenv: noEnv}, "BaseURL"},
		{"base url from env", anthropic.Options{Model: testModel, APIKey: testKey, Getenv: func(k string) string {
			return map[string]string{anthropic.EnvBaseURL: "ftp://x"}[k]
		}}, "BaseURL"},
		{"temperature", anthropic.Options{Model: testModel, APIKey: testKey, Temperature: &tooHot, Getenv: noEnv}, "Temperature"},
		{"temperature NaN", anthropic.Options{Model: testModel, APIKey: testKey, Temperature: &nan, Getenv: noEnv}, "Temperature"},
		{"max tokens", anthropic.Options{Model: testModel, APIKey: testKey, MaxTokens: -1, Getenv: noEnv}, "MaxTokens"},
		{"max tokens batch", anthropic.Options{Model: testModel, APIKey: testKey, MaxTokens: 64000, Getenv: noEnv}, "MaxTokens 64000 needs Stream"},
		{"request timeout", anthropic.Options{Model: testModel, APIKey: testKey, RequestTimeout: -time.Second, Getenv: noEnv}, "RequestTimeout"},
		{"price", anthropic.Options{Model: testModel, APIKey: testKey, Getenv: noEnv,
			Prices: map[string]planner.Price{"b": {}, "a": {OutputUSDPerMTok: -1}}}, `Prices["a"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := anthropic.New(tc.o)
			if !errors.Is(err, anthropic.ErrConfig) || !strings.Contains(err.Error(), tc.want) || p != nil {
				t.Fatalf("New = %v, %v; want ErrConfig naming %q", p, err, tc.want)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("the error quotes the key: %v", err)
			}
		})
	}
	for _, o := range []anthropic.Options{
		{Model: testModel, APIKey: testKey, MaxTokens: 64000, Stream: true, Getenv: noEnv},
		{Model: testModel, APIKey: testKey, MaxTokens: 64000, RequestTimeout: time.Minute, Getenv: noEnv},
		{Model: testModel, Getenv: func(k string) string { return map[string]string{anthropic.EnvAPIKey: testKey}[k] }},
	} {
		if _, err := anthropic.New(o); err != nil {
			t.Errorf("New(%+v): %v", o, err)
		}
	}
}

// The key and base URL come from Getenv when the options leave them
// empty, never from the process environment.
func TestEnvironment(t *testing.T) {
	f := newFake(t, ok(lookupAndEval()), ok(refundAndDecide()))
	t.Setenv(anthropic.EnvAPIKey, "sk-ant-process-env")
	t.Setenv(anthropic.EnvBaseURL, "http://127.0.0.1:1")
	env := map[string]string{anthropic.EnvAPIKey: "sk-ant-from-getenv", anthropic.EnvBaseURL: f.URL()}
	p, err := anthropic.New(anthropic.Options{Model: testModel, HTTPClient: f.srv.Client(), Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	h := plannertest.New(t, p, nil)
	contextostest.AssertPending(t, h.Invoke(), plannertest.FinanceGate)
	for _, r := range f.seen() {
		if k := r.header.Get("X-Api-Key"); k != "sk-ant-from-getenv" {
			t.Errorf("x-api-key %q", k)
		}
	}
}

// API errors: returned wrapped (errors.As to *anthropic.Error), with the
// status and type but neither the key nor the server's text; the record
// says the planner failed.
func TestAPIErrors(t *testing.T) {
	secretBody := `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key ` + testKey + `"}}`
	overloaded := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded ` + testKey + `"}}`
	for _, tc := range []struct {
		name   string
		stream bool
		script []reply
		popts  func(*anthropic.Options)
		status int
		typ    string
		msg    string
		sent   int
	}{
		{name: "401", script: []reply{{status: 401, body: secretBody}}, status: 401, typ: "authentication_error", msg: "status 401", sent: 1},
		{name: "401 stream", stream: true, script: []reply{{status: 401, body: secretBody}}, status: 401, typ: "authentication_error", msg: "status 401", sent: 1},
		{name: "error event", stream: true, script: []reply{{answer: lookupAndEval(), event: overloaded}}, status: 200, typ: "overloaded_error", msg: "error event", sent: 1},
		{name: "retries off", script: []reply{failure(500, "api_error")}, popts: func(o *anthropic.Options) { o.MaxRetries = -1 },
			status: 500, typ: "api_error", msg: "status 500", sent: 1},
		{name: "retries exhausted", script: []reply{failure(529, "overloaded_error"), failure(529, "overloaded_error")},
			popts: func(o *anthropic.Options) { o.MaxRetries = 1 }, status: 529, typ: "overloaded_error", msg: "status 529", sent: 2},
		{name: "not retried", script: []reply{{status: 400, body: errorBody("invalid_request_error")}}, status: 400, typ: "invalid_request_error", msg: "status 400", sent: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tc.script...)
			rec := &recorder{p: newPlanner(t, f, tc.stream, tc.popts)}
			h := plannertest.New(t, rec, nil)
			res := h.Invoke()
			contextostest.AssertStatus(t, res, decision.Escalated)
			if !strings.Contains(res.Record.Rationale.Summary, "planner_failed") {
				t.Errorf("summary %q", res.Record.Rationale.Summary)
			}
			err := rec.lastErr()
			var ae *sdk.Error
			if !errors.As(err, &ae) || ae.StatusCode != tc.status || string(ae.Type()) != tc.typ {
				t.Fatalf("error %v (%T), want an *anthropic.Error %d %s", err, err, tc.status, tc.typ)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.msg) || !strings.Contains(msg, tc.typ) ||
				strings.Contains(msg, testKey) || strings.Contains(msg, "the fake says") || strings.Contains(msg, "Overloaded") {
				t.Errorf("message %q", msg)
			}
			if n := len(f.seen()); n != tc.sent {
				t.Errorf("%d requests, want %d", n, tc.sent)
			}
			if b, _ := json.Marshal(res.Record); bytes.Contains(b, []byte(testKey)) {
				t.Errorf("the record quotes the key")
			}
			h.Replay(res)
		})
	}
}

// A stream that ends before message_stop is an error, not a plan.
func TestStreamCut(t *testing.T) {
	f := newFake(t, reply{answer: lookupAndEval(), cut: true})
	rec := &recorder{p: newPlanner(t, f, true, nil)}
	h := plannertest.New(t, rec, nil)
	res := h.Invoke()
	contextostest.AssertStatus(t, res, decision.Escalated)
	if err := rec.lastErr(); err == nil || !strings.Contains(err.Error(), "message_stop") {
		t.Errorf("error %v", err)
	}
	if n := h.Calls(plannertest.Lookup); n != 0 {
		t.Errorf("a cut stream's calls ran: %d", n)
	}
}

// RequestTimeout bounds each attempt: a slow attempt is cut and retried.
func TestRequestTimeoutRetries(t *testing.T) {
	f := newFake(t, reply{slow: true}, ok(lookupAndEval()), ok(refundAndDecide()))
	h := plannertest.New(t, newPlanner(t, f, false, func(o *anthropic.Options) { o.RequestTimeout = 200 * time.Millisecond }), nil)
	res := h.Invoke()
	contextostest.AssertPending(t, res, plannertest.FinanceGate)
	select {
	case <-f.canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow attempt was not canceled")
	}
	if n := len(f.seen()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}

// The SDK's retries follow the server: a 503 that says x-should-retry:
// false is not retried.
func TestShouldRetryHeader(t *testing.T) {
	f := newFake(t, reply{status: http.StatusServiceUnavailable, header: map[string]string{"x-should-retry": "false"}, body: errorBody("api_error")})
	h := plannertest.New(t, newPlanner(t, f, false, nil), nil)
	res := h.Invoke()
	contextostest.AssertStatus(t, res, decision.Escalated)
	if n := len(f.seen()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}
