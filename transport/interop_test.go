package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/internal/orlojpeer"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/interop")

// golden compares got with testdata/interop/name, or writes it with
// -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "interop", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed:\n got %s\nwant %s", path, got, want)
	}
}

// host is the executor a host serves with NewHandler: Input["case"]
// chooses what it answers.
type host struct {
	mu   sync.Mutex
	seen []*transport.Request
}

func (h *host) Execute(_ context.Context, req *transport.Request) *transport.Response {
	h.mu.Lock()
	h.seen = append(h.seen, req)
	h.mu.Unlock()
	switch req.Input["case"] {
	case "fail":
		return &transport.Response{Status: "error", Error: &transport.Failure{Code: "execution_failed", Reason: "tool_backend_failure", Retryable: true,
			Message: "the payments backend answered 502", Details: map[string]any{"http_status": 502, "timeout_ms": 15000.0, "nested": map[string]any{"a": 1.0}, "none": nil, "ok": true}}}
	case "deny":
		return &transport.Response{Status: "denied", Error: &transport.Failure{Code: "permission_denied", Reason: "tool_permission_denied", Message: "refunds above 4000 need approval"}}
	case "object":
		return &transport.Response{Status: "ok", Output: map[string]any{"result": map[string]any{"refund": "issued", "amount_inr": 4200}, "transaction_id": "txn_1"}}
	}
	return &transport.Response{Status: "ok", Output: map[string]any{"result": "refund issued"}}
}

func (h *host) calls() []*transport.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*transport.Request(nil), h.seen...)
}

// upstreamCase is one request an upstream client sends our server.
type upstreamCase struct {
	name string
	req  func() orlojpeer.Request
	want orlojpeer.Expect
	// input is what the executor must see (nil: it must not be called).
	input map[string]any
	// raw, when set, is the input_raw text the executor must see, with an
	// empty Input (opaque text is passed through, not decoded).
	raw   string
	check func(t *testing.T, resp orlojpeer.Response)
}

