package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/internal/orlojpeer"
)

// label is a named string type: its JSON form is a string.
type label string

// panicky is a value whose JSON encoding panics with what it holds.
type panicky struct{ secret string }

func (p panicky) MarshalJSON() ([]byte, error) { panic(p.secret) }

// wireShape is one output an executor answers: the output.result text a
// caller typed as Orloj's reads, and the output our own client reads back.
type wireShape struct {
	name   string
	output map[string]any
	result string         // what an upstream caller reads in output.result
	back   map[string]any // what our client reads (the output itself when nil)
}

func wireShapes() []wireShape {
	return []wireShape{
		{name: "string", output: map[string]any{"result": "refund issued"}, result: "refund issued"},
		{name: "string holding a number", output: map[string]any{"result": "42"}, result: "42"},
		{name: "string holding an object", output: map[string]any{"result": `{"a":1}`}, result: `{"a":1}`},
		{name: "string with markup and unicode", output: map[string]any{"result": "<b>₹4200</b> & ✓"}, result: "<b>₹4200</b> & ✓"},
		{name: "integer", output: map[string]any{"result": 4200}, result: "4200", back: map[string]any{"result": 4200.0}},
		{name: "float", output: map[string]any{"result": 0.25}, result: "0.25"},
		{name: "large number", output: map[string]any{"result": 1e21}, result: "1e+21"},
		{name: "negative number", output: map[string]any{"result": -3.5}, result: "-3.5"},
		{name: "json.Number", output: map[string]any{"result": json.Number("12345678901234567890")}, result: "12345678901234567890",
			back: map[string]any{"result": 12345678901234567890.0}},
		{name: "object", output: map[string]any{"result": map[string]any{"amount_inr": 4200.0, "note": "<b>&</b>"}},
			result: `{"amount_inr":4200,"note":"<b>&</b>"}`},
		{name: "empty object", output: map[string]any{"result": map[string]any{}}, result: `{}`},
		{name: "array", output: map[string]any{"result": []any{"a", 1.0, nil, false}}, result: `["a",1,null,false]`},
		{name: "true", output: map[string]any{"result": true}, result: "true"},
		{name: "false", output: map[string]any{"result": false}, result: "false"},
		{name: "null", output: map[string]any{"result": nil}, result: "null"},
		{name: "raw JSON", output: map[string]any{"result": json.RawMessage(` {"x": [1, 2]} `)}, result: `{"x":[1,2]}`,
			back: map[string]any{"result": map[string]any{"x": []any{1.0, 2.0}}}},
		{name: "raw JSON string", output: map[string]any{"result": json.RawMessage(`"done"`)}, result: "done", back: map[string]any{"result": "done"}},
		{name: "named string type", output: map[string]any{"result": label("refund")}, result: "refund", back: map[string]any{"result": "refund"}},
		{name: "time", output: map[string]any{"result": time.Date(2026, 3, 29, 10, 0, 0, 0, time.UTC)}, result: "2026-03-29T10:00:00Z",
			back: map[string]any{"result": "2026-03-29T10:00:00Z"}},
		{name: "no result, other members of any JSON", output: map[string]any{"summary": "s", "count": 3.0, "items": []any{map[string]any{"id": 1.0}}}, result: ""},
		{name: "number result beside other members", output: map[string]any{"result": 1.0, "count": 2.0, "ok": true}, result: "1"},
	}
}

