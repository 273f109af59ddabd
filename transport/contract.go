package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/runcontext"
)

// ContractVersion is the Tool Contract version this package speaks.
const ContractVersion = "v1"

// headerContractVersion is the header envelope transports send.
const headerContractVersion = "X-Tool-Contract-Version"

// defaultOperation is a tool's operation when none is given.
const defaultOperation = "invoke"

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
	// TraceContext is the caller's whole W3C trace context (flags,
	// tracestate, baggage). It is not in the body: each attempt sends it as
	// headers (gRPC metadata), parented on the attempt's span
	// (runcontext.Trace.Outbound). Zero for a request built without one.
	TraceContext runcontext.Trace `json:"-"`
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

// WireJitter is the runtime.jitter flag: a boolean on the wire (seed
// 004), read from a boolean or a jitter mode name, as peers write either.
type WireJitter bool

// UnmarshalJSON accepts true, false and null, and a jitter mode ("none"
// and "" read as false, any other mode as true).
func (j *WireJitter) UnmarshalJSON(b []byte) error {
	switch raw := string(bytes.TrimSpace(b)); {
	case raw == "true":
		*j = true
	case raw == "false" || raw == "null":
		*j = false
	case strings.HasPrefix(raw, `"`):
		var mode string
		if err := json.Unmarshal(b, &mode); err != nil {
			return err
		}
		*j = WireJitter(mode != "" && mode != string(JitterNone))
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

// Response is a ToolExecutionResponse. Output holds any JSON object (seed
// 004); its "result" member is what Orloj's peers read, typed as a
// string.
//
// On the wire (its JSON form, which NewHandler, ServeJSON's callers and
// grpctransport.Register write) a result that is not a string — a number,
// object, array, boolean or null — travels as its JSON text, and the
// response's result_encoding member is "json", so a peer that types
// output as {"result": string} decodes every reply:
//
//	"output": {"result": "{\"amount_inr\":4200}"}, "result_encoding": "json"
//
// A string result travels as is, with no result_encoding. Reading (our
// clients, DecodeResponse, UnmarshalJSON) undoes exactly that: a result
// is decoded from its JSON text only when result_encoding says "json", so
// a string result without it stays that string, whatever it holds (an
// Orloj tool's "42" or "{}" is text, as it always was). A result_encoding
// other than "json", or one that does not hold for output.result (not a
// string, or not one JSON value), makes the reply an invalid contract
// response. Other output members are not changed (peers ignore them).
type Response struct {
	ToolContractVersion string         `json:"tool_contract_version,omitempty"`
	RequestID           string         `json:"request_id,omitempty"`
	Status              string         `json:"status,omitempty"`
	Output              map[string]any `json:"output,omitempty"`
	Usage               *AttemptUsage  `json:"usage,omitempty"`
	Trace               *Trace         `json:"trace,omitempty"`
	Error               *Failure       `json:"error,omitempty"`
}

// resultEncodingJSON is the result_encoding of a response whose
// output.result is the JSON text of a value that is not a string.
const resultEncodingJSON = "json"

// plainResponse is a Response without its JSON methods: its members as
// they are. A response whose result needs no rewriting is written as one.
type plainResponse Response

// wireResponse is a Response as it travels when its result is rewritten
// (see Response): its members, and result_encoding.
type wireResponse struct {
	ToolContractVersion string         `json:"tool_contract_version,omitempty"`
	RequestID           string         `json:"request_id,omitempty"`
	Status              string         `json:"status,omitempty"`
	Output              map[string]any `json:"output,omitempty"`
	ResultEncoding      string         `json:"result_encoding,omitempty"`
	Usage               *AttemptUsage  `json:"usage,omitempty"`
	Trace               *Trace         `json:"trace,omitempty"`
	Error               *Failure       `json:"error,omitempty"`
}

// responseDecoded is one allocation holding a response document as read
// (wire, flat: encoding/json decodes a flat struct without the extra
// allocation an embedded one costs) and the Response made of it.
type responseDecoded struct {
	wire wireResponse
	resp Response
}

// decodeWire reads a response document in either form (see Response):
// readReply's fast reading when it accepts the document, else, with
// strict, wire.Strict and foldedTwice (whose errors are returned as is)
// and encoding/json.
// A caller that passes strict false checked the document itself (or
// wants encoding/json's reading of it). Other errors match ErrContract.
func decodeWire(data []byte, strict bool) (*Response, error) {
	d := new(responseDecoded)
	if !readReply(data, &d.wire) {
		d.wire = wireResponse{}
		if strict {
			if err := wire.Strict(data); err != nil {
				return nil, err
			}
			if err := foldedTwice(data); err != nil {
				return nil, err
			}
		}
		if err := json.Unmarshal(data, &d.wire); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrContract, jsonProblem(err))
		}
	}
	w := &d.wire
	d.resp = Response{ToolContractVersion: w.ToolContractVersion, RequestID: w.RequestID, Status: w.Status, Output: w.Output,
		Usage: w.Usage, Trace: w.Trace, Error: w.Error}
	if err := d.resp.decodeResult(w.ResultEncoding); err != nil {
		return nil, err
	}
	return &d.resp, nil
}

