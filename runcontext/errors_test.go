package runcontext

import (
	"context"
	"errors"
	"testing"

	"github.com/contextos/contextos/internal/problem"
)

// Claim verification passes a resolver's failure through: a cancelled
// context is still context.Canceled, and it is not a claim rejection.
func TestVerifyClaimWrapsResolverCause(t *testing.T) {
	t.Parallel()
	rc := fixtureRunContext(t)
	rc.Agent.IdentityClaim = validClaim(rc)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := VerifyRunClaim(ctx, rc, testKeys(), testNow, 0)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrClaim) {
		t.Errorf("VerifyRunClaim(cancelled) = %v, want context.Canceled and not ErrClaim", err)
	}
}

// A validation error matches ErrInvalid, and the more specific sentinels
// and errors its problems imply, and no other package's ErrInvalid.
func TestValidationErrorMatches(t *testing.T) {
	t.Parallel()
	other := errors.New("other: invalid")
	tests := []struct {
		name            string
		probs           []Problem
		conflict, claim bool
		field           string
	}{
		{"format", []Problem{{Path: "run_id", Code: CodeFormat, Message: "m"}}, false, false, ""},
		{"conflict", []Problem{{Path: "tenant_id", Code: CodeConflict, Message: "m"}}, true, false, ""},
		{"claim conflict", []Problem{{Path: "agent.identity_claim.run_id", Code: CodeConflict, Message: "m"}}, true, true, "run_id"},
		{"claim missing", []Problem{{Path: "agent.identity_claim", Code: CodeRequired, Message: "m"}}, false, true, "identity_claim"},
		{"not a claim", []Problem{{Path: "agent.identity_claims", Code: CodeRequired, Message: "m"}}, false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := error(invalid(KindRunContext, tt.probs))
			if !errors.Is(err, ErrInvalid) || errors.Is(err, other) {
				t.Errorf("errors.Is(ErrInvalid) = %v", errors.Is(err, ErrInvalid))
			}
			if got := errors.Is(err, ErrConflict); got != tt.conflict {
				t.Errorf("errors.Is(ErrConflict) = %v, want %v", got, tt.conflict)
			}
			if got := errors.Is(err, ErrClaim); got != tt.claim {
				t.Errorf("errors.Is(ErrClaim) = %v, want %v", got, tt.claim)
			}
			var ce *ClaimError
			if got := errors.As(err, &ce); got != tt.claim || (got && ce.Field != tt.field) {
				t.Errorf("errors.As(*ClaimError) = %v %+v, want %v field %q", got, ce, tt.claim, tt.field)
			}
			var pe *problem.ValidationError
			if !errors.As(err, &pe) || !pe.HasAt(tt.probs[0].Code, tt.probs[0].Path) {
				t.Errorf("errors.As(*problem.ValidationError) does not find the problem")
			}
		})
	}
}