// roundTrip is v as our client reads it after JSON (numbers float64).
func roundTrip(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every reply NewHandler writes decodes for a caller typed as Orloj's
// (output.result a string), whatever the executor's output holds, over the
// external and webhook-callback clients: a result that is not a string
// arrives as its JSON text, passes the conformance harness's checks, and
// our own client reads the value back as the executor gave it, while a
// string result stays that string.
func TestEveryReplyShapeDecodesForAnUpstreamCaller(t *testing.T) {
	t.Parallel()
	for _, c := range wireShapes() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(transport.NewHandler(transport.ExecutorFunc(func(context.Context, *transport.Request) *transport.Response {
				return &transport.Response{Status: transport.StatusOK, Output: c.output}
			})))
			defer srv.Close()
			req := orlojpeer.BaseRequest("adp_payments.issue_refund", "req-123")
			for _, via := range []string{"external", "webhook-callback"} {
				var resp orlojpeer.Response
				var raw []byte
				var err error
				if via == "external" {
					resp, raw, err = orlojpeer.External(bg, srv.Client(), srv.URL, req)
				} else {
					resp, err = orlojpeer.WebhookCall(bg, srv.Client(), srv.URL, req, time.Millisecond)
				}
				if err != nil {
					t.Fatalf("%s: the upstream caller cannot decode the reply: %v\n%s", via, err, raw)
				}
				if ps := orlojpeer.Validate(req, resp, &orlojpeer.Expect{Status: "ok"}); len(ps) > 0 {
					t.Errorf("%s: conformance: %s\n%s", via, strings.Join(ps, "\n"), raw)
				}
				if resp.Output.Result != c.result {
					t.Errorf("%s: output.result %q, want %q\n%s", via, resp.Output.Result, c.result, raw)
				}
			}
			a := newAdapter(t, transport.Endpoint{Transport: "external", URL: srv.URL}, nil)
			out, err := a.Call(bg, call(1))
			if err != nil {
				t.Fatal(err)
			}
			want := c.back
			if want == nil {
				want = roundTrip(t, c.output)
			}
			if d := cmp.Diff(want, out.Output); d != "" {
				t.Errorf("our client read (-want +got):\n%s", d)
			}
		})
	}
}

// An output with no JSON form (NaN, infinity, a value whose encoding
// fails or panics) cannot be sent; the tool ran, so the reply is a
// non-retryable execution_failed that every caller decodes, and that
// never carries what the value held.
func TestAnUnencodableOutputIsANonRetryableFailure(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-unencodable-9e8f7a6b5c4d"
	for _, c := range []struct {
		name   string
		output map[string]any
	}{
		{"NaN result", map[string]any{"result": math.NaN()}},
		{"infinite member beside a string result", map[string]any{"result": "done", "ratio": math.Inf(1)}},
		{"a channel", map[string]any{"result": make(chan int)}},
		{"a value whose encoding panics", map[string]any{"result": "done", "extra": panicky{secret}}},
		{"a result whose encoding panics", map[string]any{"result": panicky{secret}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			srv := httptest.NewServer(transport.NewHandler(transport.ExecutorFunc(func(context.Context, *transport.Request) *transport.Response {
				runs.Add(1)
				return &transport.Response{Status: transport.StatusOK, Output: c.output}
			})))
			defer srv.Close()
			req := orlojpeer.BaseRequest("adp_payments.issue_refund", "req-123")
			no := false
			resp, raw, err := orlojpeer.External(bg, srv.Client(), srv.URL, req)
			if err != nil {
				t.Fatalf("the upstream caller cannot decode the reply: %v\n%s", err, raw)
			}
			if ps := orlojpeer.Validate(req, resp, &orlojpeer.Expect{Status: "error", Code: "execution_failed", Reason: "tool_backend_failure", Retryable: &no}); len(ps) > 0 {
				t.Errorf("conformance: %s\n%s", strings.Join(ps, "\n"), raw)
			}
			if bytes.Contains(raw, []byte(secret)) {
				t.Errorf("the reply carries the value's secret: %s", raw)
			}
			a := newAdapter(t, transport.Endpoint{Transport: "external", URL: srv.URL}, nil)
			_, err = a.Call(bg, call(1))
			if te := toolErr(t, err); te.Code != gateway.CodeExecutionFailed || te.Retryable {
				t.Errorf("our client: %+v", te)
			}
			if runs.Load() != 2 {
				t.Errorf("the executor ran %d times, want once per caller", runs.Load())
			}
		})
	}
}

// A caller that retries what it cannot read (Orloj folds an undecodable
// reply into a retryable execution_failed) runs a completed tool once,
// whatever its result holds.
func TestAnUpstreamCallerNeverRepeatsACompletedCall(t *testing.T) {
	t.Parallel()
	for _, c := range wireShapes() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			srv := httptest.NewServer(transport.NewHandler(transport.ExecutorFunc(func(context.Context, *transport.Request) *transport.Response {
				runs.Add(1)
				return &transport.Response{Status: transport.StatusOK, Output: c.output}
			})))
			defer srv.Close()
			resp, attempts, err := orlojpeer.Governed(bg, 3, func(ctx context.Context, attempt int) (orlojpeer.Response, error) {
				req := orlojpeer.BaseRequest("adp_payments.issue_refund", "req-123")
				req.Attempt = attempt
				r, _, err := orlojpeer.External(ctx, srv.Client(), srv.URL, req)
				return r, err
			})
			if err != nil || resp.Status != "ok" || attempts != 1 || runs.Load() != 1 {
				t.Fatalf("status %q after %d attempts (%v): the tool ran %d times, want once", resp.Status, attempts, err, runs.Load())
			}
		})
	}
}