// replyFields are the member names of the objects of a response document
// encoding/json decodes into structs, matching each name to a member
// case-insensitively: the document itself, and its usage, trace and error.
var replyFields = []struct {
	object string
	names  []string
}{
	{"", []string{"tool_contract_version", "request_id", "status", "output", "result_encoding", "usage", "trace", "error"}},
	{"usage", []string{"duration_ms", "attempt"}},
	{"trace", []string{"trace_id", "span_id"}},
	{"error", []string{"code", "reason", "retryable", "message", "details"}},
}

// foldedTwice refuses a response document (one wire.Strict accepts)
// that names a member twice under spellings encoding/json reads as one
// ("status" and "Status", "ſtatus"; it matches names with Unicode simple
// folding, strings.EqualFold's, and keeps the last value, where a reader
// matching names exactly keeps the other): which value the tool meant
// cannot be known, as for a duplicated member. The error is a
// *wire.StrictError naming the member by its own name, never a spelling
// of the document's.
func foldedTwice(data []byte) error {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return nil // not an object: encoding/json says what it is
	}
	for _, f := range replyFields {
		obj := top
		if f.object != "" {
			// The object's one spelling (two were refused with the
			// document's members, which come first).
			obj = nil
			for name, raw := range top {
				if strings.EqualFold(name, f.object) {
					_ = json.Unmarshal(raw, &obj) // null or not an object: nil
				}
			}
		}
		for _, want := range f.names {
			n := 0
			for name := range obj {
				if strings.EqualFold(name, want) {
					n++
				}
			}
			if n > 1 {
				path := want
				if f.object != "" {
					path = f.object + "." + want
				}
				return &wire.StrictError{Problems: []wire.Problem{{Path: path,
					Message: "member name appears more than once in the object under spellings encoding/json reads as one (names compared case-insensitively); duplicate members are refused"}}}
			}
		}
	}
	return nil
}

// decodeInto reads a response document into r, in either form (see
// Response); with strict, the document is checked first (wire.Strict's
// error is returned as is). Other errors match ErrContract.
func decodeInto(data []byte, r *Response, strict bool) error {
	resp, err := decodeWire(data, strict)
	if err != nil {
		return err
	}
	*r = *resp
	return nil
}

