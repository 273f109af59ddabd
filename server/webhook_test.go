package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/server"
)

// SignWebhook reproduces the Standard Webhooks specification's example
// signatures (the reference libraries' test vectors).
func TestSignWebhookVectors(t *testing.T) {
	for _, v := range []struct {
		secret, id string
		ts         int64
		body, want string
	}{
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, `{"test": 2432232314}`, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
		{"whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1649367553, `{"email":"test@example.com","username":"test_user"}`, "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="},
	} {
		key, err := server.ParseWebhookSecret(v.secret)
		if err != nil {
			t.Fatal(err)
		}
		if got := server.SignWebhook(key, v.id, v.ts, []byte(v.body)); got != v.want {
			t.Errorf("%s: %s, want %s", v.id, got, v.want)
		}
	}
	for _, bad := range []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_c2hvcnQ="} {
		if _, err := server.ParseWebhookSecret(bad); !errors.Is(err, server.ErrConfig) {
			t.Errorf("secret %q: %v", bad, err)
		}
	}
	key := make([]byte, 32)
	for _, u := range []string{"", "ftp://x.example/hook", "https://user:pw@x.example/hook", "/relative"} {
		if _, err := server.NewWebhook(u, key, nil); !errors.Is(err, server.ErrConfig) {
			t.Errorf("URL %q: %v", u, err)
		}
	}
	if _, err := server.NewWebhook("https://x.example/hook", key[:10], nil); !errors.Is(err, server.ErrConfig) {
		t.Errorf("short key: %v", err)
	}
}

// verifyWebhook checks a delivery as a receiver following the
// specification would, independently of SignWebhook.
func verifyWebhook(key []byte, h http.Header, body []byte) error {
	id, ts, sig := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sig == "" {
		return errors.New("missing headers")
	}
	if _, err := strconv.ParseInt(ts, 10, 64); err != nil {
		return err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "." + string(body)))
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, s := range strings.Fields(sig) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return errors.New("no matching signature")
}

// A pause reaches the webhook (the runtime's OnPause): signed, with the
// pending approval redacted, its expiry and its inbox link; a 500 is
// retried under the same id; Close leaves no goroutine.
func TestWebhookTellsOfAPause(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	key := []byte("0123456789abcdef0123456789abcdef")
	var mu sync.Mutex
	var got []http.Header
	var bodies [][]byte
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Header.Clone())
		bodies = append(bodies, b)
		n := len(got)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	wh, err := server.NewWebhook(recv.URL+"/hook", key, &server.WebhookOptions{InboxURL: "https://ops.example/inbox/", Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, func(o *contextos.Options) { o.OnPause = wh.Notify })
	runID := e.startPaused("req_hook_1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 || ctx.Err() != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := wh.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d deliveries, want 2 (a 500, then a retry)", len(got))
	}
	if got[0].Get("webhook-id") != got[1].Get("webhook-id") || !strings.HasPrefix(got[0].Get("webhook-id"), "msg_") {
		t.Errorf("ids %q, %q: a retry keeps the id", got[0].Get("webhook-id"), got[1].Get("webhook-id"))
	}
	for i := range got {
		if err := verifyWebhook(key, got[i], bodies[i]); err != nil {
			t.Errorf("delivery %d: %v", i, err)
		}
		if err := verifyWebhook([]byte("another-key-another-key-another"), got[i], bodies[i]); err == nil {
			t.Errorf("delivery %d verifies with another key", i)
		}
	}
	var ev struct {
		Type string `json:"type"`
		Data struct {
			RunID     string         `json:"run_id"`
			GateID    string         `json:"gate_id"`
			Args      map[string]any `json:"args"`
			ExpiresAt string         `json:"expires_at"`
			InboxURL  string         `json:"inbox_url"`
		} `json:"data"`
	}
	if err := json.Unmarshal(bodies[1], &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != server.WebhookEventApprovalRequested || ev.Data.RunID != runID || ev.Data.GateID != "GATE_FINANCE_APPROVAL" ||
		ev.Data.ExpiresAt != "2026-05-04T11:31:00Z" || ev.Data.InboxURL != "https://ops.example/inbox/runs/"+runID {
		t.Errorf("event %s", bodies[1])
	}
	if strings.Contains(string(bodies[1]), cardNumber) || ev.Data.Args["amount_inr"] != float64(4200) {
		t.Errorf("event args %v", ev.Data.Args)
	}
	// Closed, it drops events without blocking.
	wh.Notify(context.Background(), contextos.PendingApproval{RunID: "run_late"})
}

// A 4xx other than 408 and 429 is not retried; a delivery stops with
// Close's context.
func TestWebhookGivesUp(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var mu sync.Mutex
	n := 0
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		w.WriteHeader(http.StatusGone)
	}))
	defer recv.Close()
	wh, _ := server.NewWebhook(recv.URL, make([]byte, 32), &server.WebhookOptions{Backoff: time.Millisecond})
	wh.Notify(context.Background(), contextos.PendingApproval{RunID: "run_1", RequestedAt: time.Now()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := wh.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("410 delivered %d times, want 1", n)
	}

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer slow.Close()
	wh, _ = server.NewWebhook(slow.URL, make([]byte, 32), &server.WebhookOptions{Backoff: time.Hour})
	wh.Notify(context.Background(), contextos.PendingApproval{RunID: "run_2"})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if err := wh.Close(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close while backing off: %v", err)
	}
}
