package transport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/internal/sensitive"
)

// Sentinel errors.
var (
	// ErrContract reports a tool reply that is not a valid Tool Contract v1
	// response.
	ErrContract = errors.New("transport: invalid contract response")
	// ErrContractVersion reports a tool reply with a tool_contract_version
	// other than v1 (with ErrContract). Transports refuse it as a
	// non-retryable invalid_input.
	ErrContractVersion = errors.New("unsupported tool_contract_version")
	// ErrConfig reports an invalid endpoint, auth or retry configuration.
	ErrConfig = errors.New("transport: invalid configuration")
	// ErrSecretNotFound is returned by a SecretResolver for an unknown
	// secret.
	ErrSecretNotFound = errors.New("transport: secret not found")
	// ErrReservedHeader reports an api_key_header auth profile whose
	// header_name is a header HTTP or the transports own (with ErrConfig,
	// in a *ConfigError naming auth.header_name).
	ErrReservedHeader = errors.New("reserved header")
)

// ConfigError is a configuration refusal that names the member it is
// about. It matches ErrConfig, and Rule when set (errors.Is).
type ConfigError struct {
	// Field is the refused member, as the endpoints file spells it:
	// "auth.header_name", "tools.web_search.name".
	Field string
	// Problem says what is wrong with it; it never quotes a secret.
	Problem string
	// Rule is the sentinel of the rule refused (ErrReservedHeader), or
	// nil.
	Rule error
}

func (e *ConfigError) Error() string { return ErrConfig.Error() + ": " + e.Field + " " + e.Problem }

// Unwrap returns ErrConfig and Rule.
func (e *ConfigError) Unwrap() []error {
	if e.Rule == nil {
		return []error{ErrConfig}
	}
	return []error{ErrConfig, e.Rule}
}

// newError is gateway.NewToolError: the transport's errors are the
// gateway's ToolErrors, so they reach results unchanged.
func newError(code string, retryable bool, msg string, details map[string]any) *gateway.ToolError {
	return gateway.NewToolError(code, retryable, msg, details)
}

func isApproval(code string) bool {
	return code == gateway.CodeApprovalPending || code == gateway.CodeApprovalDenied || code == gateway.CodeApprovalTimeout
}

// httpStatusError maps an HTTP error status (≥ 400) to a ToolError:
// 401 auth_invalid, 403 auth_forbidden (neither retryable), 429 and 5xx
// retryable execution failures, other 4xx non-retryable ones. The message
// carries up to 400 characters of the redacted body.
func httpStatusError(status int, body []byte, details map[string]any) *gateway.ToolError {
	d := map[string]any{"http_status": status}
	for k, v := range details {
		d[k] = v
	}
	snippet := clipRunes(redact(strings.TrimSpace(string(body))), 400)
	msg := fmt.Sprintf("tool endpoint answered HTTP %d", status)
	if snippet != "" {
		msg += ": " + snippet
	}
	switch {
	case status == http.StatusUnauthorized:
		return newError(gateway.CodeAuthInvalid, false, msg, d)
	case status == http.StatusForbidden:
		return newError(gateway.CodeAuthForbidden, false, msg, d)
	case status == http.StatusTooManyRequests || status >= 500:
		return newError(gateway.CodeExecutionFailed, true, msg, d)
	}
	return newError(gateway.CodeExecutionFailed, false, msg, d)
}

// clipRunes cuts s to at most n bytes without splitting a UTF-8
// sequence, and replaces invalid UTF-8 (a tool's bytes become text).
func clipRunes(s string, n int) string { return problem.Cut(strings.ToValidUTF8(s, "\uFFFD"), n) }

// transportError maps an error from making a request: the context's
// deadline is timeout (retryable), its cancellation canceled (not), and
// anything else a retryable execution failure. The message never carries
// the error text (it can hold a URL with credentials).
func transportError(ctx context.Context, err error, details map[string]any) *gateway.ToolError {
	switch {
	case errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, context.Canceled) && ctx.Err() == nil:
		return newError(gateway.CodeCanceled, false, "the call was canceled", details)
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return newError(gateway.CodeTimeout, true, "the tool did not answer before the attempt's deadline", details)
	}
	return newError(gateway.CodeExecutionFailed, true, "the tool endpoint could not be reached", details)
}

// redact replaces the secrets and personal data in s with [REDACTED]:
// everything in the catalogue of sensitive data (internal/sensitive) —
// bearer and basic credentials, API keys and tokens, private keys,
// secret=, password=, token= values (also in JSON), credentials in URLs,
// base64-wrapped secrets, card numbers however written, IBANs, email
// addresses, phone numbers, SSNs and PANs. Tool replies pass through it
// before they reach an error message. It is deterministic and idempotent.
func redact(s string) string {
	out, _ := sensitive.Redact(s, sensitive.All)
	return out
}

// causeError is a ToolError that also wraps the cause of the context that
// ended its call (context.Canceled, context.DeadlineExceeded or the
// caller's own cause). Its text is the ToolError's.
type causeError struct {
	te     *gateway.ToolError
	causes []error // ctx.Err(), and context.Cause(ctx) when it differs
}

func (e *causeError) Error() string   { return e.te.Error() }
func (e *causeError) Unwrap() []error { return append([]error{e.te}, e.causes...) }

// withCause wraps ctx's cause into te when te reports that ctx ended the
// call (timeout or canceled while ctx is done); otherwise it returns te.
func withCause(ctx context.Context, te *gateway.ToolError) error {
	if ctx.Err() == nil || te.Code != gateway.CodeCanceled && te.Code != gateway.CodeTimeout {
		return te
	}
	causes := []error{ctx.Err()}
	if c := context.Cause(ctx); c != nil && c != ctx.Err() {
		causes = append(causes, c)
	}
	return &causeError{te: te, causes: causes}
}
