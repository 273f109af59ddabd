package runcontext

import (
	"fmt"
	"strings"
)

// ApprovalMode is the canonical risk taxonomy, ordered
// read_only < local_write < network < delegated < destructive. Adapters
// declare the highest mode they can produce; a capability is surfaced only if
// its mode is at most the run's safety mode. Policy may lower a mode, never
// raise it.
type ApprovalMode string

// The five approval modes, in order.
const (
	ReadOnly    ApprovalMode = "read_only"
	LocalWrite  ApprovalMode = "local_write"
	Network     ApprovalMode = "network"
	Delegated   ApprovalMode = "delegated"
	Destructive ApprovalMode = "destructive"
)

var approvalModes = [...]ApprovalMode{ReadOnly, LocalWrite, Network, Delegated, Destructive}

// ParseApprovalMode parses one of the five mode names (exact spelling).
func ParseApprovalMode(s string) (ApprovalMode, error) {
	m := ApprovalMode(s)
	if m.rank() < 0 {
		return "", fmt.Errorf("%w: approval mode is not one of %s", ErrInvalidEnum, joinModes())
	}
	return m, nil
}

// rank returns the mode's position in the order (0 for read_only … 4 for
// destructive), or -1 for an unknown mode.
func (m ApprovalMode) rank() int {
	// A switch, not a search of approvalModes: every gateway call ranks
	// several modes. TestApprovalModeOrder holds the two to the same order.
	switch m {
	case ReadOnly:
		return 0
	case LocalWrite:
		return 1
	case Network:
		return 2
	case Delegated:
		return 3
	case Destructive:
		return 4
	}
	return -1
}

// Valid reports whether m is one of the five modes.
func (m ApprovalMode) Valid() bool { return m.rank() >= 0 }

