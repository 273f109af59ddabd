package runcontext

import (
	"errors"
	"slices"
	"strings"

	"github.com/contextos/contextos/internal/problem"
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
	// ErrRawToken reports a token_ref (user.delegation.token_ref or
	// agent.token_ref) that holds a credential — a bearer token, a JSON
	// Web Token, an API key, an opaque access token — instead of a
	// reference to one in the host's secret store. It comes inside a
	// *ValidationError (code CodeSecret) that does not repeat the value.
	ErrRawToken = errors.New("runcontext: token_ref holds a raw token, not a reference")
)

// Problem codes: the rule a member breaks.
const (
	CodeRequired   Code = "required"
	CodeFormat     Code = "format"
	CodeEnum       Code = "enum"
	CodeRange      Code = "range"
	CodeConsistent Code = "consistency"
	CodeConflict   Code = "conflict"
	CodeDecode     Code = "decode"
	// CodeSecret is a member that holds a secret where a reference to
	// one belongs (a raw token in token_ref).
	CodeSecret Code = "secret"
)

// Problem is one validation problem: the JSON path of the offending member
// (such as "user.delegation" or "context_pack_refs[0]"), the code of the
// rule it broke and a message safe to show (it never contains secrets). It
// is the Problem of every validating package (pack, decision, schemas).
type Problem = problem.Problem

// Code names the rule a problem breaks (the Code* constants).
type Code = problem.Code

// ValidationError lists every problem found in a request or run context.
// It matches ErrInvalid; ErrConflict too when a problem is a conflict; and
// when a problem is in the agent's identity claim it matches ErrClaim and
// errors.As finds a *ClaimError naming the claim member (the first such
// problem gives the field), so a claim that does not fit its run is
// refused as a *ClaimError whether validation or verification catches it.
// It is one type shared by runcontext, pack, decision and schemas, so
// errors.As finds it whichever package refused; errors.Is(err, ErrInvalid)
// tells this package's refusals from the others'.
type ValidationError = problem.ValidationError

const claimPath = "agent.identity_claim"

// invalid returns the *ValidationError of probs for a document of kind
// (KindInvokeAgent or KindRunContext).
func invalid(kind string, probs []Problem) *ValidationError {
	var conflict error
	if slices.ContainsFunc(probs, func(p Problem) bool { return p.Code == CodeConflict }) {
		conflict = ErrConflict
	}
	var claim error
	if i := slices.IndexFunc(probs, isClaimProblem); i >= 0 {
		p := probs[i]
		field, _ := strings.CutPrefix(strings.TrimPrefix(p.Path, claimPath), ".")
		if field == "" {
			field = "identity_claim"
		}
		reason := p.Message
		switch p.Code {
		case CodeConsistent, CodeConflict:
			reason = reasonMismatch
		case CodeRequired:
			reason = reasonMissing
		}
		claim = &ClaimError{Field: field, Reason: reason}
	}
	var raw error
	if slices.ContainsFunc(probs, func(p Problem) bool { return p.Code == CodeSecret }) {
		raw = ErrRawToken
	}
	return problem.New(ErrInvalid, "runcontext: invalid "+kind, probs, conflict, claim, raw)
}

func isClaimProblem(p Problem) bool {
	rest, found := strings.CutPrefix(p.Path, claimPath)
	return found && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

type problems struct {
	list []Problem
}

func (ps *problems) add(path string, code Code, msg string) {
	ps.list = append(ps.list, Problem{Path: path, Code: code, Message: msg})
}

func (ps *problems) err(kind string) error {
	if len(ps.list) == 0 {
		return nil
	}
	return invalid(kind, ps.list)
}
