package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/transport"
)

// TestRunWithEndpoints: the payments adapter's endpoint_ref is mapped to a
// loopback Tool Contract v1 server over the external transport with a
// bearer secret; the other adapters stay scripted.
func TestRunWithEndpoints(t *testing.T) {
	var mu sync.Mutex
	var auths, tools []string
	srv := httptest.NewServer(transport.NewHandler(transport.ExecutorFunc(func(ctx context.Context, req *transport.Request) *transport.Response {
		mu.Lock()
		tools = append(tools, req.Tool.Name)
		mu.Unlock()
		return &transport.Response{Status: "ok", Output: map[string]any{"transaction_id": "txn_live_1", "amount": req.Input["amount_inr"]}}
	})))
	defer srv.Close()
	check := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		srv.Config.Handler.ServeHTTP(w, r)
	}))
	defer check.Close()
	dir := t.TempDir()
	endpoints := filepath.Join(dir, "endpoints.json")
	secrets := filepath.Join(dir, "secrets.json")
	os.WriteFile(endpoints, []byte(`{"internal://payments": {"transport": "external", "url": "`+check.URL+`/tools",
		"auth": {"profile": "bearer", "secret_ref": "payments-token"}, "timeout_ms": 2000, "max_attempts": 3, "backoff_ms": 10, "jitter": "none"}}`), 0o644)
	os.WriteFile(secrets, []byte(`{"payments-token": "live-token-1"}`), 0o644)
	code, out, errs := runCLI(t, "", runArgs("--approve", "GATE_FINANCE_APPROVAL=user_finance_lead_77:finance_lead", "--endpoints", endpoints, "--secrets", secrets)...)
	if code != exitOK {
		t.Fatalf("run: %d %s", code, errs)
	}
	var o struct {
		Status      string `json:"status"`
		ToolResults []struct {
			CapabilityID string         `json:"capability_id"`
			Status       string         `json:"status"`
			Output       map[string]any `json:"output"`
		} `json:"tool_results"`
	}
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatal(err)
	}
	last := o.ToolResults[len(o.ToolResults)-1]
	if o.Status != "DECIDED" || last.CapabilityID != "adp_payments.issue_refund" || last.Status != "completed" || last.Output["transaction_id"] != "txn_live_1" {
		t.Fatalf("%s", out)
	}
	if strings.Join(tools, ",") != "adp_payments.issue_refund" || strings.Join(auths, ",") != "Bearer live-token-1" {
		t.Fatalf("tool saw %v with %v", tools, auths)
	}
	if strings.Contains(out, "live-token-1") || strings.Contains(errs, "live-token-1") {
		t.Fatal("the secret is in the output")
	}

	for name, body := range map[string]string{
		"unknown ref":        `{"internal://nope": {"transport": "external", "url": "http://127.0.0.1:1"}}`,
		"unknown transport":  `{"internal://payments": {"transport": "carrier-pigeon", "url": "http://127.0.0.1:1"}}`,
		"unknown field":      `{"internal://payments": {"transport": "external", "url": "http://127.0.0.1:1", "retries": 3}}`,
		"private refused":    `{"internal://payments": {"transport": "external", "url": "http://127.0.0.1:1", "allow_private": false}}`,
		"negative redirects": `{"internal://payments": {"transport": "external", "url": "http://127.0.0.1:1", "max_redirects": -1}}`,
		"token_url metadata": `{"internal://payments": {"transport": "external", "url": "http://127.0.0.1:1", "auth": {"profile": "oauth2_client_credentials", "secret_ref": "o", "token_url": "http://169.254.169.254/token"}}}`,
		"label above mode":   `{"internal://orders": {"transport": "external", "url": "http://127.0.0.1:1", "tools": {"lookup": {"capabilities": ["data.write"]}}}}`,
		"unknown tool":       `{"internal://orders": {"transport": "external", "url": "http://127.0.0.1:1", "tools": {"delete": {"capabilities": ["data.read"]}}}}`,
	} {
		os.WriteFile(endpoints, []byte(body), 0o644)
		if code, _, errs := runCLI(t, "", runArgs("--endpoints", endpoints)...); code != exitInvalid {
			t.Errorf("%s: exit %d %s", name, code, errs)
		}
	}
	if code, _, _ := runCLI(t, "", runArgs("--secrets", secrets)...); code != exitUsage {
		t.Errorf("--secrets without --endpoints: exit %d", code)
	}
}