func upstreamCases() []upstreamCase {
	no, yes := false, true
	invalid := orlojpeer.Expect{Status: "error", Code: "invalid_input", Reason: "tool_invalid_input", Retryable: &no}
	base := func(raw string) func() orlojpeer.Request {
		return func() orlojpeer.Request {
			r := orlojpeer.BaseRequest("adp_payments.issue_refund", "req-123")
			r.InputRaw, r.Attempt = raw, 2
			return r
		}
	}
	field := func(f string) func(*testing.T, orlojpeer.Response) {
		return func(t *testing.T, resp orlojpeer.Response) {
			if resp.Error.Details["field"] != f {
				t.Errorf("details %v, want field %s", resp.Error.Details, f)
			}
		}
	}
	return []upstreamCase{
		{name: "arguments only in input_raw", req: base(`{"order_id":"ord_881","amount_inr":1200}`), want: orlojpeer.Expect{Status: "ok"},
			input: map[string]any{"order_id": "ord_881", "amount_inr": 1200.0},
			check: func(t *testing.T, resp orlojpeer.Response) {
				if resp.Output.Result != "refund issued" || resp.Usage.Attempt != 2 {
					t.Errorf("%+v", resp)
				}
			}},
		{name: "arguments in a flat string input", req: func() orlojpeer.Request {
			r := base("")()
			r.Input = map[string]string{"order_id": "ord_881"}
			return r
		}, want: orlojpeer.Expect{Status: "ok"}, input: map[string]any{"order_id": "ord_881"}},
		{name: "catalog: unknown version", req: func() orlojpeer.Request { r, _ := orlojpeer.UnknownVersion("adp_payments.issue_refund"); return r },
			want: func() orlojpeer.Expect { _, e := orlojpeer.UnknownVersion("x"); return e }(), check: field("tool_contract_version")},
		{name: "missing request_id", req: func() orlojpeer.Request { r := base(`{}`)(); r.RequestID = ""; return r }, want: invalid, check: field("request_id")},
		{name: "missing tool.name", req: func() orlojpeer.Request { r := base(`{}`)(); r.Tool.Name = ""; return r }, want: invalid, check: field("tool.name")},
		{name: "catalog base input_raw is text", req: base("tool=adp_payments.issue_refund payload"), want: orlojpeer.Expect{Status: "ok"},
			input: map[string]any{}, raw: "tool=adp_payments.issue_refund payload"},
		{name: "input_raw that is a broken object", req: base(`  {"amount_inr":`), want: invalid, check: field("input_raw")},
		{name: "input_raw with a duplicated member", req: base(`{"amount_inr":1,"amount_inr":4200}`), want: invalid, check: field("input_raw")},
		{name: "input_raw that is an array", req: base(`[1]`), want: invalid, check: field("input_raw")},
		{name: "failure with number details", req: base(`{"case":"fail"}`), want: orlojpeer.Expect{Status: "error", Code: "execution_failed", Reason: "tool_backend_failure", Retryable: &yes},
			input: map[string]any{"case": "fail"},
			check: func(t *testing.T, resp orlojpeer.Response) {
				want := map[string]string{"http_status": "502", "timeout_ms": "15000", "nested": `{"a":1}`, "ok": "true"}
				if len(resp.Error.Details) != len(want) {
					t.Errorf("details %v, want %v", resp.Error.Details, want)
				}
				for k, v := range want {
					if resp.Error.Details[k] != v {
						t.Errorf("details %v, want %v", resp.Error.Details, want)
					}
				}
			}},
		{name: "object result", req: base(`{"case":"object"}`), want: orlojpeer.Expect{Status: "ok"}, input: map[string]any{"case": "object"},
			check: func(t *testing.T, resp orlojpeer.Response) {
				if resp.Output.Result != `{"amount_inr":4200,"refund":"issued"}` {
					t.Errorf("output.result %q, want the object's JSON text", resp.Output.Result)
				}
			}},
		{name: "denied", req: base(`{"case":"deny"}`), want: orlojpeer.Expect{Status: "denied", Code: "permission_denied", Reason: "tool_permission_denied", Retryable: &no},
			input: map[string]any{"case": "deny"},
			check: func(t *testing.T, resp orlojpeer.Response) {
				if resp.Error.Details == nil {
					t.Error("details missing")
				}
			}},
	}
}

// Upstream clients (external and webhook-callback) calling a host's
// NewHandler: every reply decodes with Orloj's types (details string →
// string), passes the conformance harness's envelope checks (version,
// request id, trace and attempt echoed, refusals included), and arguments
// sent only in input_raw reach the executor decoded.
func TestInteropUpstreamClientsToNewHandler(t *testing.T) {
	for _, c := range upstreamCases() {
		for _, via := range []string{"external", "webhook-callback"} {
			t.Run(c.name+"/"+via, func(t *testing.T) {
				ex := &host{}
				srv := httptest.NewServer(transport.NewHandler(ex))
				defer srv.Close()
				req := c.req()
				var resp orlojpeer.Response
				var raw []byte
				var err error
				if via == "external" {
					resp, raw, err = orlojpeer.External(bg, srv.Client(), srv.URL, req)
				} else {
					resp, err = orlojpeer.WebhookCall(bg, srv.Client(), srv.URL, req, time.Millisecond)
				}
				if err != nil {
					t.Fatalf("the upstream client could not read the reply: %v (%s)", err, raw)
				}
				if ps := orlojpeer.Validate(req, resp, &c.want); len(ps) > 0 {
					t.Errorf("conformance: %s\n%s", strings.Join(ps, "\n"), raw)
				}
				if raw != nil {
					var probe map[string]any
					json.Unmarshal(raw, &probe)
					if e, ok := probe["error"].(map[string]any); ok {
						if _, ok := e["details"]; !ok {
							t.Errorf("error without details: %s", raw)
						}
					}
					golden(t, strings.NewReplacer(" ", "_", ":", "", ",", "").Replace(c.name)+".json", raw)
				}
				calls := ex.calls()
				switch {
				case c.input == nil && len(calls) != 0:
					t.Errorf("a refused request reached the executor: %+v", calls[0])
				case c.input != nil && len(calls) != 1:
					t.Fatalf("%d executor calls", len(calls))
				case c.raw != "" && (calls[0].InputRaw != c.raw || len(calls[0].Input) != 0):
					t.Errorf("the executor saw input %v and input_raw %q, want none and %q", calls[0].Input, calls[0].InputRaw, c.raw)
				case c.input != nil:
					for k, v := range c.input {
						if calls[0].Input[k] != v {
							t.Errorf("the executor saw input %v, want %v", calls[0].Input, c.input)
						}
					}
				}
				if c.check != nil {
					c.check(t, resp)
				}
			})
		}
	}
}

