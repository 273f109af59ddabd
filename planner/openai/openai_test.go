package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"go.uber.org/goleak"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/planner"
	"github.com/contextos/contextos/planner/internal/plannertest"
	"github.com/contextos/contextos/planner/openai"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ptr[T any](v T) *T { return &v }

func TestNewOptions(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name string
		opts openai.Options
		// want is a part of the error; "" for none.
		want string
	}{
		{"no model", openai.Options{APIKey: "k", Getenv: noEnv}, "Model is required"},
		{"no key, no base URL", openai.Options{Model: "m", Getenv: noEnv}, "OPENAI_API_KEY"},
		{"key from the environment", openai.Options{Model: "m", Getenv: env("OPENAI_API_KEY", "k")}, ""},
		{"no key, base URL from the environment", openai.Options{Model: "m", Getenv: env("OPENAI_BASE_URL", "http://localhost:11434/v1/")}, ""},
		{"no key, base URL", openai.Options{Model: "m", BaseURL: "http://127.0.0.1:8000/v1", Getenv: noEnv}, ""},
		{"relative base URL", openai.Options{Model: "m", BaseURL: "localhost/v1", Getenv: noEnv}, "BaseURL"},
		{"base URL of another scheme", openai.Options{Model: "m", BaseURL: "ftp://h/v1", Getenv: noEnv}, "BaseURL"},
		{"base URL from the environment, bad", openai.Options{Model: "m", Getenv: env("OPENAI_BASE_URL", "::")}, "BaseURL"},
		{"temperature above 2", openai.Options{Model: "m", APIKey: "sk-secret", Temperature: ptr(2.5), Getenv: noEnv}, "Temperature"},
		{"temperature below 0", openai.Options{Model: "m", APIKey: "sk-secret", Temperature: ptr(-0.1), Getenv: noEnv}, "Temperature"},
		{"temperature 0", openai.Options{Model: "m", APIKey: "sk-secret", Temperature: ptr(0.0), Getenv: noEnv}, ""},
		{"negative max tokens", openai.Options{Model: "m", APIKey: "sk-secret", MaxTokens: -1, Getenv: noEnv}, "MaxTokens"},
		{"negative request timeout", openai.Options{Model: "m", APIKey: "sk-secret", RequestTimeout: -time.Second, Getenv: noEnv}, "RequestTimeout"},
		{"negative price", openai.Options{Model: "m", APIKey: "sk-secret", Prices: map[string]planner.Price{"m": {OutputUSDPerMTok: -1}}, Getenv: noEnv}, `Prices["m"]`},
		{"negative retries turn them off", openai.Options{Model: "m", APIKey: "sk-secret", MaxRetries: -1, Getenv: noEnv}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := openai.New(tc.opts)
			if tc.want == "" {
				if err != nil || p == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, openai.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want ErrConfig naming %q", err, tc.want)
			}
			if tc.opts.APIKey != "" && strings.Contains(err.Error(), tc.opts.APIKey) {
				t.Errorf("the error quotes the key")
			}
		})
	}
}

