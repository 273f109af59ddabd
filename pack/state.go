package pack

import (
	"fmt"
	"slices"
)

// State is a pack version's lifecycle state in a registry.
type State string

// Lifecycle states (seed 003, "Publishing lifecycle"). A version moves
// draft → linted → reviewed → signed → published → pinned; reviewed needs
// the sign-offs of every role the registry requires (Entry.SignOff), and
// pinned is reached only by pinning the version in an environment
// (Deployments.Pin). Pinned means some environment has pinned it; which
// environments pin it now, and whether it was promoted or rolled back
// there, is the environments' pin history (Deployments).
const (
	StateDraft      State = "draft"
	StateLinted     State = "linted"
	StateReviewed   State = "reviewed"
	StateSigned     State = "signed"
	StatePublished  State = "published"
	StatePinned     State = "pinned"
	StateDeprecated State = "deprecated"
	StateRevoked    State = "revoked"
)

// States returns the lifecycle states in order.
func States() []State {
	return []State{StateDraft, StateLinted, StateReviewed, StateSigned, StatePublished, StatePinned, StateDeprecated, StateRevoked}
}

// UnmarshalText accepts exactly the lifecycle states.
func (s *State) UnmarshalText(b []byte) error { return setEnum(s, "state", States(), b) }

// transitions are the allowed lifecycle moves. Authoring states can go
// back to draft; any state but revoked can be revoked; revoked is final.
// Reviewed needs recorded sign-offs and pinned an environment (Transition
// checks both), so neither a signed nor a pinned version skips them.
var transitions = map[State][]State{
	StateDraft:      {StateLinted, StateRevoked},
	StateLinted:     {StateReviewed, StateDraft, StateRevoked},
	StateReviewed:   {StateSigned, StateDraft, StateRevoked},
	StateSigned:     {StatePublished, StateDraft, StateRevoked},
	StatePublished:  {StatePinned, StateDeprecated, StateRevoked},
	StatePinned:     {StateDeprecated, StateRevoked},
	StateDeprecated: {StateRevoked},
	StateRevoked:    nil,
}

// canTransition reports whether from → to is an allowed lifecycle move.
func canTransition(from, to State) bool { return slices.Contains(transitions[from], to) }

// CheckTransition returns nil or an error wrapping ErrTransition. Moves to
// deprecated or revoked need a reason.
func CheckTransition(from, to State, reason string) error {
	if !canTransition(from, to) {
		return fmt.Errorf("%w: %s → %s (allowed from %s: %v)", ErrTransition, from, to, from, transitions[from])
	}
	if (to == StateDeprecated || to == StateRevoked) && reason == "" {
		return fmt.Errorf("%w: moving to %s needs a reason", ErrTransition, to)
	}
	return nil
}

// Use is what a resolved pack is for.
type Use string

// Uses of a pack.
const (
	// UseExecute is new governed traffic: only published or pinned packs.
	UseExecute Use = "execute"
	// UseResume continues a run that already started on the pack (the
	// resume of a paused or stopped run): published, pinned and
	// deprecated packs (deprecation stops new traffic only), never a
	// revoked one.
	UseResume Use = "resume"
	// UseReplay is replay and audit of past runs: also deprecated and
	// revoked packs.
	UseReplay Use = "replay"
)

// Uses returns the uses of a pack, from the strictest.
func Uses() []Use { return []Use{UseExecute, UseResume, UseReplay} }

// usable reports whether a pack in state s may be used for u.
func usable(s State, u Use) bool {
	switch s {
	case StatePublished, StatePinned:
		return slices.Contains(Uses(), u)
	case StateDeprecated:
		return u == UseResume || u == UseReplay
	case StateRevoked:
		return u == UseReplay
	}
	return false
}
