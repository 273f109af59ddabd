package agent

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// The five kinds of *Error, for errors.Is.
var (
	// ErrUnknownBackend: no backend is registered for the kind.
	ErrUnknownBackend = errors.New("agent: unknown backend")
	// ErrUnsupportedCapability: the backend does not advertise a
	// capability the request needs (an extension key, explicit cancel).
	ErrUnsupportedCapability = errors.New("agent: unsupported capability")
	// ErrInvalidAgentKind: a kind breaks the naming rule.
	ErrInvalidAgentKind = errors.New("agent: invalid agent kind")
	// ErrInvalidRequest: the request (or a registration) is invalid.
	ErrInvalidRequest = errors.New("agent: invalid request")
	// ErrBackend: the backend failed after the request was accepted:
	// spawn failure, a runtime refusal, a session not found, a timeout,
	// cancellation.
	ErrBackend = errors.New("agent: backend error")
)

// ErrCancelled is matched (errors.Is) by the completion error of a
// cancelled run, whose message is the contract's "cancelled".
var ErrCancelled = errors.New("agent: cancelled")

// Error is the contract's one error type. Its message is one of the
// contract's five exact forms and is safe by construction: it never
// carries raw backend output or a value from the request, only the kind,
// a capability id and a fixed rule text. Match the kind with errors.Is
// against ErrUnknownBackend, ErrUnsupportedCapability,
// ErrInvalidAgentKind, ErrInvalidRequest or ErrBackend; the cause (such as
// context.DeadlineExceeded or an *exec.Error) is kept for errors.Is and
// errors.As but never printed.
type Error struct {
	kind error
	// AgentKind is the backend kind the error is about ("" when none).
	AgentKind string
	// Capability is the unsupported capability id (UnsupportedCapability).
	Capability string
	// Message is the safe detail after the kind's prefix.
	Message string
	cause   []error
}

// Error returns "unknown backend: <kind>", "unsupported capability for
// <kind>: <capability>", "invalid agent kind: …", "invalid request: …" or
// "backend error: …".
//
// Whatever a backend put in Message, the text passes the secret redactor
// (see Redacted).
func (e *Error) Error() string { return redactText(e.text()) }

func (e *Error) text() string {
	switch e.kind {
	case ErrUnknownBackend:
		return "unknown backend: " + e.AgentKind
	case ErrUnsupportedCapability:
		return "unsupported capability for " + e.AgentKind + ": " + e.Capability
	case ErrInvalidAgentKind:
		return "invalid agent kind: " + e.Message
	case ErrInvalidRequest:
		return "invalid request: " + e.Message
	default:
		return "backend error: " + e.Message
	}
}

// Is reports whether target is the error's kind.
func (e *Error) Is(target error) bool { return target == e.kind }

// Unwrap returns the causes kept for errors.Is and errors.As.
func (e *Error) Unwrap() []error { return e.cause }

// safeID returns s when it is a printable identifier of at most 128 bytes
// (a kind or a capability id that passed syntax checks), else a
// placeholder: nothing a caller sent that breaks the rules is echoed.
func safeID(s string) string {
	if s == "" || len(s) > 128 || !utf8.ValidString(s) {
		return "<invalid>"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return "<invalid>"
		}
	}
	return s
}

func unknownBackend(kind string) *Error {
	return &Error{kind: ErrUnknownBackend, AgentKind: safeID(kind)}
}

func unsupported(kind Kind, capability string) *Error {
	return &Error{kind: ErrUnsupportedCapability, AgentKind: safeID(string(kind)), Capability: safeID(capability)}
}

func invalidKind(msg string) *Error { return &Error{kind: ErrInvalidAgentKind, Message: msg} }

// InvalidRequest returns an *Error of kind ErrInvalidRequest. msg must be
// a fixed rule text (it is printed as is): never put a request value in it.
func InvalidRequest(msg string) *Error { return &Error{kind: ErrInvalidRequest, Message: msg} }

// BackendError returns an *Error of kind ErrBackend with the safe message
// msg, keeping causes for errors.Is/As only. msg must be a fixed text or
// one built from numbers and ids the backend controls, never raw output.
func BackendError(msg string, causes ...error) *Error {
	return &Error{kind: ErrBackend, Message: msg, cause: nonNil(causes)}
}

func nonNil(errs []error) []error {
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// cancelledError is the completion error of a cancelled run.
func cancelledError(cause error) *Error {
	return &Error{kind: ErrBackend, Message: "cancelled", cause: nonNil([]error{ErrCancelled, cause})}
}

// clipSafe bounds a safe message for an event or an error.
func clipSafe(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return truncate(s, MaxMessageBytes)
}