// Our client tells a result that travels as JSON text from a string
// result by result_encoding alone: without it a string result is that
// string, whatever it holds; with "json" the text is decoded; a marker that
// does not hold makes the reply an invalid contract response.
func TestResultEncodingIsReadOnlyWhenMarked(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body string
		want       map[string]any // nil: refused with ErrContract
	}{
		{"a string result is that string", `{"status":"ok","output":{"result":"42"}}`, map[string]any{"result": "42"}},
		{"a string result holding an object is text", `{"status":"ok","output":{"result":"{\"a\":1}"}}`, map[string]any{"result": `{"a":1}`}},
		{"a native result is read as is", `{"status":"ok","output":{"result":{"a":1}}}`, map[string]any{"result": map[string]any{"a": 1.0}}},
		{"a marked number", `{"status":"ok","output":{"result":"42"},"result_encoding":"json"}`, map[string]any{"result": 42.0}},
		{"a marked object beside other members", `{"status":"ok","output":{"result":"{\"a\":[1,null]}","n":2},"result_encoding":"json"}`,
			map[string]any{"result": map[string]any{"a": []any{1.0, nil}}, "n": 2.0}},
		{"a marked null", `{"status":"ok","output":{"result":"null"},"result_encoding":"json"}`, map[string]any{"result": nil}},
		{"a marked string", `{"status":"ok","output":{"result":"\"x\""},"result_encoding":"json"}`, map[string]any{"result": "x"}},
		{"the marker's case and space", `{"status":"ok","output":{"result":"true"},"result_encoding":" JSON "}`, map[string]any{"result": true}},
		{"a marker on a native result", `{"status":"ok","output":{"result":42},"result_encoding":"json"}`, nil},
		{"a marker without a result", `{"status":"ok","output":{"x":"1"},"result_encoding":"json"}`, nil},
		{"a marker without an output", `{"status":"ok","result_encoding":"json"}`, nil},
		{"a marked text that is not JSON", `{"status":"ok","output":{"result":"refund issued"},"result_encoding":"json"}`, nil},
		{"a marked text with data after the value", `{"status":"ok","output":{"result":"1 2"},"result_encoding":"json"}`, nil},
		{"a marked text with a duplicated member", `{"status":"ok","output":{"result":"{\"a\":1,\"a\":2}"},"result_encoding":"json"}`, nil},
		{"a marked empty text", `{"status":"ok","output":{"result":""},"result_encoding":"json"}`, nil},
		{"an unknown encoding", `{"status":"ok","output":{"result":"AAAA"},"result_encoding":"base64"}`, nil},
		{"a marker that is not a string", `{"status":"ok","output":{"result":"1"},"result_encoding":true}`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, err := transport.DecodeResponse([]byte(c.body))
			if c.want == nil {
				if !errors.Is(err, transport.ErrContract) {
					t.Fatalf("got %+v, %v; want ErrContract", r, err)
				}
				if strings.Contains(err.Error(), "refund issued") {
					t.Errorf("the error quotes the result: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, r.Output); d != "" {
				t.Errorf("DecodeResponse (-want +got):\n%s", d)
			}
			var u transport.Response
			if err := json.Unmarshal([]byte(c.body), &u); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, u.Output); d != "" {
				t.Errorf("UnmarshalJSON (-want +got):\n%s", d)
			}
		})
	}
	// The http transport reads a tool's contract reply the same way.
	srv := newToolServer(t, func(int, *http.Request, []byte) (int, string) {
		return 200, `{"status":"ok","output":{"result":"{\"n\":1}"},"result_encoding":"json"}`
	})
	out, err := newAdapter(t, transport.Endpoint{Transport: "http", URL: srv.URL}, nil).Call(bg, call(1))
	if err != nil || cmp.Diff(map[string]any{"result": map[string]any{"n": 1.0}}, out.Output) != "" {
		t.Errorf("http: %v %v", out, err)
	}
}

