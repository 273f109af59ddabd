package transport_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos/transport"
)

// The tool.name an adapter sends for a capability is the endpoint's
// ToolInfo.Name for it (the capability id by default), on every transport
// (http sends it as X-Tool-Name); results and mutations keep naming the
// capability id.
func TestWireToolNameIsConfigurablePerCapability(t *testing.T) {
	t.Parallel()
	named := map[string]transport.ToolInfo{"issue_refund": {Name: "refund", Capabilities: []string{"external.side_effect"}}}
	for _, tc := range []struct {
		name, mode string
		tools      map[string]transport.ToolInfo
		want       string
	}{
		{"external, default", "external", nil, "adp_payments.issue_refund"},
		{"external, named", "external", named, "refund"},
		{"webhook, named", "webhook", named, "refund"},
		{"http, named", "http", named, "refund"},
		{"another capability's name does not apply", "external", map[string]transport.ToolInfo{"lookup": {Name: "lookup"}}, "adp_payments.issue_refund"},
		{"labels without a name", "external", map[string]transport.ToolInfo{"issue_refund": {RiskLevel: "high"}}, "adp_payments.issue_refund"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var names, headers []string
			envelope := transport.NewHandler(transport.ExecutorFunc(func(_ context.Context, req *transport.Request) *transport.Response {
				mu.Lock()
				names = append(names, req.Tool.Name)
				mu.Unlock()
				return &transport.Response{Status: "ok", Output: map[string]any{"result": "done"}}
			}))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				headers = append(headers, r.Header.Get("X-Tool-Name"))
				mu.Unlock()
				if tc.mode == "http" {
					w.Write([]byte(`{"result":"done"}`))
					return
				}
				envelope.ServeHTTP(w, r)
			}))
			defer srv.Close()
			a := newAdapter(t, transport.Endpoint{Transport: tc.mode, URL: srv.URL, Tools: tc.tools, PollInterval: time.Millisecond}, nil)
			out, err := a.Call(bg, call(1))
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Mutations) != 1 || out.Mutations[0] != "adp_payments.issue_refund:ik_77aa" {
				t.Errorf("mutations %v, want the capability id's", out.Mutations)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(headers) != 1 || headers[0] != tc.want {
				t.Errorf("X-Tool-Name %q, want %q", headers, tc.want)
			}
			if tc.mode != "http" && (len(names) != 1 || names[0] != tc.want) {
				t.Errorf("tool.name %q, want %q", names, tc.want)
			}
		})
	}
}

// A wire tool name that cannot be sent, or that two capabilities share, is
// refused when the adapter is built, with a *ConfigError naming the
// field; changing the endpoint's map afterwards changes nothing.
func TestNewAdapterRefusesBadToolNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		tools map[string]transport.ToolInfo
		field string
	}{
		{"surrounding space", map[string]transport.ToolInfo{"issue_refund": {Name: " refund"}}, "tools.issue_refund.name"},
		{"a line break", map[string]transport.ToolInfo{"issue_refund": {Name: "refund\r\nX-Injected: 1"}}, "tools.issue_refund.name"},
		{"a zero-width space", map[string]transport.ToolInfo{"issue_refund": {Name: "re\u200bfund"}}, "tools.issue_refund.name"},
		{"invalid UTF-8", map[string]transport.ToolInfo{"issue_refund": {Name: "re\xfffund"}}, "tools.issue_refund.name"},
		{"too long", map[string]transport.ToolInfo{"issue_refund": {Name: strings.Repeat("r", 257)}}, "tools.issue_refund.name"},
		{"shared by two capabilities", map[string]transport.ToolInfo{"issue_refund": {Name: "refund"}, "lookup": {Name: "refund"}}, "tools.lookup.name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, tr := range []string{"http", "external", "webhook"} {
				_, err := transport.NewAdapter(transport.Endpoint{Transport: tr, URL: "https://tools.example.com/x", Tools: c.tools}, nil)
				var ce *transport.ConfigError
				if !errors.Is(err, transport.ErrConfig) || !errors.As(err, &ce) || ce.Field != c.field {
					t.Fatalf("%s: got %v, want a ConfigError on %s", tr, err, c.field)
				}
			}
		})
	}
	ts := newToolServer(t, echoEnvelope)
	tools := map[string]transport.ToolInfo{"issue_refund": {Name: "refund"}}
	a := newAdapter(t, transport.Endpoint{Transport: "external", URL: ts.URL, Tools: tools}, nil)
	tools["issue_refund"] = transport.ToolInfo{Name: "delete_everything"}
	if _, err := a.Call(bg, call(1)); err != nil {
		t.Fatal(err)
	}
	if got := ts.requests()[0].Header.Get("X-Tool-Name"); got != "refund" {
		t.Errorf("X-Tool-Name %q: a change after the adapter was built was sent", got)
	}
}
