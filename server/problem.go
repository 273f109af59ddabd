package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/contextos/contextos/internal/problem"
)

// Sentinel errors.
var (
	// ErrConfig reports invalid handler or authenticator options.
	ErrConfig = errors.New("server: invalid configuration")
)

// Problem codes: the last segment of a problem's type
// ("urn:contextos:problem:CODE") and its "code" member.
const (
	CodeInvalidRequest   = "invalid_request"
	CodeBodyTooLarge     = "body_too_large"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeUnauthenticated  = "unauthenticated"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeAlreadyDecided   = "already_decided"
	CodeNotPending       = "not_pending"
	CodeApprovalExpired  = "approval_expired"
	CodeRunConflict      = "run_conflict"
	CodeBusy             = "busy"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
)

// Rules a 403 names (its "rule" member).
const (
	RuleTenant        = "tenant"
	RuleInvokeRole    = "invoke_role"
	RuleApproverRole  = "approver_role"
	RuleSelfApproval  = "self_approval"
	RuleLoopbackOnly  = "insecure_dev_loopback"
	RuleCrossOrigin   = "cross_origin"
	RuleNoAuthConfig  = "no_authenticator"
	RuleTokenRequired = "bearer_token"
)

// FieldError is one problem with a request member: its path (a dotted
// JSON path, "request.input.intent"), a code and a message.
type FieldError struct {
	Path    string `json:"path"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// apiError is an answer the handler gives as application/problem+json
// (RFC 9457): the status, a code, a safe detail, and what names the
// field or the rule.
type apiError struct {
	Status int
	Code   string
	Detail string
	// Rule is the rule a 403 (or a 401 without authenticator) names.
	Rule string
	// Fields are the request members at fault (400).
	Fields []FieldError
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Detail) }

func errorf(status int, code, format string, a ...any) *apiError {
	return &apiError{Status: status, Code: code, Detail: fmt.Sprintf(format, a...)}
}

func forbidden(rule, format string, a ...any) *apiError {
	e := errorf(http.StatusForbidden, CodeForbidden, format, a...)
	e.Rule = rule
	return e
}

func invalid(fields ...FieldError) *apiError {
	e := &apiError{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Detail: "the request is invalid", Fields: fields}
	if len(fields) == 1 {
		e.Detail = fieldText(fields[0])
	}
	return e
}

func fieldText(f FieldError) string {
	if f.Path == "" {
		return f.Message
	}
	return f.Path + ": " + f.Message
}

// problemJSON is the wire form of an apiError.
type problemJSON struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail"`
	Code   string       `json:"code"`
	Rule   string       `json:"rule,omitempty"`
	Errors []FieldError `json:"errors,omitempty"`
}

// writeProblem answers e as application/problem+json.
func writeProblem(w http.ResponseWriter, e *apiError) {
	p := problemJSON{Type: "urn:contextos:problem:" + e.Code, Title: http.StatusText(e.Status), Status: e.Status, Detail: e.Detail, Code: e.Code, Rule: e.Rule, Errors: e.Fields}
	b, err := json.Marshal(p)
	if err != nil {
		b = []byte(`{"type":"urn:contextos:problem:internal","status":500,"code":"internal"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if e.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
	w.WriteHeader(e.Status)
	w.Write(append(b, '\n'))
}

// fieldsOf turns a validation error of the module (runcontext and the
// others share problem.ValidationError) into field errors under prefix.
func fieldsOf(prefix string, err error) ([]FieldError, bool) {
	var ve *problem.ValidationError
	if !errors.As(err, &ve) {
		return nil, false
	}
	out := make([]FieldError, 0, len(ve.Problems))
	for _, p := range ve.Problems {
		path := prefix
		if p.Path != "" {
			path = prefix + "." + p.Path
			if p.Path[0] == '[' {
				path = prefix + p.Path
			}
		}
		out = append(out, FieldError{Path: path, Code: string(p.Code), Message: p.Message})
	}
	return out, true
}

// clip bounds a caller's value quoted in a message.
func clip(s string) string { return problem.Clip(s) }

// clipMsg bounds a message that may quote a caller's input.
func clipMsg(s string) string { return problem.ClipN(s, 300) }
