// Package orlojpeer plays the upstream Tool Contract v1 implementation
// (Orloj, github.com/OrlojHQ/orloj at dbbf19a) in interop tests: its wire
// structs with their exact field types (input and error details typed
// string → string, output holding only a result string, retryable always
// written), its executor adapter behind an HTTP server (external) and a
// webhook-callback server, its external and webhook-callback clients, and
// its conformance harness's envelope checks and canonical cases. It is
// written from the reference notes on that implementation; no upstream
// code is reproduced. Only tests import it.
package orlojpeer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Request is Orloj's ToolExecutionRequest.
type Request struct {
	ToolContractVersion string            `json:"tool_contract_version,omitempty"`
	RequestID           string            `json:"request_id,omitempty"`
	TaskID              string            `json:"task_id,omitempty"`
	Namespace           string            `json:"namespace,omitempty"`
	Agent               string            `json:"agent,omitempty"`
	Tool                Tool              `json:"tool,omitempty"`
	Input               map[string]string `json:"input,omitempty"`
	InputRaw            string            `json:"input_raw,omitempty"`
	Runtime             Runtime           `json:"runtime,omitempty"`
	Auth                Auth              `json:"auth,omitempty"`
	Trace               Trace             `json:"trace,omitempty"`
	Attempt             int               `json:"attempt,omitempty"`
}

// Tool is the request's tool.
type Tool struct {
	Name         string   `json:"name,omitempty"`
	Operation    string   `json:"operation,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	RiskLevel    string   `json:"risk_level,omitempty"`
}

// Runtime is the request's (informational) runtime block.
type Runtime struct {
	Mode         string `json:"mode,omitempty"`
	TimeoutMS    int    `json:"timeout_ms,omitempty"`
	MaxAttempts  int    `json:"max_attempts,omitempty"`
	Backoff      string `json:"backoff,omitempty"`
	MaxBackoffMS int    `json:"max_backoff_ms,omitempty"`
	Jitter       bool   `json:"jitter,omitempty"`
}

// Auth names a profile and a secret reference.
type Auth struct {
	Profile   string   `json:"profile,omitempty"`
	SecretRef string   `json:"secret_ref,omitempty"`
	Scopes    []string `json:"scopes,omitempty"`
}

// Trace is the trace correlation block.
type Trace struct {
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
}

// Response is Orloj's ToolExecutionResponse.
type Response struct {
	ToolContractVersion string   `json:"tool_contract_version,omitempty"`
	RequestID           string   `json:"request_id,omitempty"`
	Status              string   `json:"status,omitempty"`
	Output              Output   `json:"output,omitempty"`
	Usage               Usage    `json:"usage,omitempty"`
	Trace               Trace    `json:"trace,omitempty"`
	Error               *Failure `json:"error,omitempty"`
}

// Output holds only a result string.
type Output struct {
	Result string `json:"result,omitempty"`
}

// Usage is the attempt's duration and number.
type Usage struct {
	DurationMS int64 `json:"duration_ms,omitempty"`
	Attempt    int   `json:"attempt,omitempty"`
}

// Failure is the error envelope: details are string → string.
type Failure struct {
	Code      string            `json:"code,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	Retryable bool              `json:"retryable"`
	Message   string            `json:"message,omitempty"`
	Details   map[string]string `json:"details,omitempty"`
}

// ToolError is an error a tool function returns to choose its failure.
type ToolError struct {
	Status, Code, Reason, Message string
	Retryable                     bool
	Details                       map[string]string
}

func (e *ToolError) Error() string { return "tool_code=" + e.Code + " message=" + e.Message }

// Func is Orloj's string runtime: a tool name and raw input in, a result
// string out.
type Func func(ctx context.Context, tool, input string) (string, error)

