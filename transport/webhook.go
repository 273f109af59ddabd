package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/contextos/contextos/gateway"
)

// defaultPollInterval is the webhook poll interval when none is set.
const defaultPollInterval = 2 * time.Second

// maxAccepted bounds how many accepted, unfinished webhook jobs an adapter
// remembers. None is ever forgotten before the tool's terminal response
// (forgetting one would let a later attempt submit it again); while this
// many are outstanding, the adapter submits no new job (full).
const maxAccepted = 4096

// pending holds the webhook calls waiting for a result, by request id,
// and the request ids the tool has accepted and not yet finished.
type pending struct {
	mu       sync.Mutex
	calls    map[string]chan *Response
	accepted map[string]bool
}

func newPending() *pending {
	return &pending{calls: map[string]chan *Response{}, accepted: map[string]bool{}}
}

// accept notes that the tool accepted id: it is not submitted again. It
// never evicts another id; full keeps the set bounded (up to the number of
// submissions in flight past it at once).
func (p *pending) accept(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.accepted[id] = true
}

// full reports whether maxAccepted jobs are outstanding, so no new one may
// be submitted.
func (p *pending) full() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.accepted) >= maxAccepted
}

func (p *pending) wasAccepted(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted[id]
}

// forget drops id once its job's outcome is final.
func (p *pending) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.accepted, id)
}

func (p *pending) add(id string) chan *Response {
	ch := make(chan *Response, 1)
	p.mu.Lock()
	p.calls[id] = ch
	p.mu.Unlock()
	return ch
}

func (p *pending) remove(id string, ch chan *Response) {
	p.mu.Lock()
	if p.calls[id] == ch {
		delete(p.calls, id)
	}
	p.mu.Unlock()
}

func (p *pending) deliver(r *Response) bool {
	p.mu.Lock()
	ch, ok := p.calls[r.RequestID]
	if ok {
		delete(p.calls, r.RequestID)
	}
	p.mu.Unlock()
	if ok {
		ch <- r // buffered, and removed before the send: never blocks
	}
	return ok
}

// Deliver finishes a waiting webhook call with its terminal response (push
// delivery). It reports false when no call waits for r.RequestID (or the
// adapter is not a webhook adapter).
func (a *Adapter) Deliver(r *Response) bool {
	if a.pending == nil || r == nil || r.RequestID == "" {
		return false
	}
	return a.pending.deliver(r)
}

// PushHandler is the http.Handler a webhook tool posts its terminal
// response to: 202 when a call was waiting for it, 404 when none was,
// 400 for a body that is not a contract response. Mount it behind the
// host's own authentication.
func (a *Adapter) PushHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST a Tool Contract v1 response", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		resp, err := DecodeResponse(body)
		if err != nil || resp.RequestID == "" {
			http.Error(w, "the body is not a Tool Contract v1 response with a request_id", http.StatusBadRequest)
			return
		}
		if !a.Deliver(resp) {
			http.Error(w, "no call is waiting for this request_id", http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
}

// pollTimeout bounds one poll: a status endpoint that hangs costs one
// poll, not the attempt (the next tick polls again).
func pollTimeout(every time.Duration) time.Duration { return max(every, 5*time.Second) }

// terminalStatuses are the statuses that end a webhook job.
var terminalStatuses = []string{StatusOK, StatusError, StatusDenied}

// pendingBody reports a webhook reply that says the job is not done: an
// empty body, or a JSON object whose status is set and is not ok, error
// or denied ("pending", "accepted", "running", …). Such a reply is never
// read as a result or a failure.
func pendingBody(body []byte) bool {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return true
	}
	var probe struct {
		Status  *string `json:"status"`
		Version string  `json:"tool_contract_version"`
	}
	if body[0] != '{' || json.Unmarshal(body, &probe) != nil || probe.Status == nil || checkVersion(probe.Version) != nil {
		return false // read as a reply, and refused as one
	}
	st := strings.ToLower(strings.TrimSpace(*probe.Status))
	return st != "" && !slices.Contains(terminalStatuses, st)
}

// waitWebhook waits for an accepted webhook call's result: a pushed
// response, or a terminal poll of URL/{request_id}, until the attempt's
// context ends. A job that is not done is polled again at the next tick,
// and is never submitted again, whatever a poll answers: 202, 204 or a
// pending body (pendingBody); a poll that does not reach the tool, that
// takes longer than its own bound (pollTimeout), or that the tool answers
// with 429 or a 5xx. A poll goes through the same client rules as the
// submit: redirects, refused addresses, the 4 MiB bound, and a reply for
// another request_id is refused (by instrument). Another 4xx, a refused
// redirect or address, and a terminal body end the wait.
func (a *Adapter) waitWebhook(ctx context.Context, req *Request, pushed chan *Response, details map[string]any) (*Response, *gateway.ToolError) {
	every := a.ep.PollInterval
	if every <= 0 {
		every = defaultPollInterval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	// The request id is a path segment, escaped: it cannot climb out of
	// the endpoint's path.
	pollURL := strings.TrimRight(a.ep.URL, "/") + "/" + url.PathEscape(req.RequestID)
	for {
		select {
		case <-ctx.Done():
			return nil, transportError(ctx, ctx.Err(), withDetail(details, "request_id", req.RequestID))
		case r := <-pushed:
			return r, nil
		case <-tick.C:
			r, te, again := a.poll(ctx, req, pollURL, every, details)
			if ctx.Err() != nil {
				return nil, transportError(ctx, ctx.Err(), withDetail(details, "request_id", req.RequestID))
			}
			if !again {
				return r, te
			}
		}
	}
}

// poll makes one poll; again reports that the job is still running (or
// the poll did not get an answer) and the wait goes on.
func (a *Adapter) poll(ctx context.Context, req *Request, pollURL string, every time.Duration, details map[string]any) (*Response, *gateway.ToolError, bool) {
	pctx, cancel := context.WithTimeout(ctx, pollTimeout(every))
	defer cancel()
	hreq, err := http.NewRequestWithContext(pctx, http.MethodGet, pollURL, nil)
	if err != nil {
		return nil, newError(gateway.CodeRuntimePolicyInvalid, false, "the poll URL is invalid", details), false
	}
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set(headerContractVersion, ContractVersion)
	setCallHeaders(ctx, hreq.Header, req)
	if _, te := applyAuth(ctx, a.ep.Auth, a.opts.Secrets, a.opts.Tokens, a.ep.AllowPrivate, hreq.Header); te != nil {
		return nil, te, false
	}
	status, body, te := a.do(pctx, hreq, func() map[string]any { return details })
	switch {
	case ctx.Err() != nil:
		return nil, nil, true // the caller reports the attempt's own end
	case te != nil && te.Retryable:
		// Not reached, timed out, 429 or 5xx: the job was accepted and
		// still is; the next tick asks again.
		return nil, nil, true
	case te != nil:
		return nil, te, false
	case status == http.StatusAccepted || status == http.StatusNoContent || pendingBody(body):
		return nil, nil, true
	}
	r, te := contractReply(body, func() map[string]any { return details })
	return r, te, false
}