// TestRunWithEndpointToolNames: an endpoint's tools name sets the
// tool.name its adapter sends for a capability, so an upstream tool named
// issue_refund serves adp_payments.issue_refund; results still name the
// capability. A name that cannot be sent, or an api_key_header profile on a
// reserved header, is refused before the run, naming the field.
func TestRunWithEndpointToolNames(t *testing.T) {
	var mu sync.Mutex
	var names []string
	srv := httptest.NewServer(transport.NewHandler(transport.ExecutorFunc(func(ctx context.Context, req *transport.Request) *transport.Response {
		mu.Lock()
		names = append(names, req.Tool.Name)
		mu.Unlock()
		return &transport.Response{Status: "ok", Output: map[string]any{"transaction_id": "txn_live_1"}}
	})))
	defer srv.Close()
	dir := t.TempDir()
	endpoints := filepath.Join(dir, "endpoints.json")
	secrets := filepath.Join(dir, "secrets.json")
	os.WriteFile(secrets, []byte(`{"k": "key-1"}`), 0o644)
	os.WriteFile(endpoints, []byte(`{"internal://payments": {"transport": "external", "url": "`+srv.URL+`/tools",
		"tools": {"issue_refund": {"name": "issue_refund", "capabilities": ["external.side_effect"]}}}}`), 0o644)
	code, out, errs := runCLI(t, "", runArgs("--approve", "GATE_FINANCE_APPROVAL=user_finance_lead_77:finance_lead", "--endpoints", endpoints)...)
	if code != exitOK || !strings.Contains(out, `"DECIDED"`) || !strings.Contains(out, `"capability_id": "adp_payments.issue_refund"`) {
		t.Fatalf("run: %d %s %s", code, out, errs)
	}
	if strings.Join(names, ",") != "issue_refund" {
		t.Fatalf("the tool saw tool.name %v, want issue_refund", names)
	}

	for name, c := range map[string]struct{ body, says string }{
		"reserved header_name":               {`{"internal://payments": {"transport": "external", "url": "` + srv.URL + `", "auth": {"profile": "api_key_header", "secret_ref": "k", "header_name": "Content-Length"}}}`, "auth.header_name"},
		"reserved header_name, another case": {`{"internal://payments": {"transport": "external", "url": "` + srv.URL + `", "auth": {"profile": "api_key_header", "secret_ref": "k", "header_name": "transfer-encoding"}}}`, "auth.header_name"},
		"proxy header_name":                  {`{"internal://payments": {"transport": "grpc", "url": "grpc://127.0.0.1:1", "auth": {"profile": "api_key_header", "secret_ref": "k", "header_name": "Proxy-Authorization"}}}`, "auth.header_name"},
		"tool name with a line break":        {`{"internal://payments": {"transport": "external", "url": "` + srv.URL + `", "tools": {"issue_refund": {"name": "refund\r\nX-A: 1"}}}}`, "tools.issue_refund.name"},
		"tool name on mcp":                   {`{"internal://payments": {"transport": "mcp", "command": ["x"], "tools": {"issue_refund": {"name": "refund"}}}}`, "tools.issue_refund.name"},
	} {
		os.WriteFile(endpoints, []byte(c.body), 0o644)
		code, _, errs := runCLI(t, "", runArgs("--endpoints", endpoints, "--secrets", secrets)...)
		if code != exitInvalid || !strings.Contains(errs, c.says) || strings.Contains(errs, "key-1") {
			t.Errorf("%s: exit %d %s", name, code, errs)
		}
	}
	if len(names) != 1 {
		t.Errorf("a refused configuration reached the tool: %v", names)
	}
}

// Two capabilities of an adapter cannot be sent to one tool: not with the
// same name, nor with a name that is another capability's id.
func TestDistinctToolNames(t *testing.T) {
	a := pack.Adapter{AdapterID: "adp_orders", Capabilities: []string{"lookup", "cancel"}}
	for _, c := range []struct {
		name  string
		tools map[string]transport.ToolInfo
		field string // "" accepted
	}{
		{"defaults", nil, ""},
		{"distinct names", map[string]transport.ToolInfo{"lookup": {Name: "get_order"}, "cancel": {Name: "cancel_order"}}, ""},
		{"one name, one default", map[string]transport.ToolInfo{"lookup": {Name: "lookup"}}, ""},
		{"a name that is another capability's id", map[string]transport.ToolInfo{"lookup": {Name: "adp_orders.cancel"}}, "tools.cancel.name"},
		{"a shared name", map[string]transport.ToolInfo{"lookup": {Name: "orders"}, "cancel": {Name: "orders"}}, "tools.cancel.name"},
	} {
		err := distinctToolNames(a, c.tools)
		var ce *transport.ConfigError
		if c.field == "" && err != nil || c.field != "" && (!errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, transport.ErrConfig)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestRunWithInputRawEndpoint: "input_raw": true in the endpoints file makes
// the external adapter send the arguments only in input_raw (JSON text), as
// a string-map server wants them; without it they travel in input.
func TestRunWithInputRawEndpoint(t *testing.T) {
	for _, raw := range []bool{true, false} {
		var mu sync.Mutex
		var bodies []map[string]json.RawMessage
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body map[string]json.RawMessage
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			bodies = append(bodies, body)
			mu.Unlock()
			r.Body = http.NoBody
			transport.NewHandler(transport.ExecutorFunc(func(ctx context.Context, req *transport.Request) *transport.Response {
				return &transport.Response{Status: "ok", Output: map[string]any{"transaction_id": "txn_live_1"}}
			})).ServeHTTP(w, requestWithBody(r, body))
		}))
		dir := t.TempDir()
		endpoints := filepath.Join(dir, "endpoints.json")
		flag := ""
		if raw {
			flag = `, "input_raw": true`
		}
		os.WriteFile(endpoints, []byte(`{"internal://payments": {"transport": "external", "url": "`+srv.URL+`/tools"`+flag+`}}`), 0o644)
		code, out, errs := runCLI(t, "", runArgs("--approve", "GATE_FINANCE_APPROVAL=user_finance_lead_77:finance_lead", "--endpoints", endpoints)...)
		srv.Close()
		if code != exitOK || !strings.Contains(out, `"DECIDED"`) {
			t.Fatalf("input_raw=%v: run %d %s %s", raw, code, out, errs)
		}
		if len(bodies) != 1 {
			t.Fatalf("input_raw=%v: %d requests", raw, len(bodies))
		}
		_, hasInput := bodies[0]["input"]
		var text string
		json.Unmarshal(bodies[0]["input_raw"], &text)
		if raw != (text != "" && !hasInput) || raw && !strings.Contains(text, `"order_id":"ord_881"`) {
			t.Errorf("input_raw=%v: input %s, input_raw %q", raw, bodies[0]["input"], text)
		}
	}
}

// requestWithBody is r with body as its JSON body again.
func requestWithBody(r *http.Request, body map[string]json.RawMessage) *http.Request {
	b, _ := json.Marshal(body)
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(b))
	r2.ContentLength = int64(len(b))
	return r2
}
