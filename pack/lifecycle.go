package pack

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/contextos/contextos/internal/opmetrics"
	"github.com/contextos/contextos/internal/principal"
	"go.opentelemetry.io/otel/metric"
)

// Sentinel errors of the review and environment lifecycle.
var (
	// ErrReview reports a review sign-off the registry refuses: a reviewer
	// that is not an identifier, a role the registry does not require, or
	// an entry not in a state that can be reviewed.
	ErrReview = errors.New("pack: review refused")
	// ErrEnvironment reports an environment name that is not an
	// identifier (lower-case letter, then up to 63 of a-z 0-9 _ -).
	ErrEnvironment = errors.New("pack: invalid environment name")
	// ErrNotPinned reports an environment that does not pin the pack (or
	// not the version a promotion names).
	ErrNotPinned = errors.New("pack: not pinned in the environment")
	// ErrPinConflict reports a promotion or rollback decided on a pin
	// history that another writer changed before it was recorded; nothing
	// was recorded, and the caller decides again.
	ErrPinConflict = errors.New("pack: the environment's pins changed concurrently")
	// ErrNoRollbackTarget reports a rollback with no prior version to
	// return to: the environment's pin stack holds no earlier version that
	// is still published or pinned.
	ErrNoRollbackTarget = errors.New("pack: no prior version to roll back to")
	// ErrNoVerifier reports a promotion or rollback called without a
	// verification hook; nothing was recorded.
	ErrNoVerifier = errors.New("pack: no golden-replay verification hook")
	// ErrPromotionBlocked reports a promotion whose golden replay did not
	// verify (a replay produced a different manifest for pinned inputs);
	// the error is a *VerifyError and nothing was recorded.
	ErrPromotionBlocked = errors.New("pack: promotion blocked by golden replay")
	// ErrRollbackUnverified reports a rollback that re-pinned the prior
	// version, whose golden replay then did not verify; the error is a
	// *VerifyError and the re-pin stands (see Deployments.Rollback).
	ErrRollbackUnverified = errors.New("pack: rolled back, but the golden replay of the restored version did not verify")
)

// ReviewRole is a review role whose sign-off a registry requires before a
// version may move to reviewed.
type ReviewRole string

// The review roles of seed 003 ("reviewed: architecture, security, data,
// and evaluation reviewers signed off"); a registry requires all four
// unless ValidateOptions.ReviewRoles names others.
const (
	RoleArchitecture ReviewRole = "architecture"
	RoleSecurity     ReviewRole = "security"
	RoleData         ReviewRole = "data"
	RoleEvaluation   ReviewRole = "evaluation"
)

// DefaultReviewRoles returns the roles a registry requires by default, in
// the seed's order.
func DefaultReviewRoles() []ReviewRole {
	return []ReviewRole{RoleArchitecture, RoleSecurity, RoleData, RoleEvaluation}
}

// Signoff is one reviewer's sign-off of a version in one role.
type Signoff struct {
	// Reviewer identifies who signed off: an identifier of up to 128
	// bytes (letters, digits and _ . : @ / + -, starting with a letter or
	// digit), e.g. a user name or an e-mail address.
	Reviewer string `json:"reviewer"`
	// Role is the role signed off in; the registry must require it.
	Role ReviewRole `json:"role"`
}

