package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
)

// TestTransportRetriesThroughTheGateway: a real HTTP tool failing twice
// with 503 is called three times by the gateway, with one request id and
// one idempotency key, attempts 1, 2, 3, and the endpoint's reproducible
// backoff between them.
func TestTransportRetriesThroughTheGateway(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		n := len(seen)
		mu.Unlock()
		if n < 3 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"status":"ok","output":{"transaction_id":"txn_q9"}}`)
	}))
	defer srv.Close()
	retry := transport.Retry{MaxAttempts: 3, Backoff: 20 * time.Millisecond, MaxBackoff: time.Second, Jitter: transport.JitterFull, Seed: 42}
	ad, err := transport.NewAdapter(transport.Endpoint{Transport: "external", URL: srv.URL, AllowPrivate: true, Timeout: time.Minute, Retry: retry}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	f := newFixture(t, lowValue)
	refund := ad.Capability()
	refund.ArgsSchema, refund.Scopes = refundSchema, []string{"payments.refund"}
	gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_payments", Adapter: ad, Capabilities: map[string]gateway.Capability{"issue_refund": refund}}},
		&gateway.Options{Transcript: canonChecked{t, gateway.NewMemoryTranscript()}, Now: func() time.Time { return f.now },
			Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := rebind(t, f, gw).Call(ctx, refundCall(1200))
	if err != nil || res.Status != gateway.StatusCompleted || res.Metadata.Attempts != 3 || res.Metadata.Retries != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	if len(seen) != 3 {
		t.Fatalf("%d requests", len(seen))
	}
	for i, h := range seen {
		if h.Get("X-Request-Id") != res.ToolCallID || h.Get("Idempotency-Key") != res.Metadata.IdempotencyKey || h.Get("X-Tool-Attempt") != string(rune('1'+i)) {
			t.Fatalf("attempt %d headers %v", i+1, h)
		}
	}
	want := []time.Duration{refund.Backoff(res.ToolCallID, 1), refund.Backoff(res.ToolCallID, 2)}
	if len(waits) != 2 || waits[0] != want[0] || waits[1] != want[1] || waits[0] > 20*time.Millisecond || waits[1] > 40*time.Millisecond {
		t.Fatalf("waits %v, want %v", waits, want)
	}
}