// Compare returns -1, 0 or +1 as m is less risky than, as risky as, or more
// risky than o. An unknown mode ranks above every known one, so comparisons
// involving it fail closed.
func (m ApprovalMode) Compare(o ApprovalMode) int {
	a, b := m.rankClosed(), o.rankClosed()
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (m ApprovalMode) rankClosed() int {
	if r := m.rank(); r >= 0 {
		return r
	}
	return len(approvalModes)
}

// AtMost reports whether m is known and no riskier than limit (also known).
// It is the surfacing test: capability mode AtMost run safety mode.
func (m ApprovalMode) AtMost(limit ApprovalMode) bool {
	a, b := m.rank(), limit.rank()
	return a >= 0 && b >= 0 && a <= b
}

// MaxApprovalMode returns the riskiest of modes (read_only for none). An
// unknown mode is returned as is, so the result fails closed.
func MaxApprovalMode(modes ...ApprovalMode) ApprovalMode {
	out := ReadOnly
	for _, m := range modes {
		if m.Compare(out) > 0 {
			out = m
		}
	}
	return out
}

// IsWrite reports whether m is above read_only (a write-class mode).
func (m ApprovalMode) IsWrite() bool { return m.Compare(ReadOnly) > 0 }

// String returns the mode's wire name.
func (m ApprovalMode) String() string { return string(m) }

// MarshalText refuses to write an unknown mode; the empty mode (absent)
// is written as "" and refused by validation.
func (m ApprovalMode) MarshalText() ([]byte, error) {
	if m != "" && !m.Valid() {
		return nil, fmt.Errorf("%w: approval mode is not one of %s", ErrInvalidEnum, joinModes())
	}
	return []byte(m), nil
}

// UnmarshalText accepts exactly the five mode names.
func (m *ApprovalMode) UnmarshalText(b []byte) error {
	v, err := ParseApprovalMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

func joinModes() string {
	s := make([]string, len(approvalModes))
	for i, m := range approvalModes {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// enumText implements the text methods for the small closed string enums.
// Its error names the enum and the allowed values, never the value given:
// a caller's value may be anything, a credential pasted in the wrong
// member too, and the allowed values are all an operator needs.
func enumText[T ~string](what string, allowed []T, v T) error {
	for _, a := range allowed {
		if a == v {
			return nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return fmt.Errorf("%w: %s is not one of %s", ErrInvalidEnum, what, strings.Join(names, ", "))
}

// Mode is the invoke execution mode.
type Mode string

// Execution modes (seed 000, "Execution modes").
const (
	ModeStream      Mode = "stream"
	ModeBatch       Mode = "batch"
	ModeLongRunning Mode = "long_running"
)

// modes returns the three execution modes.
func modes() []Mode { return []Mode{ModeStream, ModeBatch, ModeLongRunning} }

// UnmarshalText accepts exactly the three mode names.
func (m *Mode) UnmarshalText(b []byte) error {
	if err := enumText("mode", modes(), Mode(b)); err != nil {
		return err
	}
	*m = Mode(b)
	return nil
}

// PrincipalKind is the kind of a principal in a delegation chain.
type PrincipalKind string

// Principal kinds.
const (
	PrincipalUser       PrincipalKind = "user"
	PrincipalService    PrincipalKind = "service"
	PrincipalAgent      PrincipalKind = "agent"
	PrincipalAutomation PrincipalKind = "automation"
)

// principalKinds returns the four principal kinds.
func principalKinds() []PrincipalKind {
	return []PrincipalKind{PrincipalUser, PrincipalService, PrincipalAgent, PrincipalAutomation}
}

// UnmarshalText accepts exactly the four principal kinds.
func (k *PrincipalKind) UnmarshalText(b []byte) error {
	if err := enumText("principal kind", principalKinds(), PrincipalKind(b)); err != nil {
		return err
	}
	*k = PrincipalKind(b)
	return nil
}

// AuthType is how a user delegation was obtained.
type AuthType string

// Delegation auth types.
const (
	AuthOAuth2  AuthType = "oauth2"
	AuthSAML    AuthType = "saml"
	AuthOIDC    AuthType = "oidc"
	AuthService AuthType = "service"
)

// authTypes returns the four delegation auth types.
func authTypes() []AuthType { return []AuthType{AuthOAuth2, AuthSAML, AuthOIDC, AuthService} }

// UnmarshalText accepts exactly the four auth types.
func (a *AuthType) UnmarshalText(b []byte) error {
	if err := enumText("auth_type", authTypes(), AuthType(b)); err != nil {
		return err
	}
	*a = AuthType(b)
	return nil
}

// Lifecycle is an agent's lifecycle state. Only an active agent runs.
type Lifecycle string

// Agent lifecycle states.
const (
	LifecycleDraft      Lifecycle = "draft"
	LifecycleActive     Lifecycle = "active"
	LifecycleSuspended  Lifecycle = "suspended"
	LifecycleDeprecated Lifecycle = "deprecated"
	LifecycleRetired    Lifecycle = "retired"
)

// lifecycles returns the agent lifecycle states.
func lifecycles() []Lifecycle {
	return []Lifecycle{LifecycleDraft, LifecycleActive, LifecycleSuspended, LifecycleDeprecated, LifecycleRetired}
}

// UnmarshalText accepts exactly the lifecycle states.
func (l *Lifecycle) UnmarshalText(b []byte) error {
	if err := enumText("lifecycle", lifecycles(), Lifecycle(b)); err != nil {
		return err
	}
	*l = Lifecycle(b)
	return nil
}

// Bucket is a context token bucket of the compiled prompt.
type Bucket string

// Context buckets (compiled-context.v1 ContextBucket).
const (
	BucketBusiness Bucket = "business"
	BucketPolicy   Bucket = "policy"
	BucketTool     Bucket = "tool"
	BucketEvidence Bucket = "evidence"
	BucketMemory   Bucket = "memory"
	BucketSession  Bucket = "session"
)

// Buckets returns the six context buckets in the upstream enum order.
func Buckets() []Bucket {
	return []Bucket{BucketBusiness, BucketPolicy, BucketTool, BucketEvidence, BucketMemory, BucketSession}
}

// Valid reports whether b is one of the six buckets.
func (b Bucket) Valid() bool { return enumText("bucket", Buckets(), b) == nil }
