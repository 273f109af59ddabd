package pack

import (
	"errors"
	"fmt"
	"strings"

	"github.com/contextos/contextos/internal/problem"
)

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrUnpinnedRef reports a ref that is not pack_id@MAJOR.MINOR.PATCH.
	ErrUnpinnedRef = errors.New("pack: ref is not pinned")
	// ErrInvalid reports a pack that fails decoding or a validation gate;
	// the error is a *ValidationError.
	ErrInvalid = errors.New("pack: invalid")
	// ErrSignature reports a signed pack whose signature is missing,
	// malformed or wrong, or whose content changed after signing.
	ErrSignature = errors.New("pack: signature verification failed")
	// ErrIncompatible reports a pack whose compatibility.requires the host
	// does not satisfy.
	ErrIncompatible = errors.New("pack: incompatible with host")
	// ErrNotFound reports a ref the registry does not hold.
	ErrNotFound = errors.New("pack: not found")
	// ErrImmutable reports an attempt to store different content under an
	// existing pack_id@version.
	ErrImmutable = errors.New("pack: pack_id@version is immutable")
	// ErrTransition reports a lifecycle transition that is not allowed.
	ErrTransition = errors.New("pack: lifecycle transition not allowed")
	// ErrNotUsable reports a pack whose lifecycle state forbids the
	// requested use (a draft for execution, a revoked pack for new traffic).
	// The error is a *StateError.
	ErrNotUsable = errors.New("pack: not usable in its lifecycle state")
	// ErrOverlay reports an overlay that would weaken or expand the base
	// pack; the error is an *OverlayError naming the rule it breaks.
	ErrOverlay = errors.New("pack: overlay refused")
)

// Validation gates, in the order Validate runs them.
const (
	GateSchema      = "schema"
	GateReferential = "referential"
	GatePolicy      = "policy"
	GateRisk        = "risk"
	GateTenancy     = "tenancy"
	GateSecurity    = "security"
	GateEvaluation  = "evaluation"
	// GateReplay is the gate of golden cases: they compile to stable
	// manifests and budget reports and recorded packets replay equal. It
	// is not built in: a host supplies it in ValidateOptions.Gates (package
	// eval's PackGate).
	GateReplay = "replay"
	// GateHost names the problems of a host gate (ValidateOptions.Gates)
	// that panicked or named no known gate.
	GateHost = "host"
)

// CodeGatePanicked is a host gate that panicked: the pack fails it.
const CodeGatePanicked = "gate_panicked"

// Gates returns the validation gates in order.
func Gates() []string {
	return []string{GateSchema, GateReferential, GatePolicy, GateRisk, GateTenancy, GateSecurity, GateEvaluation}
}

// Problem is one validation failure: the gate that found it, a stable
// code for the failure mode, the JSON path of the member at fault and a
// message that never echoes secrets. It is the Problem of every validating
// package (runcontext, decision, schemas).
type Problem = problem.Problem

// Code names a validation failure mode (the Code* constants).
type Code = problem.Code

// ValidationError lists every problem of a pack. It matches ErrInvalid;
// Has(code) and HasAt(code, path) look a problem up.
// It is one type shared by runcontext, pack, decision and schemas, so
// errors.As finds it whichever package refused; errors.Is(err, ErrInvalid)
// tells this package's refusals from the others'.
type ValidationError = problem.ValidationError

// invalid returns the *ValidationError of probs, matching ErrInvalid.
func invalid(probs []Problem) *ValidationError {
	return problem.New(ErrInvalid, "pack: invalid", probs)
}

// StateError reports a pack refused because of its lifecycle state.
type StateError struct {
	Ref    string
	State  State
	Reason string // the revocation or deprecation reason, if any
	Use    Use
}

func (e *StateError) Error() string {
	msg := fmt.Sprintf("pack: %s is %s and cannot be used for %s", e.Ref, e.State, e.Use)
	if e.Reason != "" {
		msg += " (reason: " + e.Reason + ")"
	}
	return msg
}

// Is matches ErrNotUsable.
func (e *StateError) Is(target error) bool { return target == ErrNotUsable }

// OverlayError names the overlay rule an overlay breaks and the path (in
// the overlay, or for OverlayInvalidAfter in the resolved view) at fault.
type OverlayError struct {
	OverlayID string
	Rule      string // e.g. OverlayGrant, OverlayLowerMode
	Path      string
	Message   string
	// Err is the *ValidationError of the resolved view, for
	// OverlayInvalidAfter.
	Err error
}

func (e *OverlayError) Error() string {
	return fmt.Sprintf("pack: overlay %s refused: %s: %s: %s", e.OverlayID, e.Rule, e.Path, e.Message)
}

// Is matches ErrOverlay.
func (e *OverlayError) Is(target error) bool { return target == ErrOverlay }

// Unwrap returns the resolved view's validation error, if any.
func (e *OverlayError) Unwrap() error { return e.Err }

func setEnum[T ~string](dst *T, what string, allowed []T, b []byte) error {
	for _, a := range allowed {
		if string(a) == string(b) {
			*dst = a
			return nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return fmt.Errorf("%s %q is not one of %s", what, clip(string(b)), strings.Join(names, ", "))
}

// clip bounds a value quoted in a problem message, a credential or card
// number in it redacted first (problem.Quote): an error that is not a
// Problem (a key id, a rule name, a pinned ref) is not quieted after.
func clip(s string) string { return problem.Quote(s) }

// quiet is a refusal's message with any credential or card number it
// quotes redacted (problem.Quiet): a key pasted where an id, a name or a
// value belongs is refused by the check that reads that member, whose
// message quotes the member's value (the security gate names the member
// without it).
func quiet(msg string) string { return problem.Quiet(msg) }
