package pack

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/contextos/contextos/internal/packref"
)

// Ref is a pinned pack reference, pack_id@MAJOR.MINOR.PATCH.
type Ref struct {
	ID                  string
	Major, Minor, Patch uint64
}

// ParseRef parses a pinned ref. No version, a range, "latest", a
// prerelease or build metadata are refused with ErrUnpinnedRef.
func ParseRef(s string) (Ref, error) {
	r, err := packref.Parse(s)
	if err != nil {
		return Ref{}, fmt.Errorf("%w: %s", ErrUnpinnedRef, strings.TrimPrefix(err.Error(), packref.ErrUnpinned.Error()+": "))
	}
	return Ref{ID: r.ID, Major: r.Major, Minor: r.Minor, Patch: r.Patch}, nil
}

// MustParseRef is ParseRef for refs known at compile time; it panics on a
// bad ref.
func MustParseRef(s string) Ref {
	r, err := ParseRef(s)
	if err != nil {
		panic(err)
	}
	return r
}

// String returns "pack_id@MAJOR.MINOR.PATCH".
func (r Ref) String() string { return packref.Ref(r).String() }

// Version returns "MAJOR.MINOR.PATCH".
func (r Ref) Version() string { return packref.Ref(r).Version() }

// Compare orders refs of the same pack by version (-1, 0, +1); refs of
// different packs order by id.
func (r Ref) Compare(o Ref) int {
	if c := strings.Compare(r.ID, o.ID); c != 0 {
		return c
	}
	for _, d := range [...][2]uint64{{r.Major, o.Major}, {r.Minor, o.Minor}, {r.Patch, o.Patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// MarshalText writes the ref's string form.
func (r Ref) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText parses a pinned ref.
func (r *Ref) UnmarshalText(b []byte) error {
	v, err := ParseRef(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Ref returns the pack's own ref from pack_meta (pack_id@pack_version).
func (p *Pack) Ref() (Ref, error) {
	return ParseRef(p.PackMeta.PackID + "@" + p.PackMeta.PackVersion)
}

func semverOf(s string) (*semver.Version, error) { return semver.StrictNewVersion(s) }
