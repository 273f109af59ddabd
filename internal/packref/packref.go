// Package packref owns the grammar of a pinned Context Pack reference,
// "pack_id@MAJOR.MINOR.PATCH". runcontext validates request refs with it
// and pack builds its Ref type on it.
package packref

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/contextos/contextos/internal/sensitive"
)

// ErrUnpinned reports a ref without an exact MAJOR.MINOR.PATCH version: no
// version, a range, "latest", a prerelease or build metadata.
var ErrUnpinned = errors.New("pack ref is not pinned to pack_id@MAJOR.MINOR.PATCH")

// Ref is a parsed, pinned pack reference.
type Ref struct {
	ID                  string
	Major, Minor, Patch uint64
}

// String returns the ref in its canonical form.
func (r Ref) String() string {
	return r.ID + "@" + strconv.FormatUint(r.Major, 10) + "." + strconv.FormatUint(r.Minor, 10) + "." + strconv.FormatUint(r.Patch, 10)
}

// Version returns "MAJOR.MINOR.PATCH".
func (r Ref) Version() string {
	s := r.String()
	return s[len(r.ID)+1:]
}

// MaxLen bounds a ref's length; longer input is refused before parsing.
const MaxLen = 256

// Parse parses s, which must match ^[A-Za-z0-9_.:-]+@[0-9]+\.[0-9]+\.[0-9]+$
// with numeric parts that fit in 64 bits and have no leading zeros (as in
// semantic versioning). Every failure wraps ErrUnpinned; the message quotes
// the ref only when it is short and printable.
func Parse(s string) (Ref, error) {
	if len(s) > MaxLen {
		return Ref{}, fmt.Errorf("%w: ref longer than %d bytes", ErrUnpinned, MaxLen)
	}
	id, ver, ok := strings.Cut(s, "@")
	if !ok {
		return Ref{}, fmt.Errorf("%w: %s has no @version", ErrUnpinned, quote(s))
	}
	if id == "" {
		return Ref{}, fmt.Errorf("%w: %s has an empty pack id", ErrUnpinned, quote(s))
	}
	for i := 0; i < len(id); i++ {
		if !idByte(id[i]) {
			return Ref{}, fmt.Errorf("%w: pack id in %s may contain only letters, digits and _ . : -", ErrUnpinned, quote(s))
		}
	}
	// The three parts, as strings.Split(ver, ".") would give them, without
	// its slice.
	var parts [3]string
	if strings.Count(ver, ".") != 2 {
		return Ref{}, fmt.Errorf("%w: version in %s must be MAJOR.MINOR.PATCH (no ranges, tags, prereleases or build metadata)", ErrUnpinned, quote(s))
	}
	parts[0], ver, _ = strings.Cut(ver, ".")
	parts[1], parts[2], _ = strings.Cut(ver, ".")
	var nums [3]uint64
	for i, p := range parts {
		if p == "" || strings.TrimLeft(p, "0123456789") != "" {
			return Ref{}, fmt.Errorf("%w: version in %s must be MAJOR.MINOR.PATCH (no ranges, tags, prereleases or build metadata)", ErrUnpinned, quote(s))
		}
		if len(p) > 1 && p[0] == '0' {
			return Ref{}, fmt.Errorf("%w: version part %q in %s has a leading zero", ErrUnpinned, p, quote(s))
		}
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return Ref{}, fmt.Errorf("%w: version part in %s is out of range", ErrUnpinned, quote(s))
		}
		nums[i] = n
	}
	return Ref{ID: id, Major: nums[0], Minor: nums[1], Patch: nums[2]}, nil
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-'
}

// Show is s as an error may name it: s itself when it is a pack ref or id
// an operator can read back — at most 128 bytes of the ref grammar's
// characters (letters, digits, _ . : - and @) in which the secret
// detectors find nothing, such as support@1.2.0 — and otherwise a
// placeholder that names no part of it (an error never echoes a value
// that may be a credential pasted into the wrong member).
func Show(s string) string {
	if s == "" || len(s) > 128 {
		return withheld
	}
	for i := 0; i < len(s); i++ {
		if !idByte(s[i]) && s[i] != '@' {
			return withheld
		}
	}
	if _, found := sensitive.Detect(s, sensitive.Secrets); found {
		return withheld
	}
	return s
}

const withheld = "(a ref not shown: it is not a pack ref or looks like a secret)"

// quote is s quoted for an error message, or "ref" when it is too long to
// quote or holds a secret (an error never echoes one).
func quote(s string) string {
	if len(s) > 80 {
		return "ref"
	}
	if _, found := sensitive.Detect(s, sensitive.Secrets); found {
		return "ref"
	}
	return strconv.Quote(s)
}
