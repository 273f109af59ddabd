package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/internal/orlojpeer"
)

// FuzzDecodeResponse: any tool reply decodes to a response whose Err is
// nil or a canonical ToolError, or is refused with ErrContract; never a
// panic.
func FuzzDecodeResponse(f *testing.F) {
	for _, s := range []string{
		`{"request_id":"req-123","status":"ok","output":{"summary":"..."},"usage":{"duration_ms":182,"attempt":1},"trace":{"trace_id":"t","span_id":"s"}}`,
		`{"status":"error","error":{"code":"timeout","reason":"tool_execution_timeout","retryable":true,"message":"m","details":{"timeout_ms":15000}}}`,
		`{"status":"denied","error":{"code":"permission_denied","details":{"tool":"x"}}}`,
		`{"tool_contract_version":"v1","status":"ok","output":{"result":"text"}}`, `{"status":"error"}`, `[]`, `"x"`,
		`{"status":"ok","output":{"result":"{\"a\":[1,null]}"},"result_encoding":"json"}`,
		`{"status":"ok","output":{"result":"nope"},"result_encoding":"json"}`,
		`{"status":"ok","output":{"result":7},"result_encoding":"json"}`,
		`{"status":"ok","output":{"result":"1"},"result_encoding":"hex"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := transport.DecodeResponse(data)
		if err != nil {
			if !errors.Is(err, transport.ErrContract) {
				t.Fatalf("error %v is not ErrContract", err)
			}
			return
		}
		if te := transport.ResponseErr(r); te != nil {
			if te.Code == "" || te.Reason == "" || te.Message == "" || te.Details == nil {
				t.Fatalf("incomplete error %+v", te)
			}
			if (r.Status == transport.StatusDenied || te.Code == gateway.CodePermissionDenied) && te.Retryable {
				t.Fatal("a denial is retryable")
			}
		} else if transport.OutputValue(r) == nil {
			t.Fatal("an ok response has no output")
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("a decoded response does not encode: %v", err)
		}
	})
}

// FuzzResultWireForm: any JSON value an executor puts in output.result
// (and beside it) travels so a caller typed as Orloj's (output.result a
// string) decodes the reply, a string result as that string, and our
// client reads back the same value.
func FuzzResultWireForm(f *testing.F) {
	for _, s := range []string{`42`, `"x"`, `"42"`, `{"a":[1,null]}`, `null`, `true`, `"{\"a\":1}"`, `[]`, `"\u2028<&>"`, `-0`, `1e308`, `{"":{"":""}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		resp := &transport.Response{ToolContractVersion: "v1", RequestID: "r", Status: "ok", Output: map[string]any{"result": v, "beside": v}}
		b, err := json.Marshal(resp)
		if err != nil {
			t.Fatalf("a JSON value has no wire form: %v", err)
		}
		var peer orlojpeer.Response
		if err := json.Unmarshal(b, &peer); err != nil {
			t.Fatalf("a caller typed as Orloj's cannot decode %s: %v", b, err)
		}
		if s, ok := v.(string); ok && peer.Output.Result != s {
			t.Fatalf("the string result %q travelled as %q", s, peer.Output.Result)
		}
		got, err := transport.DecodeResponse(b)
		if err != nil {
			t.Fatalf("our client cannot read %s: %v", b, err)
		}
		if d := cmp.Diff(map[string]any{"result": v, "beside": v}, got.Output); d != "" {
			t.Fatalf("read back (-want +got):\n%s", d)
		}
	})
}