// A Response's JSON form is its wire form and reads back as itself; the
// response marshalled is not changed.
func TestResponseJSONIsTheWireForm(t *testing.T) {
	t.Parallel()
	in := &transport.Response{ToolContractVersion: "v1", RequestID: "r", Status: "ok", Output: map[string]any{"result": map[string]any{"a": 1.0}, "n": 2.0},
		Usage: &transport.AttemptUsage{Attempt: 1}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"tool_contract_version":"v1","request_id":"r","status":"ok","output":{"n":2,"result":"{\"a\":1}"},"result_encoding":"json","usage":{"attempt":1}}`
	if string(b) != want {
		t.Errorf("wire form\n got %s\nwant %s", b, want)
	}
	if _, ok := in.Output["result"].(map[string]any); !ok {
		t.Errorf("marshalling changed the response: %v", in.Output)
	}
	var back transport.Response
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(in, &back); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	// A value, not only a pointer, marshals to the wire form.
	if b2, _ := json.Marshal(*in); !bytes.Equal(b, b2) {
		t.Errorf("a Response value marshals to %s", b2)
	}
	if _, err := json.Marshal(&transport.Response{Status: "ok", Output: map[string]any{"result": math.NaN()}}); err == nil {
		t.Error("a result with no JSON form marshalled")
	}
}

// An executor that panics is answered with a Tool Contract error that
// every caller decodes: non-retryable (the call may have had effects),
// with nothing of the panic's value in the reply or the server's log, and
// the server goes on serving.
func TestAPanickingExecutorIsAnsweredWithoutItsSecret(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-panic-4f1c9a7e2b8d0c3f"
	for _, c := range []struct {
		name  string
		value any
	}{
		{"a string", "payments token " + secret},
		{"an error", fmt.Errorf("dial https://user:%s@pay.example: refused", secret)},
		{"a struct", struct{ APIKey string }{secret}},
		{"nil", nil},
		{"http.ErrAbortHandler", http.ErrAbortHandler},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ex := transport.ExecutorFunc(func(_ context.Context, req *transport.Request) *transport.Response {
				if req.Input["panic"] == "yes" {
					panic(c.value)
				}
				return &transport.Response{Status: transport.StatusOK, Output: map[string]any{"result": "alive"}}
			})
			var logged syncBuffer
			srv := httptest.NewUnstartedServer(transport.NewHandler(ex))
			srv.Config.ErrorLog = log.New(&logged, "", 0)
			srv.Start()
			defer srv.Close()
			no := false
			want := orlojpeer.Expect{Status: "error", Code: "execution_failed", Reason: "tool_backend_failure", Retryable: &no}
			req := orlojpeer.BaseRequest("adp_payments.issue_refund", "req-123")
			req.InputRaw = `{"panic":"yes"}`
			resp, raw, err := orlojpeer.External(bg, srv.Client(), srv.URL, req)
			if err != nil {
				t.Fatalf("the upstream caller got no Tool Contract reply: %v", err)
			}
			if ps := orlojpeer.Validate(req, resp, &want); len(ps) > 0 {
				t.Errorf("conformance: %s\n%s", strings.Join(ps, "\n"), raw)
			}
			if bytes.Contains(raw, []byte(secret)) || strings.Contains(logged.String(), secret) {
				t.Errorf("the panic's secret escaped: reply %s, log %q", raw, logged.String())
			}
			req.InputRaw = `{"panic":"no"}`
			if resp, _, err := orlojpeer.External(bg, srv.Client(), srv.URL, req); err != nil || resp.Output.Result != "alive" {
				t.Errorf("the server stopped serving: %+v %v", resp, err)
			}

			// ServeJSON, as a host calls it.
			r := transport.ServeJSON(bg, ex, []byte(`{"request_id":"r-1","tool":{"name":"t"},"input":{"panic":"yes"},"attempt":2}`))
			b, _ := json.Marshal(r)
			if r.Error == nil || r.Error.Code != gateway.CodeExecutionFailed || r.Error.Retryable || r.RequestID != "r-1" || r.Usage.Attempt != 2 || bytes.Contains(b, []byte(secret)) {
				t.Errorf("ServeJSON answered %s", b)
			}

			// Our client reads it as a final failure.
			a := newAdapter(t, transport.Endpoint{Transport: "external", URL: srv.URL}, nil)
			c := call(1)
			c.Envelope = cloneEnv(c.Envelope, map[string]any{"panic": "yes"})
			_, err = a.Call(bg, c)
			if te := toolErr(t, err); te.Code != gateway.CodeExecutionFailed || te.Retryable || strings.Contains(err.Error(), secret) {
				t.Errorf("our client: %+v", te)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for the server's log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