var (
	identPattern    = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	reviewerPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:@/+-]{0,127}$`)
)

// CheckEnvironment returns nil for a valid environment name — a
// lower-case letter followed by up to 63 of a-z, 0-9, _ and - ("prod",
// "staging", "eu-prod") — and otherwise an error wrapping ErrEnvironment
// that does not repeat the name.
func CheckEnvironment(env string) error {
	if !identPattern.MatchString(env) {
		return fmt.Errorf("%w: an environment is a lower-case letter followed by up to 63 of a-z 0-9 _ - (got %d bytes)", ErrEnvironment, len(env))
	}
	return nil
}

// checkRoleName reports a review role that is not an identifier.
func checkRoleName(r ReviewRole) error {
	if !identPattern.MatchString(string(r)) {
		return fmt.Errorf("%w: a review role is a lower-case letter followed by up to 63 of a-z 0-9 _ - (got %d bytes)", ErrReview, len(r))
	}
	return nil
}

// reviewRoles returns the roles a registry validating with o requires:
// o.ReviewRoles without repeats, or DefaultReviewRoles when none are set.
// A registry never requires no review.
func (o *ValidateOptions) reviewRoles() []ReviewRole {
	if o == nil || len(o.ReviewRoles) == 0 {
		return DefaultReviewRoles()
	}
	var out []ReviewRole
	for _, r := range o.ReviewRoles {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// checkReviewRoles reports a configured review role that is not an
// identifier.
func (o *ValidateOptions) checkReviewRoles() error {
	if o == nil {
		return nil
	}
	for _, r := range o.ReviewRoles {
		if err := checkRoleName(r); err != nil {
			return fmt.Errorf("ValidateOptions.ReviewRoles: %w", err)
		}
	}
	return nil
}

// missingRoles returns the roles the registry requires that e's recorded
// sign-offs do not cover. Unless o allows one reviewer in several roles,
// each role must be covered by a reviewer of its own (principal.Same
// tells reviewers apart): the roles are matched to distinct reviewers,
// and those left unmatched are missing.
func (o *ValidateOptions) missingRoles(e Entry) []ReviewRole {
	required := o.reviewRoles()
	signed := func(r ReviewRole) bool {
		return slices.ContainsFunc(e.Reviews, func(s Signoff) bool { return s.Role == r })
	}
	if o != nil && o.AllowMultiRoleReviewer {
		var out []ReviewRole
		for _, r := range required {
			if !signed(r) {
				out = append(out, r)
			}
		}
		return out
	}
	// reviewers[i] are the canonical names of the reviewers of required[i].
	reviewers := make([][]string, len(required))
	for i, r := range required {
		for _, s := range e.Reviews {
			if s.Role == r {
				reviewers[i] = append(reviewers[i], principal.Canonical(s.Reviewer))
			}
		}
	}
	holder := map[string]int{} // reviewer → the role index it is matched to
	var assign func(i int, seen map[string]bool) bool
	assign = func(i int, seen map[string]bool) bool {
		for _, who := range reviewers[i] {
			if who == "" || seen[who] {
				continue
			}
			seen[who] = true
			if j, taken := holder[who]; !taken || assign(j, seen) {
				holder[who] = i
				return true
			}
		}
		return false
	}
	var out []ReviewRole
	for i, r := range required {
		if !assign(i, map[string]bool{}) {
			out = append(out, r)
		}
	}
	return out
}

// SignOff applies a Review to the stored entry e: each sign-off must name
// a reviewer identifier and a role the registry requires, and e must be
// linted, reviewed or signed (a version signed before its registry
// recorded reviews, or before it required a role it now requires, takes
// the missing sign-offs without going back to draft; publishing needs
// them). Unless opts allow one reviewer in several roles
// (AllowMultiRoleReviewer), a reviewer who signed off in one role (now
// or before) cannot sign off in another: the review fails with ErrReview
// and records nothing. New sign-offs are appended in order (one already
// recorded, by the same reviewer under principal.Same, is not repeated);
// a linted entry whose recorded sign-offs now cover every required role
// moves to reviewed. It returns the entry to store. A durable Registry
// calls it inside the transaction that stores the result.
func (e Entry) SignOff(opts *ValidateOptions, signoffs ...Signoff) (Entry, error) {
	if err := opts.Check(); err != nil {
		return e, err
	}
	if len(signoffs) == 0 {
		return e, fmt.Errorf("%w: %s: a review needs at least one sign-off", ErrReview, e.Ref)
	}
	if e.State != StateLinted && e.State != StateReviewed && e.State != StateSigned {
		return e, fmt.Errorf("%w: %s is %s; only a linted, reviewed or signed version takes sign-offs", ErrReview, e.Ref, e.State)
	}
	required := opts.reviewRoles()
	multi := opts != nil && opts.AllowMultiRoleReviewer
	reviews := slices.Clone(e.Reviews)
	for i, s := range signoffs {
		if !reviewerPattern.MatchString(s.Reviewer) {
			return e, fmt.Errorf("%w: sign-off %d: reviewer is not an identifier (letters, digits, _ . : @ / + -; up to 128 bytes)", ErrReview, i)
		}
		if err := checkRoleName(s.Role); err != nil {
			return e, fmt.Errorf("sign-off %d: %w", i, err)
		}
		if !slices.Contains(required, s.Role) {
			return e, fmt.Errorf("%w: sign-off %d: the registry does not require role %q (it requires %v)", ErrReview, i, s.Role, required)
		}
		same := func(r Signoff) bool { return principal.Same(r.Reviewer, s.Reviewer) }
		if j := slices.IndexFunc(reviews, func(r Signoff) bool { return same(r) && r.Role != s.Role }); j >= 0 && !multi {
			return e, fmt.Errorf("%w: sign-off %d: its reviewer already signed off %s in role %s; each required role needs a reviewer of its own (ValidateOptions.AllowMultiRoleReviewer lets one reviewer hold several roles)", ErrReview, i, e.Ref, reviews[j].Role)
		}
		if !slices.ContainsFunc(reviews, func(r Signoff) bool { return same(r) && r.Role == s.Role }) {
			reviews = append(reviews, s)
		}
	}
	e.Reviews = reviews
	if e.State == StateLinted && len(opts.missingRoles(e)) == 0 {
		e.State, e.Reason = StateReviewed, ""
	}
	return e, nil
}

// PinAction is what one entry of an environment's pin history did.
type PinAction string

// Pin actions (seed 003: "published → pinned in environment → observed in
// runs → promoted or rolled back").
const (
	// ActionPin made its version the environment's current one.
	ActionPin PinAction = "pin"
	// ActionPromote marked the current version promoted after its golden
	// replay verified.
	ActionPromote PinAction = "promote"
	// ActionRollback re-pinned the prior version in place of the one it
	// names as Previous.
	ActionRollback PinAction = "rollback"
)

// PinActions returns the pin actions.
func PinActions() []PinAction { return []PinAction{ActionPin, ActionPromote, ActionRollback} }

// Slot is where a pack is pinned: one pack id in one environment. The
// pin lookups and Rollback take it whole, so an environment and a pack id
// cannot be passed in each other's place.
type Slot struct {
	Env    string
	PackID string
}

// Pin is one entry of an environment's pin history of a pack. The last
// entry is the environment's current pin: its Ref is the version the
// environment runs, promoted when its Action is ActionPromote.
type Pin struct {
	Env string `json:"env"`
	// Ref is the version the environment pins after this entry.
	Ref Ref `json:"ref"`
	// Seq is the entry's position in the history, from 1.
	Seq    int64     `json:"seq"`
	Action PinAction `json:"action"`
	// Previous is the version pinned before this entry (zero for the
	// first pin; for a rollback, the version rolled back).
	Previous Ref    `json:"previous,omitzero"`
	Reason   string `json:"reason,omitempty"`
	// At is when the entry was recorded, by the Deployments' clock.
	At time.Time `json:"at"`
}

// Promoted reports whether the pin is a promotion.
func (p Pin) Promoted() bool { return p.Action == ActionPromote }

// PinChange is one change to an environment's pin history, decided by
// Deployments and recorded by a LifecycleRegistry's ApplyPin. Only this
// package builds one, so a promotion is never recorded without its golden
// replay having verified.
type PinChange struct {
	action PinAction
	env    string
	ref    Ref
	from   Ref   // rollback: the version rolled back
	expect int64 // promote, rollback: the Seq of the pin the decision read
	reason string
	at     time.Time
}

// Env returns the environment the change is for.
func (c PinChange) Env() string { return c.env }

// Ref returns the version the environment pins after the change.
func (c PinChange) Ref() Ref { return c.ref }

// Apply decides the change against the environment's current pin of the
// pack (last; the zero Pin when it was never pinned) and the stored entry
// of c.Ref() (target). It returns the history entry to append and the
// target entry to store (moved from published to pinned on its first
// pin); write is false when nothing changes (a pin of the version already
// pinned). A promotion or rollback whose pin changed since it was decided
// fails with ErrPinConflict. A LifecycleRegistry calls Apply inside the
// transaction (or under the lock) that stores its result, so concurrent
// writers serialize.
func (c PinChange) Apply(last Pin, target Entry) (next Pin, e Entry, write bool, err error) {
	if !slices.Contains(PinActions(), c.action) || CheckEnvironment(c.env) != nil {
		return last, target, false, fmt.Errorf("%w: not a change Deployments made", ErrTransition)
	}
	if target.Ref != c.ref {
		return last, target, false, fmt.Errorf("%w: the entry given is %s, not %s", ErrTransition, target.Ref, c.ref)
	}
	if last.Seq != 0 && (last.Env != c.env || last.Ref.ID != c.ref.ID) {
		return last, target, false, fmt.Errorf("%w: the pin given is of %s in %s", ErrTransition, last.Ref, last.Env)
	}
	next = Pin{Env: c.env, Ref: c.ref, Seq: last.Seq + 1, Action: c.action, Previous: last.Ref, Reason: c.reason, At: c.at}
	switch c.action {
	case ActionPin:
		if target.State != StatePublished && target.State != StatePinned {
			return last, target, false, fmt.Errorf("%w: %s is %s; only a published version can be pinned", ErrTransition, c.ref, target.State)
		}
		if last.Seq != 0 && last.Ref == c.ref {
			return last, target, false, nil
		}
	case ActionPromote:
		if last.Seq != c.expect || last.Ref != c.ref {
			return last, target, false, fmt.Errorf("%w: %s in %s: now at %s (entry %d), promotion was verified against entry %d", ErrPinConflict, c.ref.ID, c.env, last.Ref, last.Seq, c.expect)
		}
		if target.State != StatePinned {
			return last, target, false, fmt.Errorf("%w: %s is %s; only a pinned version can be promoted", ErrTransition, c.ref, target.State)
		}
	case ActionRollback:
		if c.ref == c.from {
			return last, target, false, fmt.Errorf("%w: %s is the version rolled back", ErrNoRollbackTarget, c.ref)
		}
		if last.Seq != c.expect || last.Ref != c.from {
			return last, target, false, fmt.Errorf("%w: %s in %s: now at %s (entry %d), rollback was decided at entry %d", ErrPinConflict, c.ref.ID, c.env, last.Ref, last.Seq, c.expect)
		}
		if !usable(target.State, UseExecute) {
			return last, target, false, fmt.Errorf("%w: %s is %s and cannot take traffic again", ErrNoRollbackTarget, c.ref, target.State)
		}
	}
	e = target
	if e.State == StatePublished {
		e.State, e.Reason = StatePinned, ""
	}
	return next, e, true, nil
}

// LifecycleRegistry is a Registry that records reviews and pins versions
// per environment: the optional capability Deployments and Publish use.
// Every registry of this module (MemoryRegistry, DirRegistry, store/sqlite
// and store/postgres) is one; RunLifecycleTests in package packtest checks
// the contract. Implementations apply Entry.SignOff and PinChange.Apply in
// one transaction (or under one lock) with the reads they decide on.
type LifecycleRegistry interface {
	Registry
	// Review records sign-offs on ref (Entry.SignOff) and returns the
	// entry: reviewed once every required role has signed off.
	Review(ctx context.Context, ref Ref, signoffs ...Signoff) (Entry, error)
	// ApplyPin records c (PinChange.Apply against the current pin and
	// the entry of c.Ref()) and returns the environment's current pin.
	// An unknown version is ErrNotFound.
	ApplyPin(ctx context.Context, c PinChange) (Pin, error)
	// PinHistory returns the slot's pin history (its environment's pins
	// of its pack id), oldest first; it is empty (and the error nil) when
	// the environment never pinned the pack.
	PinHistory(ctx context.Context, slot Slot) ([]Pin, error)
	// Pins returns env's current pin of every pack it pins, by pack id.
	Pins(ctx context.Context, env string) ([]Pin, error)
}

// Publish takes ref, stored as a signed pack file in state linted, through
// the rest of the release path: it records signoffs (Review), which must
// cover every role the registry requires, each by a reviewer of its own
// unless the registry's options allow one reviewer in several roles
// (ValidateOptions.AllowMultiRoleReviewer), then moves ref to signed and
// to published with reason. reg must record reviews (a
// LifecycleRegistry); otherwise nothing can be published and the error
// wraps ErrTransition.
//
// Publish can be called again: a version already published (or pinned
// since) whose recorded sign-offs include every one given is returned as
// it is, with nothing recorded — a release job that runs twice does not
// fail; other sign-offs for it are refused with ErrReview. A version left
// signed (a Publish cut off before its last step) is published.
func Publish(ctx context.Context, reg Registry, ref Ref, reason string, signoffs ...Signoff) (Entry, error) {
	lr, ok := reg.(LifecycleRegistry)
	if !ok {
		return Entry{}, fmt.Errorf("%w: %T records no reviews, so nothing it holds can be published", ErrTransition, reg)
	}
	cur, err := reg.Get(ctx, ref)
	if err != nil {
		return Entry{}, err
	}
	if cur.State == StatePublished || cur.State == StatePinned {
		if len(signoffs) == 0 {
			return cur, fmt.Errorf("%w: %s: a review needs at least one sign-off", ErrReview, ref)
		}
		for i, s := range signoffs {
			if !slices.ContainsFunc(cur.Reviews, func(r Signoff) bool { return r.Role == s.Role && principal.Same(r.Reviewer, s.Reviewer) }) {
				return cur, fmt.Errorf("%w: %s is already %s, and sign-off %d (role %s) is not one it was published with", ErrReview, ref, cur.State, i, s.Role)
			}
		}
		return cur, nil
	}
	e, err := lr.Review(ctx, ref, signoffs...)
	if err != nil {
		return Entry{}, err
	}
	if e.State == StateReviewed {
		if e, err = reg.SetState(ctx, ref, StateSigned, ""); err != nil {
			return Entry{}, err
		}
	}
	if e.State != StateSigned {
		return e, fmt.Errorf("%w: %s is %s after the review", ErrTransition, ref, e.State)
	}
	return reg.SetState(ctx, ref, StatePublished, reason)
}

// VerifyFunc re-runs the golden replays of ref's pinned inputs for env
// and returns nil when every replay reproduces its recorded manifests; an
// error means a replay produced a different manifest (seed 003: "block
// promotion and open incident"). Package eval provides one; it must be
// safe to call while the registry is in use.
type VerifyFunc func(ctx context.Context, env string, ref Ref) error

// VerifyError is a golden replay that did not verify during a promotion
// (matching ErrPromotionBlocked) or a rollback (matching
// ErrRollbackUnverified); Err is the hook's error.
type VerifyError struct {
	Action PinAction
	Env    string
	Ref    Ref
	Err    error
}

func (e *VerifyError) Error() string {
	if e.Action == ActionRollback {
		return fmt.Sprintf("%v: %s in %s: %v", ErrRollbackUnverified, e.Ref, e.Env, e.Err)
	}
	return fmt.Sprintf("%v: %s in %s: %v", ErrPromotionBlocked, e.Ref, e.Env, e.Err)
}

// Unwrap returns the sentinel and the hook's error.
func (e *VerifyError) Unwrap() []error {
	if e.Action == ActionRollback {
		return []error{ErrRollbackUnverified, e.Err}
	}
	return []error{ErrPromotionBlocked, e.Err}
}

// DeploymentOptions configures NewDeployments. The zero value is ready to
// use.
type DeploymentOptions struct {
	// Now stamps pin entries and times rollbacks. Default: time.Now.
	Now func() time.Time
	// MeterProvider receives the rollback time: each rollback that
	// re-pinned a version records its Duration in the
	// contextos.pack.rollback.duration histogram (seconds; pack id and
	// environment as attributes). Default: no-op.
	MeterProvider metric.MeterProvider
}

// Deployments pins, promotes and rolls back pack versions per environment
// over a LifecycleRegistry. Its methods are safe for concurrent use, and
// for use by several processes sharing a durable registry: each records
// one change in one transaction (PinChange.Apply), and a promotion or
// rollback decided on a pin that changed meanwhile records nothing and
// fails with ErrPinConflict.
//
// The semantics:
//
//   - Pin(env, ref) makes ref env's current version of its pack. ref must
//     be published (its state moves to pinned) or pinned already; pinning
//     the current version again records nothing. A version pinned in one
//     environment is not pinned in another.
//   - Promote(env, ref) needs ref to be env's current, not yet promoted,
//     version; it calls the hook first and records the promotion only if
//     the hook returns nil. A hook error blocks it (*VerifyError,
//     ErrPromotionBlocked).
//   - Rollback(env, packID) re-pins the prior version. The history is a
//     stack: a pin pushes its version, a rollback pops back to the version
//     it restores, a promotion leaves it as is. The prior version is the
//     nearest one below the top of the stack that can still take traffic
//     (published or pinned; deprecated and revoked ones are passed over),
//     so rolling back twice after pinning v1, v2, v3 returns to v2, then v1,
//     and never back to a version already rolled back nor to the current
//     version (pinned v1, v2, v1 with v2 revoked has no rollback target). The re-pin is
//     recorded first (one transaction), then the hook replays the restored
//     version: a hook error leaves the re-pin in place — the version rolled
//     back from is the suspect one — and is returned with the result
//     (*VerifyError, ErrRollbackUnverified) so the caller opens an
//     incident. Duration runs from the call to the end of the replay.
type Deployments struct {
	reg     LifecycleRegistry
	now     func() time.Time
	metrics *opmetrics.Metrics
}

// NewDeployments returns the Deployments over reg. It fails only when
// opts.MeterProvider cannot make the rollback-time instrument.
func NewDeployments(reg LifecycleRegistry, opts *DeploymentOptions) (*Deployments, error) {
	var o DeploymentOptions
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m, err := opmetrics.New(o.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("pack: DeploymentOptions.MeterProvider: %w", err)
	}
	return &Deployments{reg: reg, now: o.Now, metrics: m}, nil
}

// Pin makes ref env's current version of its pack and returns the pin.
func (d *Deployments) Pin(ctx context.Context, env string, ref Ref, reason string) (Pin, error) {
	if err := CheckEnvironment(env); err != nil {
		return Pin{}, err
	}
	return d.reg.ApplyPin(ctx, PinChange{action: ActionPin, env: env, ref: ref, reason: reason, at: d.now()})
}

// Pinned returns the slot's current pin (its environment's pin of its
// pack id), or an error wrapping ErrNotPinned.
func (d *Deployments) Pinned(ctx context.Context, slot Slot) (Pin, error) {
	env, packID := slot.Env, slot.PackID
	h, err := d.history(ctx, env, packID)
	if err != nil {
		return Pin{}, err
	}
	return currentPin(h), nil
}

// Pins returns env's current pin of every pack, by pack id.
func (d *Deployments) Pins(ctx context.Context, env string) ([]Pin, error) {
	if err := CheckEnvironment(env); err != nil {
		return nil, err
	}
	return d.reg.Pins(ctx, env)
}

// History returns the slot's pin history, oldest first (empty when its
// environment never pinned its pack).
func (d *Deployments) History(ctx context.Context, slot Slot) ([]Pin, error) {
	env := slot.Env
	if err := CheckEnvironment(env); err != nil {
		return nil, err
	}
	return d.reg.PinHistory(ctx, slot)
}

func (d *Deployments) history(ctx context.Context, env, packID string) ([]Pin, error) {
	h, err := d.History(ctx, Slot{Env: env, PackID: packID})
	if err != nil {
		return nil, err
	}
	if len(h) == 0 {
		return nil, fmt.Errorf("%w: %q in %s", ErrNotPinned, clip(packID), env)
	}
	return h, nil
}

// Promote verifies ref, env's current version of its pack, with verify
// and records the promotion. A hook error blocks it with a *VerifyError
// (ErrPromotionBlocked); a pin that changed while verify ran fails with
// ErrPinConflict. Promoting a promoted version again returns its pin
// without calling verify, while the version is still pinned (one revoked
// or deprecated since is ErrTransition).
func (d *Deployments) Promote(ctx context.Context, env string, ref Ref, reason string, verify VerifyFunc) (Pin, error) {
	if verify == nil {
		return Pin{}, ErrNoVerifier
	}
	h, err := d.history(ctx, env, ref.ID)
	if err != nil {
		return Pin{}, err
	}
	cur := currentPin(h)
	if cur.Ref != ref {
		return Pin{}, fmt.Errorf("%w: %s pins %s, not %s", ErrNotPinned, env, cur.Ref, ref)
	}
	if cur.Promoted() {
		// Still only a version that can take traffic: a promoted version
		// revoked or deprecated since is not reported promoted again.
		e, err := d.reg.Get(ctx, ref)
		if err != nil {
			return Pin{}, err
		}
		if e.State != StatePinned {
			return Pin{}, fmt.Errorf("%w: %s is %s; only a pinned version can be promoted", ErrTransition, ref, e.State)
		}
		return cur, nil
	}
	if err := verify(ctx, env, ref); err != nil {
		return Pin{}, &VerifyError{Action: ActionPromote, Env: env, Ref: ref, Err: err}
	}
	return d.reg.ApplyPin(ctx, PinChange{action: ActionPromote, env: env, ref: ref, expect: cur.Seq, reason: reason, at: d.now()})
}

// RollbackResult is what a rollback did.
type RollbackResult struct {
	// Pin is the recorded rollback: Pin.Ref is the restored version,
	// Pin.Previous the version rolled back.
	Pin Pin
	// Duration is the rollback time (seed 003's "rollback time" metric):
	// from the call to the end of the restored version's golden replay,
	// by DeploymentOptions.Now.
	Duration time.Duration
}

// Rollback re-pins the prior version of the slot's pack in its
// environment (see Deployments)
// and replays it with verify. It fails before changing anything with
// ErrNoVerifier, ErrNotPinned, ErrNoRollbackTarget or ErrPinConflict;
// after the re-pin, a hook error is returned with the result as a
// *VerifyError (ErrRollbackUnverified).
func (d *Deployments) Rollback(ctx context.Context, slot Slot, reason string, verify VerifyFunc) (RollbackResult, error) {
	env, packID := slot.Env, slot.PackID
	start := d.now()
	if verify == nil {
		return RollbackResult{}, ErrNoVerifier
	}
	h, err := d.history(ctx, env, packID)
	if err != nil {
		return RollbackResult{}, err
	}
	cur := currentPin(h)
	stack := pinStack(h)
	var target Ref
	for i := len(stack) - 2; i >= 0 && target == (Ref{}); i-- {
		if stack[i] == cur.Ref {
			continue // pinned again later: rolling back to it changes nothing
		}
		e, err := d.reg.Get(ctx, stack[i])
		if err != nil {
			return RollbackResult{}, err
		}
		if usable(e.State, UseExecute) {
			target = stack[i]
		}
	}
	if target == (Ref{}) {
		return RollbackResult{}, fmt.Errorf("%w: %s in %s", ErrNoRollbackTarget, cur.Ref, env)
	}
	pin, err := d.reg.ApplyPin(ctx, PinChange{action: ActionRollback, env: env, ref: target, from: cur.Ref, expect: cur.Seq, reason: reason, at: d.now()})
	if err != nil {
		return RollbackResult{}, err
	}
	verr := verify(ctx, env, target)
	res := RollbackResult{Pin: pin, Duration: d.now().Sub(start)}
	d.metrics.Rollback(ctx, packID, env, res.Duration)
	if verr != nil {
		return res, &VerifyError{Action: ActionRollback, Env: env, Ref: target, Err: verr}
	}
	return res, nil
}

// pinStack replays a pin history into the stack of versions a rollback
// walks back through: a pin pushes its version, a rollback pops down to
// the version it restored, a promotion changes nothing.
func pinStack(h []Pin) []Ref {
	var stack []Ref
	for _, p := range h {
		switch p.Action {
		case ActionPin:
			stack = append(stack, p.Ref)
		case ActionRollback:
			for len(stack) > 0 && stack[len(stack)-1] != p.Ref {
				stack = stack[:len(stack)-1]
			}
			if len(stack) == 0 {
				stack = append(stack, p.Ref)
			}
		}
	}
	return stack
}

// currentPin is the last entry of a pin history: the environment's
// current pin, or the zero Pin for an empty history (PinChange.Apply's
// "never pinned").
func currentPin(h []Pin) Pin {
	if len(h) == 0 {
		return Pin{}
	}
	return h[len(h)-1]
}

// sortPins orders current pins by pack id.
func sortPins(ps []Pin) {
	slices.SortFunc(ps, func(a, b Pin) int { return strings.Compare(a.Ref.ID, b.Ref.ID) })
}
