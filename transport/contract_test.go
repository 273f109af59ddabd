package transport_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/transport"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		req       transport.Request
		wantField string // "" for accepted
	}{
		{"empty version is v1", transport.Request{RequestID: "r", Tool: transport.Tool{Name: "t"}}, ""},
		{"version case and space", transport.Request{ToolContractVersion: " V1 ", RequestID: "r", Tool: transport.Tool{Name: "t"}}, ""},
		{"unknown major", transport.Request{ToolContractVersion: "v9", RequestID: "r", Tool: transport.Tool{Name: "t"}}, "tool_contract_version"},
		{"missing request id", transport.Request{RequestID: "  ", Tool: transport.Tool{Name: "t"}}, "request_id"},
		{"missing tool name", transport.Request{RequestID: "r"}, "tool.name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := c.req
			te := transport.Normalize(&r)
			if c.wantField == "" {
				if te != nil {
					t.Fatalf("refused: %v", te)
				}
				if r.ToolContractVersion != "v1" || r.Tool.Operation != "invoke" || r.Attempt != 1 {
					t.Fatalf("not normalised: %+v", r)
				}
				return
			}
			if te == nil || te.Code != gateway.CodeInvalidInput || te.Reason != gateway.ReasonFor(gateway.CodeInvalidInput) || te.Retryable || te.Details["field"] != c.wantField {
				t.Fatalf("got %+v, want non-retryable invalid_input on %s", te, c.wantField)
			}
			if !errors.Is(te, gateway.ErrTool) {
				t.Fatal("a refusal does not match gateway.ErrTool")
			}
		})
	}
	r := transport.Request{RequestID: "r", Tool: transport.Tool{Name: "t", Operation: "INVOKE", Capabilities: []string{" Data.Read", "network.read", "data.read", ""}, RiskLevel: "HIGH"},
		Auth: &transport.AuthInfo{Profile: "Bearer", Scopes: []string{"A", "a"}}, Attempt: -2}
	if te := transport.Normalize(&r); te != nil {
		t.Fatal(te)
	}
	want := transport.Request{ToolContractVersion: "v1", RequestID: "r", Tool: transport.Tool{Name: "t", Operation: "invoke", Capabilities: []string{"data.read", "network.read"}, RiskLevel: "high"},
		Auth: &transport.AuthInfo{Profile: "bearer", Scopes: []string{"a"}}, Attempt: 1}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Fatalf("normalised request mismatch (-want +got):\n%s", diff)
	}
}

func TestDecodeRequestAcceptsBothInputForms(t *testing.T) {
	for _, body := range []string{
		`{"request_id":"req-123","tool":{"name":"web_search"},"input":{"query":"q","n":3,"deep":{"x":[1]}}}`,
		`{"request_id":"req-123","tool":{"name":"web_search"},"input":{"query":"q"},"runtime":{"jitter":"full"}}`,
		`{"request_id":"req-123","tool":{"name":"web_search"},"runtime":{"jitter":true,"timeout_ms":15000}}`,
	} {
		if _, te := transport.DecodeRequest([]byte(body)); te != nil {
			t.Errorf("%s: %v", body, te)
		}
	}
	if _, te := transport.DecodeRequest([]byte(`{"request_id":7}`)); te == nil || te.Code != gateway.CodeInvalidInput {
		t.Errorf("a bad request was accepted: %v", te)
	}
}

func TestDecodeResponse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		wantErr    bool
		check      func(t *testing.T, r *transport.Response)
	}{
		{"seed ok", `{"request_id":"req-123","status":"ok","output":{"summary":"s","n":[1,2]},"usage":{"duration_ms":182,"attempt":1},"trace":{"trace_id":"t","span_id":"s"}}`, false,
			func(t *testing.T, r *transport.Response) {
				if r.Output["summary"] != "s" || r.Usage.Attempt != 1 || transport.ResponseErr(r) != nil {
					t.Fatalf("%+v", r)
				}
			}},
		{"orloj result string", `{"tool_contract_version":"v1","request_id":"r","status":"OK","output":{"result":"plain text"}}`, false,
			func(t *testing.T, r *transport.Response) {
				if transport.OutputValue(r)["result"] != "plain text" {
					t.Fatalf("%+v", r)
				}
			}},
		{"seed error with number details", `{"status":"error","error":{"code":"timeout","reason":"tool_execution_timeout","retryable":true,"message":"m","details":{"timeout_ms":15000}}}`, false,
			func(t *testing.T, r *transport.Response) {
				te := transport.ResponseErr(r)
				if te.Code != "timeout" || !te.Retryable || te.Details["timeout_ms"] != 15000.0 {
					t.Fatalf("%+v", te)
				}
			}},
		{"orloj string details", `{"status":"error","error":{"code":"execution_failed","reason":"tool_backend_failure","retryable":false,"message":"m","details":{"tool":"x"}}}`, false,
			func(t *testing.T, r *transport.Response) {
				if te := transport.ResponseErr(r); te.Details["tool"] != "x" || te.Retryable {
					t.Fatalf("%+v", te)
				}
			}},
		{"denied is never retryable", `{"status":"denied","error":{"code":"permission_denied","retryable":true,"message":"no"}}`, false,
			func(t *testing.T, r *transport.Response) {
				if te := transport.ResponseErr(r); te.Retryable || te.Reason != "tool_permission_denied" {
					t.Fatalf("%+v", te)
				}
			}},
		{"approval codes are never retryable", `{"status":"error","error":{"code":"approval_pending","retryable":true}}`, false,
			func(t *testing.T, r *transport.Response) {
				if te := transport.ResponseErr(r); te.Retryable || te.Reason != "tool_approval_pending" {
					t.Fatalf("%+v", te)
				}
			}},
		{"error without envelope", `{"status":"error"}`, false,
			func(t *testing.T, r *transport.Response) {
				if te := transport.ResponseErr(r); te.Code != "execution_failed" || te.Retryable {
					t.Fatalf("%+v", te)
				}
			}},
		{"no status", `{"output":{}}`, true, nil},
		{"unknown status", `{"status":"success"}`, true, nil},
		{"other version", `{"tool_contract_version":"v2","status":"ok"}`, true, nil},
		{"not an object", `"ok"`, true, nil},
		{"not JSON", `<html>`, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, err := transport.DecodeResponse([]byte(c.body))
			if c.wantErr {
				if !errors.Is(err, transport.ErrContract) {
					t.Fatalf("err = %v, want ErrContract", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, r)
		})
	}
}

