package packref

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := []struct {
		in   string
		want Ref
	}{
		{"ctxpack.support@5.2.0", Ref{"ctxpack.support", 5, 2, 0}},
		{"decision-catalog.support@2.1.0", Ref{"decision-catalog.support", 2, 1, 0}},
		{"ns:pack_1@0.0.1", Ref{"ns:pack_1", 0, 0, 1}},
		{"a@10.20.30", Ref{"a", 10, 20, 30}},
	}
	for _, tc := range good {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("String() = %q, want %q", got.String(), tc.in)
		}
	}
	if v := (Ref{"a", 1, 2, 3}).Version(); v != "1.2.3" {
		t.Errorf("Version() = %q", v)
	}
	bad := []string{
		"", "ctxpack.support", "ctxpack.support@", "@1.0.0", "ctxpack.support@latest",
		"ctxpack.support@1.0", "ctxpack.support@1", "ctxpack.support@^1.0.0", "ctxpack.support@~1.0.0",
		"ctxpack.support@>=1.0.0", "ctxpack.support@1.0.x", "ctxpack.support@1.0.0-rc.1",
		"ctxpack.support@1.0.0+build.5", "ctxpack.support@01.0.0", "ctxpack support@1.0.0",
		"ctx/pack@1.0.0", "a@b@1.0.0", "a@1.0.0 ", "a@99999999999999999999.0.0", strings.Repeat("a", 300) + "@1.0.0",
		"a@1..0", "a@1.0.0.0",
	}
	for _, in := range bad {
		if _, err := Parse(in); !errors.Is(err, ErrUnpinned) {
			t.Errorf("Parse(%q) = %v, want ErrUnpinned", in, err)
		}
	}
	// A long ref is not echoed in the message, nor a ref that holds a
	// secret (a key pasted where a ref belongs).
	_, err := Parse(strings.Repeat("x", 100) + "@1")
	if strings.Contains(err.Error(), strings.Repeat("x", 100)) {
		t.Errorf("long ref echoed: %v", err)
	}
	const key = "sk_live_51HyQ2mPACKREFsecret00001"
	for _, in := range []string{"ctxpack.support@" + key, key + "@1.0", "ctxpack.support@1.0.0 Bearer " + key} {
		if _, err := Parse(in); err == nil || strings.Contains(err.Error(), key) {
			t.Errorf("Parse(a ref holding a key) = %v; want an error that does not echo it", err)
		}
	}
}

// parseSplit is Parse as it was, reading the version with strings.Split:
// FuzzParse holds Parse (which reads it without Split's slice) to it.
func parseSplit(s string) (Ref, error) {
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
	parts := strings.Split(ver, ".")
	if len(parts) != 3 {
		return Ref{}, fmt.Errorf("%w: version in %s must be MAJOR.MINOR.PATCH (no ranges, tags, prereleases or build metadata)", ErrUnpinned, quote(s))
	}
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

func FuzzParse(f *testing.F) {
	for _, s := range []string{"ctxpack.support@5.2.0", "a@1.0", "a@latest", "a@1.0.0-rc", "ns:p_1@0.0.0",
		"a@1..2", "a@.1.2", "a@1.2.", "a@..", "a@1.2.3.4", "a@01.2.3", "a@1.02.3", "a@99999999999999999999.0.0", "a@18446744073709551615.0.0", "a@1.2.3@4", "a@١.2.3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if wr, werr := parseSplit(s); r != wr || fmt.Sprint(err) != fmt.Sprint(werr) {
			t.Fatalf("Parse(%q) = %+v, %v; with strings.Split %+v, %v", s, r, err, wr, werr)
		}
		if err != nil {
			if !errors.Is(err, ErrUnpinned) {
				t.Fatalf("error does not wrap ErrUnpinned: %v", err)
			}
			return
		}
		if r.String() != s {
			t.Fatalf("accepted %q but canonical form is %q", s, r.String())
		}
	})
}
