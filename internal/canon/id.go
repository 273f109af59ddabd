package canon

import (
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
	if !validPrefix(prefix) {
		return "", fmt.Errorf("canon: invalid id prefix %q", prefix)
	}
	bp := digestBufs.Get().(*[]byte)
	buf := append(append((*bp)[:0], prefix...), 0)
	buf, err := appendIDParts(buf, parts)
	if err != nil {
		digestBufs.Put(bp)
		return "", err
	}
	id := sumID(prefix, buf)
	if cap(buf) <= maxPooledBuf {
		*bp = buf
		digestBufs.Put(bp)
	}
	return id, nil
}

// HasPrefix reports whether id has the form "<prefix>_<something>".
func HasPrefix(id, prefix string) bool {
	return len(id) > len(prefix)+1 && strings.HasPrefix(id, prefix) && id[len(prefix)] == '_'
}
