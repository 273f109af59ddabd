package compiler

import (
	"errors"
	"fmt"
	"strings"

	"github.com/contextos/contextos/internal/ontology"
	"github.com/contextos/contextos/pack"
)

// Sentinel errors, one per way a compile is refused.
var (
	ErrInput  = errors.New("compiler: invalid input")
	ErrMerge  = errors.New("compiler: packs do not merge")
	ErrTenant = errors.New("compiler: pack belongs to another tenant")
	// ErrIncompatible reports a pack whose contract_meta.compatibility
	// .requires the host (Options.Host) does not satisfy; it is
	// pack.ErrIncompatible, and the error wraps the pack's refusal.
	ErrIncompatible = pack.ErrIncompatible
	ErrOntology     = ontology.ErrOntology
	// ErrConflict reports a request and run context that disagree on
	// tenant, session, trace, intent, locale, user or agent; the error
	// wraps the *runcontext.ValidationError naming each member (and
	// matches runcontext.ErrConflict).
	ErrConflict = errors.New("compiler: request and run context disagree")
	ErrIntent   = errors.New("compiler: intent not served by the pack")
	ErrPolicy   = errors.New("compiler: policy evaluation failed")
	ErrEvidence = errors.New("compiler: evidence or memory source failed")
	// ErrBudget reports a compile refused because caller text does not fit
	// its bucket (the user message and the session bucket); the error
	// wraps a *runcontext.BudgetError naming the bucket.
	ErrBudget = errors.New("compiler: over a token budget")
	// ErrOverlayVersion reports a run of a pack version that has no
	// environment overlay while Options.Overlays holds one for another
	// version of the same pack: the environment's rules would silently
	// not apply. The error is an *OverlayVersionError (and an *Error of
	// stage 3 matching ErrInput).
	ErrOverlayVersion = errors.New("compiler: no environment overlay for this pack version")
)

// OverlayVersionError is ErrOverlayVersion's detail: the pack id, the
// version the run asked for, and the versions the overlays are for.
type OverlayVersionError struct {
	PackID          string
	Version         string
	OverlayVersions []string
}

func (e *OverlayVersionError) Error() string {
	return fmt.Sprintf("%v: the run uses %s@%s, the environment overlays are for version(s) %s of %s (declare an overlay for %s@%s)",
		ErrOverlayVersion, e.PackID, e.Version, strings.Join(e.OverlayVersions, ", "), e.PackID, e.PackID, e.Version)
}

// Is matches ErrOverlayVersion.
func (e *OverlayVersionError) Is(target error) bool { return target == ErrOverlayVersion }

// Error is a refused compile: the stage (1–9, seed 003's resolution
// order) that refused it and why. It matches its sentinel and wraps its
// cause.
type Error struct {
	Stage   int
	Kind    error // one of the sentinels
	Message string
	Err     error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%v (stage %d): %s", e.Kind, e.Stage, e.Message)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is matches the error's sentinel.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func fail(stage int, kind error, err error, format string, args ...any) *Error {
	return &Error{Stage: stage, Kind: kind, Message: fmt.Sprintf(format, args...), Err: err}
}