// The key and base URL come from Getenv when the options leave them
// empty, and no key means no Authorization header.
func TestEnvironment(t *testing.T) {
	f := newFake(t, canonicalReplies()...)
	getenv := func(k string) string {
		switch k {
		case openai.EnvAPIKey:
			return "sk-from-env"
		case openai.EnvBaseURL:
			return f.url()
		}
		return ""
	}
	p, err := openai.New(openai.Options{Model: testModel, Getenv: getenv, HTTPClient: f.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	req := planRequest(t)
	if _, err := p.Plan(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := f.seen()[0].header.Get("Authorization"); got != "Bearer sk-from-env" {
		t.Errorf("Authorization %q", got)
	}

	p, err = openai.New(openai.Options{Model: testModel, BaseURL: f.url(), Getenv: noEnv, HTTPClient: f.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Plan(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got, ok := f.seen()[1].header["Authorization"]; ok {
		t.Errorf("sent Authorization %q without a key", got)
	}
}

// planRequest is the PlanRequest of the canonical run's first turn,
// captured from a harness run.
func planRequest(t testing.TB) *contextos.PlanRequest {
	t.Helper()
	reqs := planRequests(t)
	return reqs[0]
}

// planRequests are the canonical run's PlanRequests (first turn, then
// the turn with the lookup and eval results), captured from a harness
// run.
func planRequests(t testing.TB) []*contextos.PlanRequest {
	t.Helper()
	var reqs []*contextos.PlanRequest
	capture := contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
		reqs = append(reqs, req)
		if len(reqs) == 1 {
			return &contextos.Plan{Steps: []contextos.Step{
				{CapabilityID: plannertest.Lookup, Args: map[string]any{"order_id": plannertest.OrderID}},
				{CapabilityID: plannertest.Eval, Args: map[string]any{"order_id": plannertest.OrderID, "amount_inr": 4200}},
			}}, nil
		}
		return &contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: plannertest.DecisionKey, Outcome: "denied"}}, nil
	})
	h := plannertest.New(t, capture, nil)
	h.Invoke()
	if len(reqs) < 2 {
		t.Fatalf("captured %d plan requests", len(reqs))
	}
	return reqs
}

// The first turn's request: its body (golden), the key header, the model,
// the tools with their function names and parameters, the system and
// user messages, temperature and max tokens.
func TestRequestFirstTurn(t *testing.T) {
	f := newFake(t, canonicalReplies()...)
	p := newPlanner(t, f, func(o *openai.Options) { o.Temperature = ptr(0.2); o.MaxTokens = 1024 })
	if _, err := p.Plan(context.Background(), planRequest(t)); err != nil {
		t.Fatal(err)
	}
	s := f.seen()[0]
	if got := s.header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization %q", got)
	}
	if ct := s.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var body struct {
		Model       string           `json:"model"`
		Temperature *float64         `json:"temperature"`
		MaxTokens   int              `json:"max_completion_tokens"`
		Stream      bool             `json:"stream"`
		Messages    []map[string]any `json:"messages"`
		Tools       []struct {
			Type     string `json:"type"`
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(s.body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Model != testModel || body.Temperature == nil || *body.Temperature != 0.2 || body.MaxTokens != 1024 || body.Stream {
		t.Errorf("model %q temperature %v max tokens %d stream %v", body.Model, body.Temperature, body.MaxTokens, body.Stream)
	}
	var names []string
	for _, tool := range body.Tools {
		if tool.Type != "function" {
			t.Errorf("tool type %q", tool.Type)
		}
		names = append(names, tool.Function.Name)
	}
	if want := "adp_orders__lookup adp_payments__issue_refund adp_policy__eval propose_decision"; strings.Join(names, " ") != want {
		t.Errorf("tools %v, want %s", names, want)
	}
	if !bytes.Contains(body.Tools[0].Function.Parameters, []byte(`"pattern":"^ord_"`)) {
		t.Errorf("lookup parameters %s", body.Tools[0].Function.Parameters)
	}
	if bytes.Contains(body.Tools[1].Function.Parameters, []byte(`$schema`)) || !bytes.Contains(body.Tools[1].Function.Parameters, []byte(`"maximum":50000`)) {
		t.Errorf("refund parameters %s", body.Tools[1].Function.Parameters)
	}
	if len(body.Messages) != 2 || body.Messages[0]["role"] != "system" || body.Messages[1]["role"] != "user" {
		t.Errorf("messages %v, want system then user", body.Messages)
	}
	golden(t, "first_turn_request.json", indent(t, s.body))
}

// The second turn carries the first turn's calls as an assistant message
// and each result as a tool message answering its call, in order, with
// the result as JSON data.
func TestRequestToolResults(t *testing.T) {
	f := newFake(t, canonicalReplies()...)
	p := newPlanner(t, f, nil)
	if _, err := p.Plan(context.Background(), planRequests(t)[1]); err != nil {
		t.Fatal(err)
	}
	msgs := messages(t, f.seen()[0].body)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m["role"].(string))
	}
	if got := strings.Join(roles, " "); !strings.HasPrefix(got, "system user assistant tool tool") {
		t.Fatalf("roles %s; last %v", got, msgs[len(msgs)-1])
	}
	calls, _ := msgs[2]["tool_calls"].([]any)
	if len(calls) != 2 {
		t.Fatalf("assistant tool calls %v", msgs[2])
	}
	for i, c := range calls {
		c := c.(map[string]any)
		fn := c["function"].(map[string]any)
		want := []string{"adp_orders__lookup", "adp_policy__eval"}[i]
		if c["type"] != "function" || fn["name"] != want || msgs[3+i]["tool_call_id"] != c["id"] {
			t.Errorf("call %d %v answered by %v", i, c, msgs[3+i]["tool_call_id"])
		}
		var data map[string]any
		if err := json.Unmarshal([]byte(msgs[3+i]["content"].(string)), &data); err != nil {
			t.Errorf("tool result %d is not JSON data: %v", i, err)
		}
	}
	if !strings.Contains(msgs[3]["content"].(string), `"total_inr":4200`) {
		t.Errorf("lookup result %v", msgs[3]["content"])
	}
}

// A streamed request asks for the usage chunk.
func TestRequestStream(t *testing.T) {
	f := newFake(t, canonicalReplies()...)
	p := newPlanner(t, f, func(o *openai.Options) { o.Stream = true })
	if _, err := p.Plan(context.Background(), planRequest(t)); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Stream        bool `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(f.seen()[0].body, &body); err != nil {
		t.Fatal(err)
	}
	if !body.Stream || !body.StreamOptions.IncludeUsage {
		t.Errorf("stream %v include_usage %v", body.Stream, body.StreamOptions.IncludeUsage)
	}
}

// A failed call's error matches the SDK's error type and never quotes
// the key, even when the server's message does.
func TestErrors(t *testing.T) {
	t.Parallel()
	echo := `{"error":{"message":"Incorrect API key provided: ` + testKey + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	for _, tc := range []struct {
		name   string
		stream bool
		rep    reply
		check  func(t *testing.T, err error)
	}{
		{"401", false, reply{status: 401, body: echo}, func(t *testing.T, err error) {
			var ae *sdk.Error
			if !errors.As(err, &ae) || ae.StatusCode != 401 || ae.Code != "invalid_api_key" {
				t.Errorf("errors.As *openai.Error: %v", err)
			}
		}},
		{"401 streamed", true, reply{status: 401, body: echo}, func(t *testing.T, err error) {
			var ae *sdk.Error
			if !errors.As(err, &ae) || ae.StatusCode != 401 {
				t.Errorf("errors.As *openai.Error: %v", err)
			}
		}},
		{"400 not retried", false, reply{status: 400, body: `{"error":{"message":"Invalid schema for function 'x'","type":"invalid_request_error","param":"tools[0].function.parameters","code":"invalid_function_parameters"}}`},
			func(t *testing.T, err error) {
				var ae *sdk.Error
				if !errors.As(err, &ae) || ae.StatusCode != 400 {
					t.Errorf("errors.As *openai.Error: %v", err)
				}
			}},
		{"error event in a stream", true, reply{calls: []call{lookupCall("c")}, finish: "tool_calls",
			streamError: `{"error":{"message":"key ` + testKey + ` was revoked","type":"server_error","code":null}}`},
			func(t *testing.T, err error) {
				var se *ssestream.StreamError
				if !errors.As(err, &se) {
					t.Errorf("errors.As *ssestream.StreamError: %v", err)
				}
			}},
		{"stream cut before its finish reason", true, reply{calls: []call{lookupCall("c1"), evalCall("c2")}, finish: "tool_calls", cut: true},
			func(t *testing.T, err error) {
				if !strings.Contains(err.Error(), "ended before") {
					t.Errorf("error %v", err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tc.rep)
			p := newPlanner(t, f, func(o *openai.Options) { o.Stream = tc.stream })
			plan, err := p.Plan(context.Background(), planRequest(t))
			if err == nil {
				t.Fatalf("no error; plan %+v", plan)
			}
			if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), "SECRET") {
				t.Errorf("the error quotes the key: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "openai: chat completion: ") {
				t.Errorf("error %q", err)
			}
			if n := len(f.seen()); n != 1 {
				t.Errorf("%d requests, want 1 (not retried)", n)
			}
			tc.check(t, err)
		})
	}
}

// MaxRetries bounds the SDK's retries; a negative value turns them off.
func TestMaxRetries(t *testing.T) {
	fail := reply{status: 503, header: map[string]string{"Retry-After-Ms": "1"}, body: `{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`}
	for _, tc := range []struct {
		retries, requests int
	}{{-1, 1}, {1, 2}, {3, 4}} {
		f := newFake(t, fail, fail, fail, fail)
		p := newPlanner(t, f, func(o *openai.Options) { o.MaxRetries = tc.retries })
		_, err := p.Plan(context.Background(), planRequest(t))
		var ae *sdk.Error
		if !errors.As(err, &ae) || ae.StatusCode != 503 {
			t.Errorf("MaxRetries %d: %v", tc.retries, err)
		}
		if n := len(f.seen()); n != tc.requests {
			t.Errorf("MaxRetries %d: %d requests, want %d", tc.retries, n, tc.requests)
		}
	}
}

// RequestTimeout bounds each attempt: a server that never answers is cut
// off, and the error is a timeout. (The SDK does not retry an attempt
// that timed out.)
func TestRequestTimeout(t *testing.T) {
	f := newFake(t, reply{slow: true})
	p := newPlanner(t, f, func(o *openai.Options) { o.RequestTimeout = 50 * time.Millisecond })
	_, err := p.Plan(context.Background(), planRequest(t))
	var te interface{ Timeout() bool }
	if !errors.As(err, &te) || !te.Timeout() {
		t.Fatalf("error %v, want a timeout", err)
	}
	select {
	case <-f.canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the attempt cancelled")
	}
	if n := len(f.seen()); n != 1 {
		t.Errorf("%d requests", n)
	}
}

// Streaming emits the answer's text and tool-call fragments as plan
// deltas: the text in order, each call's capability id (or
// propose_decision) with its first fragment, the arguments in pieces that
// make the call's arguments.
func TestStreamDeltas(t *testing.T) {
	f := newFake(t, canonicalReplies()...)
	f.chunkBytes = 5
	p := newPlanner(t, f, func(o *openai.Options) { o.Stream = true })
	h := plannertest.New(t, p, nil)
	req, rc := h.Request()
	var deltas []contextos.PlanDelta
	for e, err := range h.Runtime().Stream(context.Background(), req, rc) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == contextos.EventPlanDelta {
			deltas = append(deltas, *e.Delta)
		}
	}
	var text strings.Builder
	type tool struct{ name, args string }
	var tools []tool // both turns' calls: 0, 1 of the first, 0, 1 of the second
	base := 0
	for _, d := range deltas {
		text.WriteString(d.Text)
		if d.Text != "" {
			continue
		}
		if d.ToolName != "" && d.ToolIndex == 0 && len(tools) > 0 {
			base = len(tools)
		}
		i := base + d.ToolIndex
		for len(tools) <= i {
			tools = append(tools, tool{})
		}
		if d.ToolName != "" {
			if tools[i].name != "" {
				t.Errorf("call %d named twice", i)
			}
			tools[i].name = d.ToolName
		}
		tools[i].args += d.ToolArgs
	}
	if got, want := text.String(), canonicalReplies()[1].text; got != want {
		t.Errorf("text deltas %q, want %q", got, want)
	}
	var want []tool
	for _, r := range canonicalReplies() {
		for _, c := range r.calls {
			name := strings.Replace(c.name, "__", ".", 1)
			want = append(want, tool{name, c.args})
		}
	}
	if len(tools) != len(want) {
		t.Fatalf("tool deltas %+v, want %+v", tools, want)
	}
	for i := range want {
		if tools[i] != want[i] {
			t.Errorf("call %d deltas %+v, want %+v", i, tools[i], want[i])
		}
	}
	if len(deltas) < 20 {
		t.Errorf("%d deltas: the answer was not streamed in pieces", len(deltas))
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
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
		t.Errorf("%s differs from the golden file (run with -update to accept):\n%s", name, got)
	}
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteByte('\n')
	return out.Bytes()
}