// Execute is Orloj's executor adapter: normalise the request (refusing an
// unknown version, a missing request_id or tool.name as a non-retryable
// invalid_input), call f with input_raw (else the JSON of input), fold
// every error into a response, and echo version, request id, attempt and
// trace.
func Execute(ctx context.Context, f Func, req Request) Response {
	start := time.Now()
	attempt := max(req.Attempt, 1)
	out := Response{ToolContractVersion: "v1", RequestID: req.RequestID, Usage: Usage{Attempt: attempt}, Trace: req.Trace}
	fail := func(code, reason, msg string, retryable bool, details map[string]string) Response {
		out.Status = "error"
		out.Error = &Failure{Code: code, Reason: reason, Retryable: retryable, Message: msg, Details: details}
		return out
	}
	v := strings.ToLower(strings.TrimSpace(req.ToolContractVersion))
	switch {
	case v != "" && v != "v1":
		return fail("invalid_input", "tool_invalid_input", "unsupported tool contract version", false, map[string]string{"field": "tool_contract_version", "expected": "v1"})
	case strings.TrimSpace(req.RequestID) == "":
		return fail("invalid_input", "tool_invalid_input", "request_id is required", false, map[string]string{"field": "request_id"})
	case strings.TrimSpace(req.Tool.Name) == "":
		return fail("invalid_input", "tool_invalid_input", "tool.name is required", false, map[string]string{"field": "tool.name"})
	}
	input := req.InputRaw
	if input == "" && len(req.Input) > 0 {
		b, _ := json.Marshal(req.Input)
		input = string(b)
	}
	result, err := f(ctx, req.Tool.Name, input)
	out.Usage.DurationMS = time.Since(start).Milliseconds()
	if err == nil {
		out.Status, out.Output = "ok", Output{Result: result}
		return out
	}
	var te *ToolError
	switch {
	case errors.As(err, &te):
		r := fail(te.Code, te.Reason, te.Message, te.Retryable, te.Details)
		if te.Status == "denied" {
			r.Status = "denied"
		}
		return r
	case errors.Is(err, context.DeadlineExceeded):
		return fail("timeout", "tool_execution_timeout", err.Error(), true, nil)
	case errors.Is(err, context.Canceled):
		return fail("canceled", "tool_execution_canceled", err.Error(), false, nil)
	}
	return fail("execution_failed", "tool_backend_failure", err.Error(), true, nil)
}

// Handler serves f as an external tool: it decodes the POSTed request
// with Orloj's types (a request it cannot decode is answered 400, as a
// typed decoder must) and answers 200 with Execute's response.
func Handler(f Func) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "invalid tool execution request: "+err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, Execute(r.Context(), f, req))
	})
}

// Webhook is a webhook-callback tool: a POST is accepted (202) and runs
// f; GET {path}/{request_id} answers 202 for the first Pending polls, then
// 200 with the terminal response. Posts counts the submissions.
type Webhook struct {
	F       Func
	Pending int

	mu    sync.Mutex
	Posts int
	polls map[string]int
	done  map[string]Response
}

// ServeHTTP implements http.Handler.
func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done == nil {
		h.done, h.polls = map[string]Response{}, map[string]int{}
	}
	if r.Method == http.MethodPost {
		var req Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "invalid tool execution request", http.StatusBadRequest)
			return
		}
		h.Posts++
		h.done[req.RequestID] = Execute(r.Context(), h.F, req)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	id := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	resp, ok := h.done[id]
	if !ok {
		http.Error(w, "no such job", http.StatusNotFound)
		return
	}
	if h.polls[id]++; h.polls[id] <= h.Pending {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// ErrInvalidResponse is a reply Orloj's client cannot decode.
var ErrInvalidResponse = errors.New("invalid contract response")

// External is Orloj's external client: POST the request as JSON with
// X-Tool-Contract-Version: v1 and decode the reply with Orloj's types
// (status ≥ 400 is an error; a reply that does not decode is
// ErrInvalidResponse). It also returns the raw reply.
func External(ctx context.Context, hc *http.Client, url string, req Request) (Response, []byte, error) {
	status, body, err := post(ctx, hc, url, req)
	if err != nil {
		return Response{}, body, err
	}
	if status >= 400 {
		return Response{}, body, fmt.Errorf("tool endpoint answered HTTP %d", status)
	}
	resp, err := decode(body)
	return resp, body, err
}

// WebhookCall is Orloj's webhook-callback client: POST; 200 is the
// terminal reply; another 2xx is polled at {url}/{request_id} every
// interval (202 and 204 pending, transport errors ignored, ≥ 400
// terminal) until a reply or ctx's end.
func WebhookCall(ctx context.Context, hc *http.Client, url string, req Request, every time.Duration) (Response, error) {
	status, body, err := post(ctx, hc, url, req)
	switch {
	case err != nil:
		return Response{}, err
	case status >= 400:
		return Response{}, fmt.Errorf("tool endpoint answered HTTP %d", status)
	case status == http.StatusOK:
		return decode(body)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return Response{}, ctx.Err()
		case <-tick.C:
			r, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(url, "/")+"/"+req.RequestID, nil)
			r.Header.Set("Accept", "application/json")
			res, err := hc.Do(r)
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(io.LimitReader(res.Body, 4<<20))
			res.Body.Close()
			switch {
			case res.StatusCode == http.StatusAccepted || res.StatusCode == http.StatusNoContent:
				continue
			case res.StatusCode >= 400:
				return Response{}, fmt.Errorf("tool endpoint answered HTTP %d", res.StatusCode)
			}
			return decode(body)
		}
	}
}

