package problem_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/schemas"
)

// One type: errors.As with any package's ValidationError finds any of
// them, and errors.Is matches only the sentinel the error was made with.
func TestOneTypeFourSentinels(t *testing.T) {
	t.Parallel()
	sentinels := []error{runcontext.ErrInvalid, pack.ErrInvalid, decision.ErrInvalid, schemas.ErrInvalid}
	for i, s := range sentinels {
		t.Run(s.Error(), func(t *testing.T) {
			t.Parallel()
			err := fmt.Errorf("wrapped: %w", problem.New(s, "x", []problem.Problem{{Code: "c", Path: "p", Message: "m"}}))
			for j, o := range sentinels {
				if got := errors.Is(err, o); got != (i == j) {
					t.Errorf("errors.Is(%v) = %v", o, got)
				}
			}
			var rve *runcontext.ValidationError
			var pve *pack.ValidationError
			var dve *decision.ValidationError
			var sve *schemas.ValidationError
			if !errors.As(err, &rve) || !errors.As(err, &pve) || !errors.As(err, &dve) || !errors.As(err, &sve) {
				t.Error("errors.As misses a package's ValidationError")
			}
		})
	}
}

func TestHasAndMessage(t *testing.T) {
	t.Parallel()
	ve := problem.New(pack.ErrInvalid, "pack: invalid", []problem.Problem{
		{Gate: "schema", Code: "required", Path: "", Message: "pack is nil"},
		{Code: "format", Path: "a.b", Message: "bad"},
	})
	tests := []struct {
		name string
		got  bool
		want bool
	}{
		{"Has present", ve.Has("format"), true},
		{"Has absent", ve.Has("enum"), false},
		{"HasAt right path", ve.HasAt("format", "a.b"), true},
		{"HasAt other path", ve.HasAt("format", "a"), false},
		{"HasAt document", ve.HasAt("required", ""), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	if diff := cmp.Diff("pack: invalid: schema: (document): pack is nil; a.b: bad", ve.Error()); diff != "" {
		t.Errorf("Error() (-want +got):\n%s", diff)
	}
}

// Causes unwrap; nil causes are dropped.
func TestUnwrapCauses(t *testing.T) {
	t.Parallel()
	err := problem.New(decision.ErrInvalid, "x", nil, nil, context.Canceled)
	if !errors.Is(err, context.Canceled) || len(err.Unwrap()) != 1 {
		t.Errorf("causes = %v", err.Unwrap())
	}
	if problem.New(nil, "x", nil).Is(nil) {
		t.Error("an error without sentinel matches nil")
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 63) + "é" + "tail" // é straddles byte 64
	tests := []struct {
		name, in, want string
	}{
		{"short", "abc", "abc"},
		{"exactly 64", strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{"ascii cut", strings.Repeat("a", 70), strings.Repeat("a", 64) + "…"},
		{"cut at a rune boundary", long, strings.Repeat("a", 63) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := problem.Clip(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Clip (-want +got):\n%s", diff)
			}
			if !utf8.ValidString(got) {
				t.Errorf("Clip = %q is not valid UTF-8", got)
			}
		})
	}
}

// Quote redacts a credential or card number before it cuts: a key cut to
// 64 bytes is a prefix no detector knows, so the cut alone would leave
// most of it in the message.
func TestQuoteRedactsBeforeItClips(t *testing.T) {
	sendgrid := "SG." + strings.Repeat("a1B2", 5) + "xy." + strings.Repeat("Q9w8", 10) + "zzz"
	for _, c := range []struct{ in, leak, want string }{
		{"key " + sendgrid, sendgrid[:16], "key [REDACTED]"},
		{"card 4111111111111111", "4111111111111111", "card [REDACTED]"},
		{"support@1.2.0", "", "support@1.2.0"},
		{strings.Repeat("x", 70), "", strings.Repeat("x", 64) + "…"},
	} {
		got := problem.Quote(c.in)
		if got != c.want || c.leak != "" && strings.Contains(got, c.leak) {
			t.Errorf("Quote(%.20q…) = %q, want %q", c.in, got, c.want)
		}
		if q := problem.Quiet(c.in); c.leak != "" && strings.Contains(q, c.leak) {
			t.Errorf("Quiet(%.20q…) = %q", c.in, q)
		}
	}
}