// FuzzDecodeRequest: any request decodes to a normalised request or a
// non-retryable invalid_input; never a panic.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"tool_contract_version":"v1","request_id":"req-123","tool":{"name":"web_search","capabilities":["Network.Read"]},"input":{"query":"q"},"runtime":{"jitter":true}}`))
	f.Add([]byte(`{"tool_contract_version":"v9"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, te := transport.DecodeRequest(data)
		if te != nil {
			if te.Code != gateway.CodeInvalidInput || te.Retryable {
				t.Fatalf("%+v", te)
			}
			return
		}
		if r.ToolContractVersion != "v1" || r.RequestID == "" || r.Tool.Name == "" || r.Attempt < 1 {
			t.Fatalf("not normalised: %+v", r)
		}
	})
}

// FuzzCheckEndpoint: an endpoint or token URL the checks accept has an
// http(s) scheme, no credentials, and no literal link-local, unspecified
// or (without allow_private) loopback address; a token URL is https, or
// http only with allow_private; never a panic.
func FuzzCheckEndpoint(f *testing.F) {
	for _, s := range []string{"https://tools.example.com/x", "http://169.254.169.254/", "http://[::ffff:a9fe:a9fe]/", "http://user:pw@h/",
		"http://localhost./", "gopher://h/", "http://127.0.0.1:8080/", "https://[fe80::1%25eth0]/", "http://0x7f.1/", "//h/p"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, raw string, allowPrivate bool) {
		u, err := transport.CheckEndpoint(raw, allowPrivate)
		tokenErr := transport.CheckTokenURL(raw, allowPrivate)
		for _, e := range []error{err, tokenErr} {
			if e != nil && !errors.Is(e, transport.ErrConfig) {
				t.Fatalf("%v is not ErrConfig", e)
			}
		}
		if err != nil {
			if tokenErr == nil {
				t.Fatalf("token_url %q accepted, endpoint refused: %v", raw, err)
			}
			return
		}
		scheme := strings.ToLower(u.Scheme)
		if scheme != "http" && scheme != "https" || u.User != nil || u.Host == "" {
			t.Fatalf("accepted %q", raw)
		}
		if ip, perr := netip.ParseAddr(u.Hostname()); perr == nil {
			ip = ip.Unmap()
			if ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsLoopback() && !allowPrivate {
				t.Fatalf("accepted %q (%s)", raw, ip)
			}
		}
		if tokenErr == nil && scheme != "https" && !allowPrivate {
			t.Fatalf("token_url %q accepted over http without allow_private", raw)
		}
	})
}

// FuzzServeJSON: any request document a caller sends a host's server gets
// a complete response (version v1, a valid status, attempt ≥ 1, an error
// with code, reason, message and details unless ok) that a string-map
// peer decodes; the executor is reached only with a normalised request
// with a non-nil Input (input_raw's object, or empty for opaque text);
// never a panic.
func FuzzServeJSON(f *testing.F) {
	for _, s := range []string{
		`{"tool_contract_version":"v1","request_id":"req-123","tool":{"name":"t"},"input_raw":"{\"a\":1}","trace":{"trace_id":"x","span_id":"y"},"attempt":2}`,
		`{"request_id":"r","tool":{"name":"t"},"input_raw":"tool=t payload"}`,
		`{"request_id":"r","tool":{"name":"t"},"input_raw":"{\"a\":1,\"a\":2}"}`,
		`{"tool_contract_version":"v9","request_id":"r","attempt":"x"}`, `{"request_id":"r","tool":{"name":"t"},"input":{"n":1}}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		called := false
		resp := transport.ServeJSON(bg, transport.ExecutorFunc(func(_ context.Context, req *transport.Request) *transport.Response {
			called = true
			if req.ToolContractVersion != "v1" || req.RequestID == "" || req.Tool.Name == "" || req.Attempt < 1 || req.Input == nil && req.InputRaw != "" {
				t.Fatalf("the executor got %+v", req)
			}
			return &transport.Response{Status: "error", Error: &transport.Failure{Code: "timeout", Reason: "tool_execution_timeout", Message: "m", Details: map[string]any{"n": 1.5}}}
		}), data)
		if resp.ToolContractVersion != "v1" || resp.Usage == nil || resp.Usage.Attempt < 1 {
			t.Fatalf("incomplete %+v", resp)
		}
		if resp.Status != transport.StatusOK && (resp.Error == nil || resp.Error.Code == "" || resp.Error.Reason == "" || resp.Error.Message == "") {
			t.Fatalf("incomplete error %+v", resp.Error)
		}
		if !called && (resp.Error == nil || resp.Error.Code != gateway.CodeInvalidInput || resp.Error.Retryable) {
			t.Fatalf("a refusal %+v", resp.Error)
		}
		b, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		var peer struct {
			Error *struct {
				Details map[string]string `json:"details"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &peer); err != nil || peer.Error == nil || peer.Error.Details == nil {
			t.Fatalf("a string-map peer reads %s: %v", b, err)
		}
	})
}