func post(ctx context.Context, hc *http.Client, url string, req Request) (int, []byte, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return 0, nil, err
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Tool-Contract-Version", "v1")
	res, err := hc.Do(r)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	return res.StatusCode, body, err
}

func decode(body []byte) (Response, error) {
	var resp Response
	if err := json.Unmarshal(body, &resp); err != nil {
		return Response{}, fmt.Errorf("%w: %w", ErrInvalidResponse, err)
	}
	return resp, nil
}

// Governed is Orloj's governed runtime's retry loop around one tool call:
// attempt n (1-based) runs call; a reply that could not be read (call's
// error: an undecodable body, a transport failure — Orloj folds these into
// a retryable execution_failed, a cancellation excepted) and an error
// reply marked retryable are attempted again, up to maxAttempts; an ok
// reply or a non-retryable one ends the loop. It returns the last reply,
// the attempts made and the last error.
func Governed(ctx context.Context, maxAttempts int, call func(ctx context.Context, attempt int) (Response, error)) (Response, int, error) {
	var resp Response
	var err error
	n := 0
	for n < maxAttempts {
		n++
		resp, err = call(ctx, n)
		switch {
		case err != nil && errors.Is(err, context.Canceled):
			return resp, n, err
		case err != nil:
			continue
		case strings.EqualFold(resp.Status, "ok"):
			return resp, n, nil
		case resp.Error == nil || !resp.Error.Retryable:
			return resp, n, nil
		}
	}
	return resp, n, err
}

// BaseRequest is the conformance catalog's base request: version v1,
// namespace default, agent research-agent, operation invoke, input_raw
// "tool=<tool> payload", trace id default/task/a001 with the request id
// as span id, attempt 1.
func BaseRequest(tool, requestID string) Request {
	return Request{ToolContractVersion: "v1", RequestID: requestID, Namespace: "default", Agent: "research-agent",
		Tool: Tool{Name: tool, Operation: "invoke"}, InputRaw: "tool=" + tool + " payload",
		Trace: Trace{TraceID: "default/task/a001", SpanID: requestID}, Attempt: 1}
}

// Expect is a conformance case's expectation.
type Expect struct {
	Status, Code, Reason string
	Retryable            *bool
}

// UnknownVersion is the catalog's unknown-version case: version v9 is an
// error, invalid_input / tool_invalid_input, not retryable.
func UnknownVersion(tool string) (Request, Expect) {
	req := BaseRequest(tool, "conformance-unknown-version")
	req.ToolContractVersion = "v9"
	no := false
	return req, Expect{Status: "error", Code: "invalid_input", Reason: "tool_invalid_input", Retryable: &no}
}

// Validate is the harness's envelope check of resp against req, with the
// expectation when given: every problem, in order (none: conformant).
func Validate(req Request, resp Response, want *Expect) []string {
	var ps []string
	add := func(f string, a ...any) { ps = append(ps, fmt.Sprintf(f, a...)) }
	if !strings.EqualFold(resp.ToolContractVersion, "v1") {
		add("tool_contract_version %q, want v1", resp.ToolContractVersion)
	}
	if req.RequestID != "" && resp.RequestID != req.RequestID {
		add("request_id %q, want %q", resp.RequestID, req.RequestID)
	}
	switch strings.ToLower(resp.Status) {
	case "ok":
		if resp.Error != nil {
			add("status ok with an error")
		}
	case "error", "denied":
		if resp.Error == nil || resp.Error.Code == "" || resp.Error.Reason == "" || resp.Error.Message == "" {
			add("status %s without code, reason and message: %+v", resp.Status, resp.Error)
		}
	default:
		add("status %q", resp.Status)
	}
	if resp.Usage.Attempt <= 0 {
		add("usage.attempt %d, want > 0", resp.Usage.Attempt)
	}
	if req.Trace.TraceID != "" && resp.Trace.TraceID != req.Trace.TraceID {
		add("trace.trace_id %q, want %q", resp.Trace.TraceID, req.Trace.TraceID)
	}
	if req.Trace.SpanID != "" && resp.Trace.SpanID != req.Trace.SpanID {
		add("trace.span_id %q, want %q", resp.Trace.SpanID, req.Trace.SpanID)
	}
	if want != nil {
		if resp.Status != want.Status {
			add("status %q, want %q", resp.Status, want.Status)
		}
		if e := resp.Error; want.Code != "" && (e == nil || e.Code != want.Code || e.Reason != want.Reason) {
			add("error %+v, want %s / %s", e, want.Code, want.Reason)
		}
		if e := resp.Error; want.Retryable != nil && (e == nil || e.Retryable != *want.Retryable) {
			add("error %+v, want retryable %v", e, *want.Retryable)
		}
	}
	return ps
}