// MarshalJSON writes the response in its wire form (see Response): a
// result that is not a string as its JSON text, marked by result_encoding
// "json". It fails when the result has no JSON form.
func (r Response) MarshalJSON() ([]byte, error) {
	v, err := r.wireValue()
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// UnmarshalJSON reads a response in either form (see Response).
func (r *Response) UnmarshalJSON(data []byte) error { return decodeInto(data, r, false) }

// wireValue is what encodes as r's wire form: r itself, without its JSON
// methods, when its result is absent or a string (no copy is made), else
// its wireResponse.
func (r *Response) wireValue() (any, error) {
	v, ok := r.Output["result"]
	if !ok {
		return (*plainResponse)(r), nil
	}
	if _, ok := v.(string); ok {
		return (*plainResponse)(r), nil
	}
	w, err := r.wire(v)
	if err != nil {
		return nil, err
	}
	return &w, nil
}

// wire is the wire form of r, whose result v is not a Go string: the
// output map is copied with the result rewritten; r is never changed.
func (r *Response) wire(v any) (wireResponse, error) {
	w := wireResponse{ToolContractVersion: r.ToolContractVersion, RequestID: r.RequestID, Status: r.Status,
		Usage: r.Usage, Trace: r.Trace, Error: r.Error}
	text, isString, err := resultText(v)
	if err != nil {
		return w, fmt.Errorf("output.result has no JSON form: %w", err)
	}
	w.Output = maps.Clone(r.Output)
	w.Output["result"] = text
	if !isString {
		w.ResultEncoding = resultEncodingJSON
	}
	return w, nil
}

// resultText is the wire text of a result that is not a Go string: its
// JSON text (HTML characters unescaped), or, for a value whose JSON form
// is a string (a named string type, a time), that string itself, which
// travels as a plain string result.
func resultText(v any) (text string, isString bool, err error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", false, err
	}
	raw := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, err
		}
		return s, true, nil
	}
	return string(raw), false, nil
}

// decodeResult decodes, in place, a result that encoding (a response's
// result_encoding) says is JSON text (see Response). Errors match
// ErrContract and never quote the result.
func (r *Response) decodeResult(encoding string) error {
	if encoding == "" {
		return nil
	}
	if enc := strings.ToLower(strings.TrimSpace(encoding)); enc != resultEncodingJSON {
		return fmt.Errorf("%w: result_encoding %q is not %s", ErrContract, clip(encoding), resultEncodingJSON)
	}
	text, ok := r.Output["result"].(string)
	if !ok {
		return fmt.Errorf("%w: result_encoding %s needs output.result to be a string", ErrContract, resultEncodingJSON)
	}
	v, err := decodeValue([]byte(text))
	if err != nil {
		return fmt.Errorf("%w: output.result is not the JSON text result_encoding says it is: %s", ErrContract, err)
	}
	r.Output["result"] = v // the output was decoded for r: nobody else holds it
	return nil
}

// decodeValue decodes one JSON value, strictly (no duplicated member,
// valid UTF-8, nothing after it). The error names the problem, never the
// text.
func decodeValue(b []byte) (any, error) {
	if err := wire.Strict(b); err != nil {
		return nil, errors.New(strictProblem(err))
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, errors.New(jsonProblem(err))
	}
	return v, nil
}

// AttemptUsage is a response's "usage" member: what one attempt of a tool
// call took, its duration and its number. It is not a run's budget usage
// (runcontext) nor a model's token usage.
type AttemptUsage struct {
	DurationMS int64 `json:"duration_ms,omitempty"`
	Attempt    int   `json:"attempt,omitempty"`
}

// Failure is a response's error: the canonical code and reason, whether it
// is retryable, a safe message, and details. Details may hold any JSON
// when read (seed 004 writes {"timeout_ms": 15000}, Orloj writes strings
// only); on the wire every value is written as a string — a string as is,
// a number or boolean as its JSON text, an object or array as compact
// JSON, null left out — so peers that type details as string → string
// decode what we write. Retryable and details are always written (nil or
// empty details as {}).
type Failure struct {
	Code      string         `json:"code,omitempty"`
	Reason    string         `json:"reason,omitempty"`
	Retryable bool           `json:"retryable"`
	Message   string         `json:"message,omitempty"`
	Details   map[string]any `json:"details"`
}

// MarshalJSON writes the failure with its details as a JSON object of
// strings, keys sorted.
func (f Failure) MarshalJSON() ([]byte, error) {
	details := make(map[string]string, len(f.Details))
	for k, v := range f.Details {
		if s, ok := detailString(v); ok {
			details[k] = s
		}
	}
	return json.Marshal(struct {
		Code      string            `json:"code,omitempty"`
		Reason    string            `json:"reason,omitempty"`
		Retryable bool              `json:"retryable"`
		Message   string            `json:"message,omitempty"`
		Details   map[string]string `json:"details"`
	}{f.Code, f.Reason, f.Retryable, f.Message, details})
}

