package gateway

import (
	"errors"
	"fmt"
)

// Tool Contract v1 codes (seed 004), plus the auth and approval codes.
const (
	CodeInvalidInput           = "invalid_input"
	CodeUnsupportedTool        = "unsupported_tool"
	CodeRuntimePolicyInvalid   = "runtime_policy_invalid"
	CodeIsolationUnavailable   = "isolation_unavailable"
	CodePermissionDenied       = "permission_denied"
	CodeSecretResolutionFailed = "secret_resolution_failed"
	CodeTimeout                = "timeout"
	CodeCanceled               = "canceled"
	CodeExecutionFailed        = "execution_failed"
	CodeAuthInvalid            = "auth_invalid"
	CodeAuthForbidden          = "auth_forbidden"
	CodeAuthExpired            = "auth_expired"
	CodeApprovalPending        = "approval_pending"
	CodeApprovalDenied         = "approval_denied"
	CodeApprovalTimeout        = "approval_timeout"
)

// ReasonFor returns the Tool Contract v1 reason of a code ("" for unknown
// codes): "tool_" and the code, except tool_unsupported (unsupported_tool),
// tool_execution_timeout (timeout), tool_execution_canceled (canceled) and
// tool_backend_failure (execution_failed).
func ReasonFor(code string) string {
	switch code {
	case CodeInvalidInput:
		return "tool_invalid_input"
	case CodeUnsupportedTool:
		return "tool_unsupported"
	case CodeRuntimePolicyInvalid:
		return "tool_runtime_policy_invalid"
	case CodeIsolationUnavailable:
		return "tool_isolation_unavailable"
	case CodePermissionDenied:
		return "tool_permission_denied"
	case CodeSecretResolutionFailed:
		return "tool_secret_resolution_failed"
	case CodeTimeout:
		return "tool_execution_timeout"
	case CodeCanceled:
		return "tool_execution_canceled"
	case CodeExecutionFailed:
		return "tool_backend_failure"
	case CodeAuthInvalid:
		return "tool_auth_invalid"
	case CodeAuthForbidden:
		return "tool_auth_forbidden"
	case CodeAuthExpired:
		return "tool_auth_expired"
	case CodeApprovalPending:
		return "tool_approval_pending"
	case CodeApprovalDenied:
		return "tool_approval_denied"
	case CodeApprovalTimeout:
		return "tool_approval_timeout"
	}
	return ""
}

// Sentinel errors.
var (
	// ErrNotSurfaced is matched by a ToolError for a capability outside the
	// compiled tool manifest.
	ErrNotSurfaced = errors.New("gateway: capability not surfaced")
	// ErrTool is matched by every *ToolError.
	ErrTool = errors.New("gateway: tool error")
	// ErrTranscript reports a transcript that could not be written; the
	// call's result is returned alongside it and must not be lost.
	ErrTranscript = errors.New("gateway: transcript append failed")
	// ErrConfig reports an invalid registration or option.
	ErrConfig = errors.New("gateway: invalid configuration")
	// ErrApprovalUsed is returned by an ApprovalLog for an approval that was
	// already consumed.
	ErrApprovalUsed = errors.New("gateway: approval already used")
	// ErrAdapterPanic is matched by the error Run.Call returns when the
	// adapter panicked. The call's result (failed, "the adapter panicked")
	// is returned and recorded with it; the panic value and stack go only
	// to the gateway's Logger, at Error level.
	ErrAdapterPanic = errors.New("gateway: adapter panicked")
)

// ToolError is a Tool Contract v1 error: code, reason, retryable, a safe
// message and details. It matches ErrTool, and ErrNotSurfaced for an
// unsurfaced capability. Adapters return it to say whether a failure is
// retryable; any other error is a non-retryable execution failure.
type ToolError struct {
	Code      string         `json:"code"`
	Reason    string         `json:"reason"`
	Retryable bool           `json:"retryable"`
	Message   string         `json:"message"`
	Details   map[string]any `json:"details"`
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("gateway: %s (%s): %s", e.Code, e.Reason, e.Message)
}

// Is matches ErrTool, and ErrNotSurfaced for unsupported_tool.
func (e *ToolError) Is(target error) bool {
	return target == ErrTool || target == ErrNotSurfaced && e.Code == CodeUnsupportedTool
}

// NewToolError returns a ToolError with the canonical reason of code.
func NewToolError(code string, retryable bool, message string, details map[string]any) *ToolError {
	if details == nil {
		details = map[string]any{}
	}
	return &ToolError{Code: code, Reason: ReasonFor(code), Retryable: retryable, Message: message, Details: details}
}
