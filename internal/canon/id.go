package canon

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Prefixes of the identifiers the seeds name. Ids that replay must reproduce
// are derived from content with [ID]; the others come from an injected id
// source.
const (
	PrefixRun      = "run"
	PrefixRequest  = "req"
	PrefixPolicy   = "pol"
	PrefixToolCall = "tool"
	PrefixDecision = "dr"
	PrefixReplay   = "rp"
	PrefixIdem     = "ik"
)

// idHexLen is the number of hex digits after the prefix: 64 bits, as in the
// seed's run_a1b2c3d4e5f60718.
const idHexLen = 16

// ID derives a deterministic identifier "<prefix>_<16 lowercase hex>" from
// the canonical JSON of parts (taken together as one JSON array). The same
// prefix and parts always give the same id; parts differ in any way, the id
// differs with overwhelming probability. Parts must be canonicalizable; a
// value that is not (a NaN, say) is an error.
func ID(prefix string, parts ...any) (string, error) {
	if prefix == "" || strings.ContainsAny(prefix, "_ ") {
		return "", fmt.Errorf("canon: invalid id prefix %q", prefix)
	}
	if parts == nil {
		parts = []any{}
	}
	c, err := JSON(parts)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append([]byte(prefix+"\x00"), c...))
	return prefix + "_" + hex.EncodeToString(sum[:])[:idHexLen], nil
}

// HasPrefix reports whether id has the form "<prefix>_<something>".
func HasPrefix(id, prefix string) bool {
	return len(id) > len(prefix)+1 && strings.HasPrefix(id, prefix) && id[len(prefix)] == '_'
}
