package runcontext

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/internal/wire"
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

// addAt adds a problem of the member at path, writing the path.
func (ps *problems) addAt(path *at, code Code, msg string) {
	ps.add(path.String(), code, msg)
}

// addIn adds a problem of the member name of the object at path.
func (ps *problems) addIn(path *at, name string, code Code, msg string) {
	ps.add(wire.Join(path.String(), name), code, msg)
}

// at is the JSON path of a member ("agent.principal_chain[0].kind"),
// written (String) only when a problem of it is reported: every request
// and run context is checked, most have no problem, and a path written
// for every member checked would cost more than the checks. An at with
// no parent is a top-level path; otherwise it is a member name or, with
// elem, an array index under its parent.
type at struct {
	up    *at
	name  string
	index int
	elem  bool
}

// m is the path of member name under p.
func (p *at) m(name string) *at { return &at{up: p, name: name} }

// i is the path of element i of the array at p.
func (p *at) i(i int) *at { return &at{up: p, index: i, elem: true} }

// String writes the path as wire.Join and wire.Index write it. It walks
// up from p for each segment rather than recursing, and copies every
// name (even a lone one), so that no at escapes to the heap: they live
// on their checks' stacks.
func (p *at) String() string {
	depth := 0
	for q := p.up; q != nil; q = q.up {
		depth++
	}
	var b strings.Builder
	for d := depth; d >= 0; d-- {
		q := p
		for range d {
			q = q.up
		}
		switch {
		case q.up == nil:
			b.WriteString(q.name)
		case q.elem:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(q.index))
			b.WriteByte(']')
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(q.name)
		}
	}
	return b.String()
}

func (ps *problems) err(kind string) error {
	if len(ps.list) == 0 {
		return nil
	}
	return invalid(kind, ps.list)
}
