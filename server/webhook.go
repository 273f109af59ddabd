package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/gateway"
)

// The pause webhook: a POST to the host's URL each time a run starts
// waiting for an approval, signed as the Standard Webhooks specification
// says (headers webhook-id, webhook-timestamp and webhook-signature
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>"), so the receiver can
// check it came from this service and is fresh.

// WebhookEventApprovalRequested is the type of a pause webhook's event.
const WebhookEventApprovalRequested = "approval.requested"

// WebhookOptions tunes a Webhook. The zero value uses the defaults each
// field names.
type WebhookOptions struct {
	// Client sends the requests. Default: a client with a 10 s timeout
	// that follows no redirect.
	Client *http.Client
	// InboxURL, when set, is the inbox's absolute URL
	// ("https://ops.example.com/inbox"); each event links the run's page.
	InboxURL string
	// Attempts bounds the deliveries of one event (retried on a network
	// error, a 408, 429 or 5xx answer). Default: 5.
	Attempts int
	// Backoff is the wait before the second attempt, doubled before each
	// next one. Default: 1 s.
	Backoff time.Duration
	// Queue bounds the events waiting to be sent; an event over it is
	// dropped (and logged): the inbox stays the record of what waits.
	// Default: 256.
	Queue int
	// Now is the clock of the webhook-timestamp. Default: time.Now.
	Now func() time.Time
	// Logger receives a line per failed delivery. Default: discard.
	Logger *slog.Logger
	// Redactors are the host's redaction rules, as Options.Redactors: an
	// event's arguments are redacted by them and by every built-in rule,
	// as the handler's answers are, whatever rules the run's packs
	// activated (the runtime redacts a pause's arguments by those alone).
	Redactors map[string]gateway.Redactor
}

// Webhook tells a URL of each pause. Its Notify is an
// contextos.Options.OnPause: it queues the event and returns at once; a
// worker delivers it. Close it when the runtime stops.
type Webhook struct {
	url    string
	key    []byte
	o      WebhookOptions
	queue  chan webhookEvent
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// ownClient: the client is the webhook's, closed with it.
	ownClient bool
	// redaction is every built-in rule and o.Redactors.
	redaction *redaction

	mu     sync.Mutex
	closed bool
}

type webhookEvent struct {
	id   string
	body []byte
}

// ParseWebhookSecret reads a Standard Webhooks secret: "whsec_" followed
// by the base64 of the key (24 to 64 bytes).
func ParseWebhookSecret(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	b64, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return nil, fmt.Errorf("%w: a webhook secret is \"whsec_\" and the base64 of its key", ErrConfig)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("%w: the webhook secret's key is not base64", ErrConfig)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("%w: the webhook secret's key is %d bytes; 24 to 64 are required", ErrConfig, len(key))
	}
	return key, nil
}

