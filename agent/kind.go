package agent

import (
	"encoding/json"
	"slices"
	"strings"
)

// Kind names a backend: lowercase ASCII, ^[a-z][a-z0-9_]*$, a stable
// identifier ("codex", "claude_code"), not a display name. Build one with
// NewKind, or check a literal with Validate.
type Kind string

// The kinds of the built-in backends.
const (
	KindCodex      Kind = "codex"
	KindClaudeCode Kind = "claude_code"
)

// NewKind validates s as a Kind (ErrInvalidAgentKind, naming the broken
// rule and never echoing s).
func NewKind(s string) (Kind, error) {
	k := Kind(s)
	if err := k.Validate(); err != nil {
		return "", err
	}
	return k, nil
}

// Validate reports whether k follows the naming rule.
func (k Kind) Validate() error {
	s := string(k)
	if s == "" {
		return invalidKind("agent kind must not be empty")
	}
	if s[0] < 'a' || s[0] > 'z' {
		return invalidKind("agent kind must start with a lowercase ASCII letter")
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return invalidKind("agent kind must match ^[a-z][a-z0-9_]*$")
		}
	}
	return nil
}

// String returns the kind's id.
func (k Kind) String() string { return string(k) }

// The standard capability ids. Every backend advertises CapRun and
// CapEvents; a backend that streams live also CapEventsLive. Where a
// capability is also an extension key (the request's Extensions), the two
// are the same string.
const (
	CapRun             = "agent_api.run"
	CapEvents          = "agent_api.events"
	CapEventsLive      = "agent_api.events.live"
	CapCancel          = "agent_api.control.cancel.v1"
	CapToolsStructured = "agent_api.tools.structured.v1"
	CapToolResults     = "agent_api.tools.results.v1"
	CapFinalText       = "agent_api.artifacts.final_text.v1"
	CapSessionHandle   = "agent_api.session.handle.v1"
	CapSessionResume   = "agent_api.session.resume.v1"
	CapSessionFork     = "agent_api.session.fork.v1"
	CapModel           = "agent_api.config.model.v1"
	CapAddDirs         = "agent_api.exec.add_dirs.v1"
	CapNonInteractive  = "agent_api.exec.non_interactive"
	CapExternalSandbox = "agent_api.exec.external_sandbox.v1"
)

// Capabilities is the set of capability ids a backend advertises. The zero
// value is the empty set; a Capabilities is immutable once built.
type Capabilities struct{ ids []string }

// NewCapabilities returns the set of ids (duplicates and empty ids
// dropped).
func NewCapabilities(ids ...string) Capabilities {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return Capabilities{ids: slices.Compact(out)}
}

// Contains reports whether id is in the set.
func (c Capabilities) Contains(id string) bool {
	_, ok := slices.BinarySearch(c.ids, id)
	return ok
}

// IDs lists the set in sorted order (a copy).
func (c Capabilities) IDs() []string { return slices.Clone(c.ids) }

// With returns the set with ids added.
func (c Capabilities) With(ids ...string) Capabilities {
	return NewCapabilities(append(slices.Clone(c.ids), ids...)...)
}

// Len is the number of ids.
func (c Capabilities) Len() int { return len(c.ids) }

// String lists the ids, sorted, comma separated.
func (c Capabilities) String() string { return strings.Join(c.ids, ",") }

// MarshalJSON encodes the set as a sorted array.
func (c Capabilities) MarshalJSON() ([]byte, error) {
	if c.ids == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(c.ids)
}

// UnmarshalJSON decodes an array of ids.
func (c *Capabilities) UnmarshalJSON(b []byte) error {
	var ids []string
	if err := json.Unmarshal(b, &ids); err != nil {
		return err
	}
	*c = NewCapabilities(ids...)
	return nil
}
