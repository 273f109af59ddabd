package runcontext

import (
	"errors"
	"strings"
)

// Sentinel errors. Every error this package returns matches one of them with
// errors.Is.
var (
	// ErrInvalid reports a request or run context that failed validation;
	// the error is a *ValidationError listing every problem.
	ErrInvalid = errors.New("runcontext: invalid")
	// ErrConflict reports a host RunContext that disagrees with the request
	// (tenant, session, trace, user, agent or intent). It comes inside a
	// *ValidationError, so errors.Is(err, ErrInvalid) holds too.
	ErrConflict = errors.New("runcontext: request and run context conflict")
	// ErrInvalidEnum reports an unknown enum value (approval mode, mode, …).
	ErrInvalidEnum = errors.New("runcontext: unknown enum value")
	// ErrBudgetExceeded reports a charge that would exceed the run budget;
	// the error is a *BudgetError naming the dimension.
	ErrBudgetExceeded = errors.New("runcontext: run budget exceeded")
	// ErrClaim reports an identity claim that failed verification; the
	// error is a *ClaimError naming the field.
	ErrClaim = errors.New("runcontext: identity claim rejected")
	// ErrUnknownKey is returned by a KeyResolver that has no key for a kid.
	ErrUnknownKey = errors.New("runcontext: unknown key id")
	// ErrTraceContext reports a malformed W3C trace context.
	ErrTraceContext = errors.New("runcontext: invalid trace context")
)

// Rules named by Problem.Rule.
const (
	RuleRequired   = "required"
	RuleFormat     = "format"
	RuleEnum       = "enum"
	RuleRange      = "range"
	RuleConsistent = "consistency"
	RuleConflict   = "conflict"
	RuleDecode     = "decode"
)

// Problem is one validation problem: the JSON path of the offending member
// (such as "user.delegation" or "context_pack_refs[0]"), the rule it broke
// and a message safe to show (it never contains secrets).
type Problem struct {
	Path    string `json:"path"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	path := p.Path
	if path == "" {
		path = "(document)"
	}
	return path + ": " + p.Message
}

// ValidationError lists every problem found in a document. It matches
// ErrInvalid, and ErrConflict when any problem is a conflict.
type ValidationError struct {
	Kind     string // "invoke-agent" or "run-context"
	Problems []Problem
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("runcontext: invalid ")
	b.WriteString(e.Kind)
	b.WriteString(":")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString(";")
		}
		b.WriteString(" ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Is matches ErrInvalid, ErrConflict when a problem is a conflict, and
// ErrClaim when a problem is in an identity claim.
func (e *ValidationError) Is(target error) bool {
	switch target {
	case ErrInvalid:
		return true
	case ErrClaim:
		_, ok := e.claimProblem()
		return ok
	case ErrConflict:
		for _, p := range e.Problems {
			if p.Rule == RuleConflict {
				return true
			}
		}
	}
	return false
}

// As lets errors.As find a *ClaimError in a validation error with a
// problem in an identity claim (agent.identity_claim…): a claim that does
// not fit its run is refused as a *ClaimError whether validation or
// verification catches it. The first such problem gives the field.
func (e *ValidationError) As(target any) bool {
	ce, ok := target.(**ClaimError)
	if !ok {
		return false
	}
	if p, ok := e.claimProblem(); ok {
		field, _ := strings.CutPrefix(strings.TrimPrefix(p.Path, claimPath), ".")
		if field == "" {
			field = "identity_claim"
		}
		reason := p.Message
		switch p.Rule {
		case RuleConsistent, RuleConflict:
			reason = ClaimReasonMismatch
		case RuleRequired:
			reason = ClaimReasonMissing
		}
		*ce = &ClaimError{Field: field, Reason: reason}
		return true
	}
	return false
}

const claimPath = "agent.identity_claim"

func (e *ValidationError) claimProblem() (Problem, bool) {
	for _, p := range e.Problems {
		if rest, found := strings.CutPrefix(p.Path, claimPath); found && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			return p, true
		}
	}
	return Problem{}, false
}

type problems struct {
	list []Problem
}

func (ps *problems) add(path, rule, msg string) {
	ps.list = append(ps.list, Problem{Path: path, Rule: rule, Message: msg})
}

func (ps *problems) err(kind string) error {
	if len(ps.list) == 0 {
		return nil
	}
	return &ValidationError{Kind: kind, Problems: ps.list}
}