// peerTool is an upstream tool: it answers "ok:" and its input, or fails
// with string details when the input asks.
func peerTool(_ context.Context, _ string, input string) (string, error) {
	if strings.Contains(input, "fail") {
		return "", &orlojpeer.ToolError{Code: "execution_failed", Reason: "tool_backend_failure", Retryable: true, Message: "backend down",
			Details: map[string]string{"http_status": "502", "tool": "payments"}}
	}
	return "ok:" + input, nil
}

// recordPeer decodes every POST the upstream server receives with its
// own types, then serves it.
func recordPeer(next http.Handler, mu *sync.Mutex, seen *[]orlojpeer.Request) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var req orlojpeer.Request
			if json.Unmarshal(body, &req) == nil {
				mu.Lock()
				*seen = append(*seen, req)
				mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

// Our adapters calling upstream-style tool servers (external and
// webhook-callback): the request decodes with Orloj's types (with
// Endpoint.InputRaw when an argument is not a string), the runtime mode is
// webhook-callback, a job is posted once however long it polls, Orloj's
// string details are read, and a reply of another major version is a
// non-retryable invalid_input on every transport.
func TestInteropOurClientToUpstreamServers(t *testing.T) {
	t.Parallel()
	strArgs := func(c *gateway.Call) { c.Envelope.Args = map[string]any{"order_id": "ord_881"} }
	for _, tc := range []struct {
		name     string
		mode     string
		inputRaw bool
		args     func(*gateway.Call)
		result   string // the peer's result (ok), or
		code     string // the error code
		retry    bool
		wantMode string
	}{
		{name: "external, string arguments in input", mode: "external", args: strArgs, result: `ok:{"order_id":"ord_881"}`, wantMode: "external"},
		{name: "external, number arguments in input_raw", mode: "external", inputRaw: true, result: `ok:{"amount_inr":1200,"order_id":"ord_881"}`, wantMode: "external"},
		{name: "external, number arguments in input: a string-map server refuses them", mode: "external", code: gateway.CodeExecutionFailed},
		{name: "external, failure with string details", mode: "external", args: func(c *gateway.Call) { c.Envelope.Args = map[string]any{"x": "fail"} }, code: gateway.CodeExecutionFailed, retry: true, wantMode: "external"},
		{name: "webhook-callback, polled", mode: "webhook-callback", inputRaw: true, result: `ok:{"amount_inr":1200,"order_id":"ord_881"}`, wantMode: "webhook-callback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var seen []orlojpeer.Request
			var h http.Handler = orlojpeer.Handler(peerTool)
			wh := &orlojpeer.Webhook{F: peerTool, Pending: 3}
			if tc.mode == "webhook-callback" {
				h = wh
			}
			srv := httptest.NewServer(recordPeer(h, &mu, &seen))
			defer srv.Close()
			a := newAdapter(t, transport.Endpoint{Transport: tc.mode, URL: srv.URL, InputRaw: tc.inputRaw, PollInterval: time.Millisecond}, nil)
			c := call(2)
			if tc.args != nil {
				tc.args(c)
			}
			out, err := a.Call(bg, c)
			if tc.code != "" {
				te := toolErr(t, err)
				if te.Code != tc.code || te.Retryable != tc.retry {
					t.Fatalf("%+v", te)
				}
				if tc.retry && te.Details["http_status"] != "502" {
					t.Errorf("details %v: Orloj's string details not read", te.Details)
				}
			} else if err != nil || out.Output["result"] != tc.result {
				t.Fatalf("%v %v", out, err)
			}
			if tc.wantMode != "" {
				if len(seen) != 1 {
					t.Fatalf("the upstream server decoded %d requests, want 1", len(seen))
				}
				r := seen[0]
				if r.Runtime.Mode != tc.wantMode || r.RequestID != "tool_0123456789abcdef" || r.Attempt != 2 || r.Trace.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
					t.Errorf("the upstream server saw %+v", r)
				}
			}
			if tc.mode == "webhook-callback" && wh.Posts != 1 {
				t.Errorf("%d POSTs, want 1", wh.Posts)
			}
		})
	}

	// A tool of another major contract version: nothing it says is read
	// as v1, and asking again would get the same.
	v2 := `{"tool_contract_version":"v2","request_id":"tool_0123456789abcdef","status":"ok","output":{"result":"done"}}`
	for _, mode := range []string{"http", "external", "webhook-callback", "webhook-callback polled"} {
		t.Run("unknown major version/"+mode, func(t *testing.T) {
			t.Parallel()
			srv := newToolServer(t, func(n int, _ *http.Request, _ []byte) (int, string) {
				if mode == "webhook-callback polled" && n == 0 {
					return 202, ``
				}
				return 200, v2
			})
			a := newAdapter(t, transport.Endpoint{Transport: strings.Fields(mode)[0], URL: srv.URL, PollInterval: time.Millisecond}, nil)
			_, err := a.Call(bg, call(1))
			te := toolErr(t, err)
			if te.Code != gateway.CodeInvalidInput || te.Retryable || te.Details["field"] != "tool_contract_version" || !strings.Contains(te.Message, "v2") {
				t.Fatalf("%+v", te)
			}
			resp := a.Execute(bg, transport.RequestFor(call(1), strings.Fields(mode)[0], &transport.Endpoint{}))
			if resp.ToolContractVersion != "v1" || resp.Error == nil || resp.Error.Code != gateway.CodeInvalidInput {
				t.Fatalf("%+v", resp)
			}
		})
	}
}