// detailString is the wire form of a detail value (see Failure); false
// for null, which is left out.
func detailString(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32), true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v), true
	}
	return string(b), true
}

// Capability labels (seed 004).
var capabilityLabels = []string{"data.read", "data.write", "network.read", "network.write",
	"filesystem.read", "filesystem.write", "exec.command", "external.side_effect"}

// riskLevels are the four risk levels, lowest first.
var riskLevels = []string{"low", "medium", "high", "critical"}

// normalize applies the contract's normalisation to a request in place and
// reports the first refusal: an empty version becomes v1 (an unknown
// version is invalid_input, not retryable); request_id and tool.name are
// required; operation defaults to invoke; capability labels and auth
// scopes are trimmed, lower-cased and de-duplicated in order; risk level
// and auth profile are lower-cased; attempt is at least 1.
func normalize(r *Request) *gateway.ToolError {
	if te := checkVersion(r.ToolContractVersion); te != nil {
		return te
	}
	r.ToolContractVersion = ContractVersion
	if r.RequestID = strings.TrimSpace(r.RequestID); r.RequestID == "" {
		return newError(gateway.CodeInvalidInput, false, "request_id is required", map[string]any{"field": "request_id"})
	}
	if r.Tool.Name = strings.TrimSpace(r.Tool.Name); r.Tool.Name == "" {
		return newError(gateway.CodeInvalidInput, false, "tool.name is required", map[string]any{"field": "tool.name"})
	}
	r.Tool.Operation = strings.ToLower(strings.TrimSpace(r.Tool.Operation))
	if r.Tool.Operation == "" {
		r.Tool.Operation = defaultOperation
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

// checkVersion refuses a tool_contract_version other than v1 (an empty
// one is v1; case and surrounding space do not matter): a non-retryable
// invalid_input naming the field and the expected version. Requests and
// responses alike: an unknown major version is never read as v1.
func checkVersion(v string) *gateway.ToolError {
	if v == ContractVersion || v == "" {
		return nil // as written: nothing to trim or lower-case
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", ContractVersion:
		return nil
	}
	return newError(gateway.CodeInvalidInput, false, fmt.Sprintf("unsupported tool_contract_version %q", clip(v)),
		map[string]any{"field": "tool_contract_version", "expected": ContractVersion})
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

// decodeRequest decodes and normalises a request from a tool caller. It
// accepts seed 004's any-JSON input and Orloj's flat string map alike, and
// a request whose arguments are only in input_raw (as Orloj's clients send
// them) has them decoded into Input (see decodeInput). With a refusal it
// returns what could be read of the request (its request id, trace and
// attempt are echoed in the refusal).
func decodeRequest(data []byte) (*Request, *gateway.ToolError) {
	var r Request
	if err := wire.Strict(data); err != nil {
		return &r, newError(gateway.CodeInvalidInput, false, "the request is not a Tool Contract v1 envelope: "+strictProblem(err), map[string]any{"field": "(request)"})
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return &r, newError(gateway.CodeInvalidInput, false, "the request is not a Tool Contract v1 envelope: "+jsonProblem(err), map[string]any{"field": "(request)"})
	}
	if e := normalize(&r); e != nil {
		return &r, e
	}
	if e := decodeInput(&r); e != nil {
		return &r, e
	}
	return &r, nil
}

// decodeInput is the server side of input_raw, which wins over input when
// a request carries it. Input_raw that opens a JSON object or array ('{' or
// '[' after white space) must be one JSON object, decoded strictly (no
// duplicated member, valid UTF-8, nothing after it) into Input, which an
// executor then reads; anything else of that shape is a non-retryable
// invalid_input naming the field, never echoing the text. Any other
// input_raw is opaque text, as upstream clients send it ("tool=<tool>
// payload"): Input is then empty, and the executor reads InputRaw, which is
// always kept.
func decodeInput(r *Request) *gateway.ToolError {
	if r.InputRaw == "" {
		return nil
	}
	if raw := strings.TrimLeft(r.InputRaw, " \t\r\n"); raw == "" || (raw[0] != '{' && raw[0] != '[') {
		r.Input = map[string]any{}
		return nil
	}
	var in map[string]any
	if err := decodeObject([]byte(r.InputRaw), &in); err != nil {
		problem := "it is not one JSON object"
		var se *wire.StrictError
		if errors.As(err, &se) {
			problem = strictProblem(err)
		}
		return newError(gateway.CodeInvalidInput, false, "input_raw must be a JSON object: "+problem, map[string]any{"field": "input_raw"})
	}
	if in == nil {
		in = map[string]any{}
	}
	r.Input = in
	return nil
}

// DecodeResponse decodes a tool's contract response. It accepts seed
// 004's forms (output and details hold any JSON) and Orloj's (output with
// only a result string, string details), and decodes a result that
// result_encoding "json" says is JSON text (see Response). A body that is not a JSON
// object, that wire.Strict refuses or that names a member twice under
// spellings encoding/json reads as one (foldedTwice), or has no status,
// is an invalid contract response (ErrContract);
// one with another major tool_contract_version is also ErrContractVersion.
func DecodeResponse(data []byte) (*Response, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, fmt.Errorf("%w: the body is not a JSON object", ErrContract)
	}
	r, err := decodeWire(data, true)
	if errors.Is(err, wire.ErrStrict) {
		return nil, fmt.Errorf("%w: %s", ErrContract, strictProblem(err))
	}
	if err != nil {
		return nil, err
	}
	switch r.Status {
	case StatusOK, StatusError, StatusDenied: // as written: nothing to trim or lower-case
	default:
		r.Status = strings.ToLower(strings.TrimSpace(r.Status))
	}
	switch r.Status {
	case StatusOK, StatusError, StatusDenied:
	case "":
		return nil, fmt.Errorf("%w: status is missing", ErrContract)
	default:
		return nil, fmt.Errorf("%w: status %q is not ok, error or denied", ErrContract, clip(r.Status))
	}
	if checkVersion(r.ToolContractVersion) != nil {
		return nil, fmt.Errorf("%w: %w %q", ErrContract, ErrContractVersion, clip(r.ToolContractVersion))
	}
	return r, nil
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

// err turns a response into nil (ok) or the *Error it reports. A failed
// response without an error envelope is a non-retryable backend failure.
func (r *Response) err() *gateway.ToolError {
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
			e.Details["tool_code"] = clipFolded(r.Error.Code)
		}
		e.Code = gateway.CodeExecutionFailed
	}
	if want := gateway.ReasonFor(e.Code); e.Reason != want {
		if e.Reason != "" {
			e.Details["tool_reason"] = clipFolded(r.Error.Reason)
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

// outputValue is the output an ok response carries: the output object, or
// {"result": s} for Orloj's string result (already that shape).
func (r *Response) outputValue() map[string]any {
	if r.Output == nil {
		return map[string]any{}
	}
	return r.Output
}

// clip bounds text from a peer or a configuration for a message: valid
// UTF-8, a credential or personal data in it redacted, at most maxClip
// bytes cut at a rune boundary (clipRunes), an ellipsis marking a cut.
// The redaction comes first: a key cut short is a prefix no detector
// knows, which the gateway's rules would then pass.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if r, changed := sensitive.Redact(s, clipKinds); changed {
		s = r
	}
	return problem.ClipN(s, maxClip)
}

// clipFolded is clip of a tool's code or reason, which the taxonomy
// reads lower-cased: lower-cased, unless it holds a credential, which is
// looked for in the tool's own spelling (a key lower-cased is one no
// detector knows) and redacted.
func clipFolded(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if r, changed := sensitive.Redact(s, clipKinds); changed {
		return problem.ClipN(r, maxClip)
	}
	return problem.ClipN(strings.ToLower(s), maxClip)
}

// clipKinds are what clip redacts: every kind a built-in rule redacts.
// The personal data too: a pack's rule (pan, iban, email, ...) runs on
// what clip leaves, and an IBAN or address cut short, or a PAN
// lower-cased, is one it no longer finds.
var clipKinds = sensitive.All

// maxClip bounds a name or code quoted in a message, in bytes.
const maxClip = 64