// NewWebhook returns a webhook posting to rawURL (http or https), signed
// with key (ParseWebhookSecret).
func NewWebhook(rawURL string, key []byte, opts *WebhookOptions) (*Webhook, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("%w: the webhook URL must be an http or https URL without credentials", ErrConfig)
	}
	if len(key) < 24 {
		return nil, fmt.Errorf("%w: the webhook key is shorter than 24 bytes", ErrConfig)
	}
	var o WebhookOptions
	if opts != nil {
		o = *opts
	}
	own := o.Client == nil
	if own {
		o.Client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.Queue <= 0 {
		o.Queue = 256
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	o.InboxURL = strings.TrimSuffix(o.InboxURL, "/")
	w := &Webhook{url: rawURL, key: append([]byte(nil), key...), o: o, queue: make(chan webhookEvent, o.Queue), done: make(chan struct{}), ownClient: own,
		redaction: newRedaction(o.Redactors)}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	go w.loop()
	return w, nil
}

// webhookPayload is the body: the spec's type, timestamp and data.
type webhookPayload struct {
	Type      string       `json:"type"`
	Timestamp time.Time    `json:"timestamp"`
	Data      approvalNote `json:"data"`
}

// approvalNote is what an event tells: the pending approval (its
// arguments redacted, as PendingApprovals gives them), when it expires,
// and the inbox page of the run.
type approvalNote struct {
	contextos.PendingApproval
	ExpiresAt time.Time `json:"expires_at"`
	InboxURL  string    `json:"inbox_url,omitempty"`
}

// Notify queues an event for the pause p; it never blocks (a full queue
// drops the event). Use it as contextos.Options.OnPause.
func (w *Webhook) Notify(ctx context.Context, p contextos.PendingApproval) {
	p.Args = w.redaction.args(p.Args)
	note := approvalNote{PendingApproval: p, ExpiresAt: expiresAt(p).UTC()}
	if w.o.InboxURL != "" {
		note.InboxURL = w.o.InboxURL + "/runs/" + url.PathEscape(p.RunID)
	}
	body, err := json.Marshal(webhookPayload{Type: WebhookEventApprovalRequested, Timestamp: p.RequestedAt.UTC(), Data: note})
	if err != nil {
		w.o.Logger.Error("webhook: event not encoded", "run_id", p.RunID, "error", err.Error())
		return
	}
	// The id is the pause's: every attempt, and a second notice of the
	// same pause, carry it, so a receiver can drop repeats.
	sum := sha256.Sum256([]byte(p.TenantID + "\x00" + p.RunID + "\x00" + p.ToolCallID + "\x00" + p.RecordID + "\x00" + p.ActionDigest))
	ev := webhookEvent{id: "msg_" + hex.EncodeToString(sum[:16]), body: body}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.o.Logger.Warn("webhook: closed; event dropped", "run_id", p.RunID)
		return
	}
	select {
	case w.queue <- ev:
	default:
		w.o.Logger.Warn("webhook: queue full; event dropped", "run_id", p.RunID)
	}
}

// Close stops taking events and waits for the queued ones to be
// delivered until ctx ends, when it gives up on them.
func (w *Webhook) Close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	var err error
	select {
	case <-w.done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	w.cancel()
	<-w.done
	if w.ownClient {
		w.o.Client.CloseIdleConnections()
	}
	return err
}

func (w *Webhook) loop() {
	defer close(w.done)
	for ev := range w.queue {
		w.deliver(ev)
	}
}

// deliver sends ev until it is accepted (2xx), refused for good (another
// 4xx) or out of attempts.
func (w *Webhook) deliver(ev webhookEvent) {
	wait := w.o.Backoff
	for attempt := 1; attempt <= w.o.Attempts; attempt++ {
		retry, err := w.send(ev)
		if err == nil {
			return
		}
		if !retry || attempt == w.o.Attempts {
			w.o.Logger.Error("webhook: event not delivered", "webhook_id", ev.id, "attempts", attempt, "error", err.Error())
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-w.ctx.Done():
			t.Stop()
			w.o.Logger.Error("webhook: closed before the event was delivered", "webhook_id", ev.id)
			return
		}
		wait *= 2
	}
}

// send makes one attempt; retry says whether another may succeed.
func (w *Webhook) send(ev webhookEvent) (retry bool, err error) {
	ts := w.o.Now().Unix()
	req, err := http.NewRequestWithContext(w.ctx, http.MethodPost, w.url, bytes.NewReader(ev.body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "contextos-serve")
	req.Header.Set("webhook-id", ev.id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", SignWebhook(w.key, ev.id, ts, ev.body))
	resp, err := w.o.Client.Do(req)
	if err != nil {
		// The client's error quotes the URL, whose path or query is
		// often a credential (a hook's token): the log gets the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return true, fmt.Errorf("request failed: %w", err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		return true, fmt.Errorf("answered %d", resp.StatusCode)
	}
	return false, fmt.Errorf("answered %d", resp.StatusCode)
}

// SignWebhook is the Standard Webhooks signature of a message: "v1," and
// the base64 of HMAC-SHA256(key, id + "." + timestamp + "." + body).
func SignWebhook(key []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", id, timestamp)
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