func TestHTTPStatusMapping(t *testing.T) {
	cases := []struct {
		status    int
		code      string
		retryable bool
	}{
		{400, gateway.CodeExecutionFailed, false}, {401, gateway.CodeAuthInvalid, false}, {403, gateway.CodeAuthForbidden, false},
		{404, gateway.CodeExecutionFailed, false}, {429, gateway.CodeExecutionFailed, true}, {500, gateway.CodeExecutionFailed, true},
		{502, gateway.CodeExecutionFailed, true}, {503, gateway.CodeExecutionFailed, true},
	}
	for _, c := range cases {
		te := transport.HTTPStatusError(c.status, []byte(`{"detail":"x","token":"s3cr3t-value"}`), nil)
		if te.Code != c.code || te.Retryable != c.retryable || te.Reason != gateway.ReasonFor(c.code) || te.Details["http_status"] != c.status {
			t.Errorf("HTTP %d → %+v, want %s retryable=%v", c.status, te, c.code, c.retryable)
		}
		if strings.Contains(te.Message, "s3cr3t-value") {
			t.Errorf("HTTP %d message echoes a secret: %s", c.status, te.Message)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, secret := range map[string]string{
		"Authorization: Bearer abc.def.ghi": "abc.def.ghi", "x-api-key=KEY123": "KEY123", `{"password":"hunter2"}`: "hunter2",
		"use sk-live_0123456789 now": "sk-live_0123456789", "token=tok&x=1": "tok&", "basic dXNlcjpwYXNz": "dXNlcjpwYXNz",
	} {
		if out := transport.Redact(in); strings.Contains(out, secret) || !strings.Contains(out, "[REDACTED]") {
			t.Errorf("Redact(%q) = %q", in, out)
		}
	}
}

func TestUnknownCodesBecomeBackendFailures(t *testing.T) {
	r, err := transport.DecodeResponse([]byte(`{"status":"error","error":{"code":"QUOTA","reason":"over","retryable":true,"message":"m"}}`))
	if err != nil {
		t.Fatal(err)
	}
	te := transport.ResponseErr(r)
	if te.Code != gateway.CodeExecutionFailed || te.Reason != gateway.ReasonFor(gateway.CodeExecutionFailed) || !te.Retryable || te.Details["tool_code"] != "quota" || te.Details["tool_reason"] != "over" {
		t.Fatalf("%+v", te)
	}
}

// A tool's unknown code or reason is kept in the error's details, cut to
// 64 bytes: a key in it is redacted before the cut (a key cut short is
// one no detector knows, which the gateway's rules would then pass) and
// looked for as the tool spelled it (lower-cased, a key is one no
// detector knows either).
func TestUnknownCodeKeepsNoKey(t *testing.T) {
	sendgrid := "SG." + strings.Repeat("a1B2", 5) + "xy." + strings.Repeat("Q9w8", 10) + "zzz"
	aws := "AKIAIOSFODNN7EXAMPLE"
	body := `{"status":"error","error":{"code":"` + sendgrid + `","reason":"` + aws + `","retryable":false,"message":"m"}}`
	r, err := transport.DecodeResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	te := transport.ResponseErr(r)
	for _, k := range []string{"tool_code", "tool_reason"} {
		v, _ := te.Details[k].(string)
		if !strings.Contains(v, "[REDACTED]") || strings.Contains(strings.ToLower(v), strings.ToLower(sendgrid[:12])) || strings.Contains(strings.ToLower(v), "akiaiosf") {
			t.Errorf("details.%s = %q, want the key redacted", k, v)
		}
	}
}

func TestCheckToolInfo(t *testing.T) {
	cases := []struct {
		info transport.ToolInfo
		mode runcontext.ApprovalMode
		ok   bool
	}{
		{transport.ToolInfo{Capabilities: []string{"data.read", "Network.Read"}, RiskLevel: "low"}, runcontext.ReadOnly, true},
		{transport.ToolInfo{Capabilities: []string{"data.write"}}, runcontext.ReadOnly, false},
		{transport.ToolInfo{Capabilities: []string{"data.write"}}, runcontext.LocalWrite, true},
		{transport.ToolInfo{Capabilities: []string{"external.side_effect"}, RiskLevel: "high"}, runcontext.LocalWrite, false},
		{transport.ToolInfo{Capabilities: []string{"external.side_effect"}, RiskLevel: "high"}, runcontext.Destructive, true},
		{transport.ToolInfo{RiskLevel: "critical"}, runcontext.Network, false},
		{transport.ToolInfo{RiskLevel: "critical"}, runcontext.Delegated, true},
		{transport.ToolInfo{Capabilities: []string{"teleport"}}, runcontext.Destructive, false},
		{transport.ToolInfo{RiskLevel: "extreme"}, runcontext.Destructive, false},
	}
	for _, c := range cases {
		err := transport.CheckToolInfo("adp_x.y", c.info, c.mode)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, transport.ErrConfig) {
			t.Errorf("%+v under %s: %v", c.info, c.mode, err)
		}
	}
}

// TestClip: quoted text in messages is valid UTF-8, at most 64 bytes
// before the ellipsis, and never cut inside a rune.
func TestClip(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 63) + "é" + "tail" // é straddles byte 64
	cases := []struct {
		name, in, want string
	}{
		{"short kept", "bearer", "bearer"},
		{"exactly 64", strings.Repeat("x", 64), strings.Repeat("x", 64)},
		{"cut with ellipsis", strings.Repeat("x", 70), strings.Repeat("x", 64) + "…"},
		{"never inside a rune", long, strings.Repeat("a", 63) + "…"},
		{"invalid UTF-8 replaced", "a\xffb", "a\uFFFDb"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if d := cmp.Diff(c.want, transport.Clip(c.in)); d != "" {
				t.Errorf("clip(%q) (-want +got):\n%s", c.in, d)
			}
		})
	}
}

