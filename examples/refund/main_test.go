package main

import (
	"bytes"
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/output.golden")

// TestOutput checks the example's whole output: the four flows, the
// record and the replay verdict. Run with -update after an intended change.
func TestOutput(t *testing.T) {
	var buf bytes.Buffer
	if err := run(context.Background(), &buf, ""); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "output.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("output differs from %s (-want +got):\n%s", golden, diff)
	}
	for _, must := range []string{
		"paused   awaiting GATE_FINANCE_APPROVAL by a finance_lead",
		"decision DECIDED approved (payments called 1 time)",
		"decision DECIDED denied",
		"result   replay_equal, 0 differences; live payments calls during replay: 0",
	} {
		if !bytes.Contains(buf.Bytes(), []byte(must)) {
			t.Errorf("output lacks %q", must)
		}
	}
}

// TestPaymentsOverExternalTransport runs the four flows with the payments
// tool behind the external transport on a loopback Tool Contract v1
// server: the same pause, approval, decision and offline replay, and the
// tool executes the refund exactly once.
func TestPaymentsOverExternalTransport(t *testing.T) {
	tool := &paymentsAdapter{}
	var mu sync.Mutex
	var seen []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Clone(r.Context()))
		mu.Unlock()
		paymentsHandler(tool).ServeHTTP(w, r)
	}))
	defer srv.Close()
	var buf bytes.Buffer
	if err := run(context.Background(), &buf, srv.URL); err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{
		"paused   awaiting GATE_FINANCE_APPROVAL by a finance_lead",
		"adp_payments.issue_refund  completed",
		"decision DECIDED approved (payments called 1 time)",
		"decision DECIDED denied",
		"result   replay_equal, 0 differences; live payments calls during replay: 0",
	} {
		if !strings.Contains(buf.String(), must) {
			t.Errorf("output lacks %q:\n%s", must, buf.String())
		}
	}
	// Flow 1 (after approval) and flow 3 refund: two executions, one each.
	if n := tool.calls.Load(); n != 2 {
		t.Fatalf("the payments tool executed %d refunds, want 2", n)
	}
	for _, r := range seen {
		if r.Header.Get("X-Tool-Contract-Version") != "v1" || r.Header.Get("Idempotency-Key") == "" || !strings.HasPrefix(r.Header.Get("X-Request-Id"), "tool_") {
			t.Errorf("request headers %v", r.Header)
		}
	}
}
