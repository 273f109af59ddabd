package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/wire"
)

// ContractVersion is the Tool Contract version this package speaks.
const ContractVersion = "v1"

// HeaderContractVersion is the header envelope transports send.
const HeaderContractVersion = "X-Tool-Contract-Version"

// DefaultOperation is a tool's operation when none is given.
const DefaultOperation = "invoke"

// Response statuses.
const (
	StatusOK     = "ok"
	StatusError  = "error"
	StatusDenied = "denied"
)

// Request is a ToolExecutionRequest (seed 004). Input holds any JSON
// object; InputRaw, when set, is sent instead of Input by the http
// transport and wins over it.
type Request struct {
	ToolContractVersion string         `json:"tool_contract_version,omitempty"`
	RequestID           string         `json:"request_id,omitempty"`
	TaskID              string         `json:"task_id,omitempty"`
	Namespace           string         `json:"namespace,omitempty"`
	Agent               string         `json:"agent,omitempty"`
	Tool                Tool           `json:"tool"`
	Input               map[string]any `json:"input,omitempty"`
	InputRaw            string         `json:"input_raw,omitempty"`
	Runtime             *RuntimeInfo   `json:"runtime,omitempty"`
	Auth                *AuthInfo      `json:"auth,omitempty"`
	Trace               *Trace         `json:"trace,omitempty"`
	// Attempt counts from 1; the same request id is reused across attempts.
	Attempt int `json:"attempt,omitempty"`
	// IdempotencyKey is the same across attempts, pauses and resumes
	// (our addition to the contract; Orloj's servers ignore it).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// Tool names the tool and what it may do.
type Tool struct {
	Name         string   `json:"name"`
	Operation    string   `json:"operation,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	RiskLevel    string   `json:"risk_level,omitempty"`
}

// RuntimeInfo describes how the caller runs the call. It is informational
// on the wire; the caller's Retry policy is what retries.
type RuntimeInfo struct {
	Mode         string `json:"mode,omitempty"`
	TimeoutMS    int64  `json:"timeout_ms,omitempty"`
	MaxAttempts  int    `json:"max_attempts,omitempty"`
	Backoff      string `json:"backoff,omitempty"`
	MaxBackoffMS int64  `json:"max_backoff_ms,omitempty"`
	// Jitter is a boolean on the wire (seed 004); a string jitter mode is
	// read as true unless it is "none".
	Jitter WireJitter `json:"jitter,omitempty"`
}

// WireJitter is the runtime.jitter flag, read from a bool or a mode name.
type WireJitter bool

// UnmarshalJSON accepts true/false and "none"/"full"/"equal".
func (j *WireJitter) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case bool:
		*j = WireJitter(x)
	case string:
		*j = WireJitter(x != "" && x != string(JitterNone))
	case nil:
		*j = false
	default:
		return fmt.Errorf("jitter must be a boolean or a jitter mode")
	}
	return nil
}

// AuthInfo names the auth profile and secret reference, never a secret.
type AuthInfo struct {
	Profile   string   `json:"profile,omitempty"`
	SecretRef string   `json:"secret_ref,omitempty"`
	Scopes    []string `json:"scopes,omitempty"`
}

// Trace carries trace correlation.
type Trace struct {
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
}

// Response is a ToolExecutionResponse.
type Response struct {
	ToolContractVersion string         `json:"tool_contract_version,omitempty"`
	RequestID           string         `json:"request_id,omitempty"`
	Status              string         `json:"status,omitempty"`
	Output              map[string]any `json:"output,omitempty"`
	Usage               *Usage         `json:"usage,omitempty"`
	Trace               *Trace         `json:"trace,omitempty"`
	Error               *Failure       `json:"error,omitempty"`
}

// Usage reports the attempt's duration and number.
type Usage struct {
	DurationMS int64 `json:"duration_ms,omitempty"`
	Attempt    int   `json:"attempt,omitempty"`
}

// Failure is a response's error: the canonical code and reason, whether it
// is retryable (always written), a safe message and details (any JSON).
type Failure struct {
	Code      string         `json:"code,omitempty"`
	Reason    string         `json:"reason,omitempty"`
	Retryable bool           `json:"retryable"`
	Message   string         `json:"message,omitempty"`
	Details   map[string]any `json:"details,omitempty"`
}

// Capability labels (seed 004).
var CapabilityLabels = []string{"data.read", "data.write", "network.read", "network.write",
	"filesystem.read", "filesystem.write", "exec.command", "external.side_effect"}

// RiskLevels are the four risk levels, lowest first.
var RiskLevels = []string{"low", "medium", "high", "critical"}

// Normalize applies the contract's normalisation to a request in place and
// reports the first refusal: an empty version becomes v1 (an unknown
// version is invalid_input, not retryable); request_id and tool.name are
// required; operation defaults to invoke; capability labels and auth
// scopes are trimmed, lower-cased and de-duplicated in order; risk level
// and auth profile are lower-cased; attempt is at least 1.
func Normalize(r *Request) *gateway.ToolError {
	v := strings.ToLower(strings.TrimSpace(r.ToolContractVersion))
	if v == "" {
		v = ContractVersion
	}
	if v != ContractVersion {
		return newError(gateway.CodeInvalidInput, false, fmt.Sprintf("unsupported tool_contract_version %q", clip(r.ToolContractVersion)),
			map[string]any{"field": "tool_contract_version", "expected": ContractVersion})
	}
	r.ToolContractVersion = v
	if r.RequestID = strings.TrimSpace(r.RequestID); r.RequestID == "" {
		return newError(gateway.CodeInvalidInput, false, "request_id is required", map[string]any{"field": "request_id"})
	}
	if r.Tool.Name = strings.TrimSpace(r.Tool.Name); r.Tool.Name == "" {
		return newError(gateway.CodeInvalidInput, false, "tool.name is required", map[string]any{"field": "tool.name"})
	}
	r.Tool.Operation = strings.ToLower(strings.TrimSpace(r.Tool.Operation))
	if r.Tool.Operation == "" {
		r.Tool.Operation = DefaultOperation
	}
	r.Tool.Capabilities = labels(r.Tool.Capabilities)
	r.Tool.RiskLevel = strings.ToLower(strings.TrimSpace(r.Tool.RiskLevel))
	if r.Auth != nil {
		r.Auth.Profile = strings.ToLower(strings.TrimSpace(r.Auth.Profile))
		r.Auth.Scopes = labels(r.Auth.Scopes)
	}
	if r.Attempt < 1 {
		r.Attempt = 1
	}
	return nil
}

// labels trims, lower-cases and de-duplicates, keeping first occurrences.
func labels(in []string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, 0, len(in))
	for _, l := range in {
		l = strings.ToLower(strings.TrimSpace(l))
		if l != "" && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// DecodeRequest decodes and normalises a request from a tool caller. It
// accepts seed 004's any-JSON input and Orloj's flat string map alike.
func DecodeRequest(data []byte) (*Request, *gateway.ToolError) {
	if err := wire.Strict(data); err != nil {
		return nil, newError(gateway.CodeInvalidInput, false, "the request is not a Tool Contract v1 envelope: "+strictProblem(err), map[string]any{"field": "(request)"})
	}
	var r Request
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, newError(gateway.CodeInvalidInput, false, "the request is not a Tool Contract v1 envelope: "+jsonProblem(err), map[string]any{"field": "(request)"})
	}
	if e := Normalize(&r); e != nil {
		return nil, e
	}
	return &r, nil
}

// DecodeResponse decodes a tool's contract response. It accepts seed
// 004's forms (output and details hold any JSON) and Orloj's (output with
// only a result string, string details). A body that is not a JSON
// object, or has no status, is an invalid contract response (ErrContract).
func DecodeResponse(data []byte) (*Response, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, fmt.Errorf("%w: the body is not a JSON object", ErrContract)
	}
	if err := wire.Strict(data); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrContract, strictProblem(err))
	}
	var r Response
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrContract, jsonProblem(err))
	}
	r.Status = strings.ToLower(strings.TrimSpace(r.Status))
	switch r.Status {
	case StatusOK, StatusError, StatusDenied:
	case "":
		return nil, fmt.Errorf("%w: status is missing", ErrContract)
	default:
		return nil, fmt.Errorf("%w: status %q is not ok, error or denied", ErrContract, clip(r.Status))
	}
	if v := strings.ToLower(strings.TrimSpace(r.ToolContractVersion)); v != "" && v != ContractVersion {
		return nil, fmt.Errorf("%w: unsupported tool_contract_version %q", ErrContract, clip(r.ToolContractVersion))
	}
	return &r, nil
}

// strictProblem says what the strict scan refused (a duplicate member,
// invalid UTF-8, ...) with its path, never a value.
func strictProblem(err error) string {
	var se *wire.StrictError
	if errors.As(err, &se) {
		return strings.TrimPrefix(se.Error(), "JSON document refused: ")
	}
	return "the JSON document is refused"
}

// jsonProblem says what is wrong with a JSON document without echoing it.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("%s must be %s, not %s", orWhole(te.Field), te.Type.String(), te.Value)
	}
	return "invalid JSON"
}

func orWhole(f string) string {
	if f == "" {
		return "the document"
	}
	return f
}

// Err turns a response into nil (ok) or the *Error it reports. A failed
// response without an error envelope is a non-retryable backend failure.
func (r *Response) Err() *gateway.ToolError {
	switch r.Status {
	case "", StatusOK:
		return nil
	}
	if r.Error == nil {
		return newError(gateway.CodeExecutionFailed, false, "tool response missing error envelope", nil)
	}
	e := &gateway.ToolError{Code: strings.ToLower(r.Error.Code), Reason: strings.ToLower(r.Error.Reason), Retryable: r.Error.Retryable,
		Message: r.Error.Message, Details: r.Error.Details}
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	// The taxonomy is closed: an unknown code is a backend failure that
	// keeps the tool's own code in details, and a code's reason is its
	// canonical one.
	if gateway.ReasonFor(e.Code) == "" {
		if e.Code != "" {
			e.Details["tool_code"] = clip(e.Code)
		}
		e.Code = gateway.CodeExecutionFailed
	}
	if want := gateway.ReasonFor(e.Code); e.Reason != want {
		if e.Reason != "" {
			e.Details["tool_reason"] = clip(e.Reason)
		}
		e.Reason = want
	}
	if e.Message == "" {
		e.Message = "tool execution failed"
	}
	if r.Status == StatusDenied || e.Code == gateway.CodePermissionDenied || isApproval(e.Code) {
		e.Retryable = false // denials and approvals are never retried
	}
	return e
}

// OutputValue is the output an ok response carries: the output object, or
// {"result": s} for Orloj's string result (already that shape).
func (r *Response) OutputValue() map[string]any {
	if r.Output == nil {
		return map[string]any{}
	}
	return r.Output
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