// runtime.jitter is a boolean on the wire; peers that write a jitter mode
// are read too, and anything else is refused.
func TestWireJitterDecoding(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    transport.WireJitter
		wantErr bool
	}{
		{`true`, true, false}, {`false`, false, false}, {`null`, false, false},
		{`"full"`, true, false}, {`"equal"`, true, false}, {`"none"`, false, false}, {`""`, false, false},
		{`1`, false, true}, {`{}`, false, true}, {`"unterminated`, false, true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			t.Parallel()
			var got transport.WireJitter
			err := got.UnmarshalJSON([]byte(c.in))
			if (err != nil) != c.wantErr {
				t.Fatalf("UnmarshalJSON(%s) error %v, want error %v", c.in, err, c.wantErr)
			}
			if d := cmp.Diff(c.want, got); d != "" && !c.wantErr {
				t.Errorf("UnmarshalJSON(%s) (-want +got):\n%s", c.in, d)
			}
		})
	}
}

// A tool's unknown code or reason is redacted of the personal data the
// pack's rules redact before it is lower-cased and cut: an Indian PAN
// lower-cased, or an IBAN or address cut at 64 bytes, is one the pan,
// iban and email rules no longer find, and most of it reached the result.
func TestUnknownCodeKeepsNoPersonalData(t *testing.T) {
	pad := strings.Repeat("x", 50) + " "
	b := gateway.BuiltinRedactors()
	for _, c := range []struct{ code, rule, part string }{
		{"ABCPE1234F", "pan", "abcpe1234"},
		{pad + "DE89 3704 0044 0532 0130 00", "iban", "de89 3704"},
		{pad + "bob.smith@example.com", "email", "bob.smith@"},
	} {
		for _, field := range []string{"code", "reason"} {
			body := `{"status":"error","error":{"` + field + `":"` + c.code + `","retryable":false,"message":"m"}}`
			if field == "reason" {
				body = `{"status":"error","error":{"code":"backend_down","reason":"` + c.code + `","retryable":false,"message":"m"}}`
			}
			r, err := transport.DecodeResponse([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			v, _ := transport.ResponseErr(r).Details["tool_"+field].(string)
			v, _ = b[c.rule](v)
			if strings.Contains(strings.ToLower(v), c.part) {
				t.Errorf("details.tool_%s of %q after the %s rule = %q: the %s survives", field, c.code, c.rule, v, c.rule)
			}
		}
	}
}
