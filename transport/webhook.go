package transport

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/contextos/contextos/gateway"
)

// DefaultPollInterval is the webhook poll interval when none is set.
const DefaultPollInterval = 2 * time.Second

// pending holds the webhook calls waiting for a result, by request id.
type pending struct {
	mu    sync.Mutex
	calls map[string]chan *Response
}

func newPending() *pending { return &pending{calls: map[string]chan *Response{}} }

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

// waitWebhook waits for an accepted webhook call's result: a pushed
// response, or a terminal poll of URL/{request_id} (202 and 204 are still
// pending; a poll that fails to reach the tool is retried at the next
// tick), until the attempt's context ends. A poll goes through the same
// client rules as the submit: redirects, refused addresses, the 4 MiB
// bound, and a reply for another request_id is refused (by instrument).
func (a *Adapter) waitWebhook(ctx context.Context, req *Request, pushed chan *Response, details map[string]any) (*Response, *gateway.ToolError) {
	every := a.ep.PollInterval
	if every <= 0 {
		every = DefaultPollInterval
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
			hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, pollURL, nil)
			if err != nil {
				return nil, newError(gateway.CodeRuntimePolicyInvalid, false, "the poll URL is invalid", details)
			}
			hreq.Header.Set("Accept", "application/json")
			hreq.Header.Set(HeaderContractVersion, ContractVersion)
			setCallHeaders(hreq.Header, req)
			if _, te := applyAuth(ctx, a.ep.Auth, a.opts.Secrets, a.opts.Tokens, a.ep.AllowPrivate, hreq.Header); te != nil {
				return nil, te
			}
			status, body, te := a.do(ctx, hreq, details)
			switch {
			case ctx.Err() != nil:
				return nil, transportError(ctx, ctx.Err(), withDetail(details, "request_id", req.RequestID))
			case te != nil && te.Retryable && te.Code == gateway.CodeExecutionFailed && te.Details["http_status"] == nil:
				continue // the tool was not reached: not its answer
			case te != nil:
				return nil, te
			case status == http.StatusAccepted || status == http.StatusNoContent:
				continue
			}
			return contractReply(body, details)
		}
	}
}