// Our errors on the wire: details always present ({} when empty), every
// value a string, numbers included; reading takes either.
func TestFailureDetailsOnTheWire(t *testing.T) {
	for _, tc := range []struct {
		details map[string]any
		want    string
	}{
		{nil, `{}`},
		{map[string]any{}, `{}`},
		{map[string]any{"http_status": 502, "timeout_ms": 15000.0, "ratio": 0.25, "big": 1e21, "ok": false, "none": nil, "list": []any{"a", 1.0}, "s": "x"},
			`{"big":"1000000000000000000000","http_status":"502","list":"[\"a\",1]","ok":"false","ratio":"0.25","s":"x","timeout_ms":"15000"}`},
	} {
		b, err := json.Marshal(&transport.Failure{Code: "timeout", Reason: "tool_execution_timeout", Retryable: true, Message: "m", Details: tc.details})
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Details map[string]string `json:"details"`
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("a string-map peer cannot decode %s: %v", b, err)
		}
		got, _ := json.Marshal(e.Details)
		if string(got) != tc.want || !bytes.Contains(b, []byte(`"details":`)) {
			t.Errorf("%s: details %s, want %s", b, got, tc.want)
		}
	}
	for _, body := range []string{
		`{"status":"error","error":{"code":"timeout","retryable":true,"details":{"timeout_ms":15000}}}`,
		`{"status":"error","error":{"code":"timeout","retryable":true,"details":{"timeout_ms":"15000"}}}`,
	} {
		r, err := transport.DecodeResponse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if te := transport.ResponseErr(r); te.Code != gateway.CodeTimeout || te.Details["timeout_ms"] == nil {
			t.Errorf("%s → %+v", body, te)
		}
	}
	if _, err := transport.DecodeResponse([]byte(`{"tool_contract_version":"V2","status":"ok"}`)); !errors.Is(err, transport.ErrContractVersion) || !errors.Is(err, transport.ErrContract) {
		t.Errorf("v2 response: %v", err)
	}
}
