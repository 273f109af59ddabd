package compiler

import (
	"errors"
	"fmt"
)

// Sentinel errors, one per way a compile is refused.
var (
	ErrInput    = errors.New("compiler: invalid input")
	ErrMerge    = errors.New("compiler: packs do not merge")
	ErrTenant   = errors.New("compiler: pack belongs to another tenant")
	ErrOntology = errors.New("compiler: ontology version not declared by the host")
	ErrIntent   = errors.New("compiler: intent not served by the pack")
	ErrPolicy   = errors.New("compiler: policy evaluation failed")
	ErrEvidence = errors.New("compiler: evidence or memory source failed")
	// ErrBudget reports a compile refused because caller text does not fit
	// its bucket (the user message and the session bucket); the error
	// wraps a *runcontext.BudgetError naming the bucket.
	ErrBudget = errors.New("compiler: over a token budget")
)

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
