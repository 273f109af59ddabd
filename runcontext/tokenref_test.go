package runcontext

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A token_ref names a secret in the host's store; a raw credential in it
// is refused, in the request and in the run context, at both token refs,
// with a typed error that names the member and never the value.
func TestTokenRefRefusesRawTokens(t *testing.T) {
	t.Parallel()
	jwt := "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c3JfNzcxIiwiZXhwIjoxOTAwMDAwMDAwfQ.c2lnbmF0dXJlLWJ5dGVzLWhlcmUtMTIzNDU2Nzg5MA"
	refused := []struct{ name, ref string }{
		{"bearer header", "Bearer ya29.a0AfH6SMBx3kQpZ7uVh2R9tLmNcW4eYd8s"},
		{"JWT", jwt},
		{"JWT with another header", "eyAiYWxnIjogIkVTMjU2IiB9.eyAic3ViIjogIngiIH0.c2ln"},
		{"GitHub token", "ghp_" + strings.Repeat("aB3", 12)},
		{"Stripe secret key", "sk_live_" + strings.Repeat("4eC39HqLyjWDarjtT1zdp7dc", 1)},
		{"API secret key", "sk-proj-Xy12Ab34Cd56Ef78Gh90"},
		{"AWS access key id", "AKIAIOSFODNN7EXAMPLE"},
		{"credentials in a URL", "vault://svc:hunter2hunter2@vault.internal/payments"},
		{"opaque access token", "ya29.a0AfH6SMBx3kQpZ7uVh2R9tLmNcW4eYd8sPq1Rz0Ab9"},
		{"opaque token alone", "Qm9vb0hvb0hvb0hvb0hvb0hvb0h2Z3ZnX2pLlMn0p9"},
		{"random 32-character key", "kQ3mZ8pR2vX7nL4tY9wB6cH1jF5sD0gK"},
	}
	accepted := []string{"", "tok_user_7a", "tok_agent_92", "vault://kv/data/payments/refund-agent#token",
		"arn:aws:secretsmanager:ap-south-1:123456789012:secret:PaymentsRefundToken-AbCdEf",
		"secret/payments.refund.ServiceAccountToken2026", "tok_3f2a9c1e5b7d4a60b8c2e1f09d7a6b5c4e3f2a1b",
		"projects/acme/secrets/refund-agent/versions/7", "projects/acme/secrets/RefundAgentServiceAccountToken2026/versions/7",
		"kv/PaymentsRefundServiceAccountTokenV2"}
	for _, tc := range refused {
		for _, at := range []string{"user.delegation.token_ref", "agent.token_ref"} {
			t.Run(tc.name+"/"+at, func(t *testing.T) {
				t.Parallel()
				rc, req := fixtureRunContext(t), fixtureRequest(t)
				if at == "agent.token_ref" {
					rc.Agent.TokenRef, req.Agent.TokenRef = tc.ref, tc.ref
				} else {
					rc.User.Delegation.TokenRef, req.User.Delegation.TokenRef = tc.ref, tc.ref
				}
				for kind, err := range map[string]error{"run context": rc.Validate(), "request": req.Validate()} {
					if !errors.Is(err, ErrRawToken) || !errors.Is(err, ErrInvalid) {
						t.Fatalf("%s: Validate = %v; want ErrRawToken", kind, err)
					}
					var ve *ValidationError
					errors.As(err, &ve)
					if len(ve.Problems) != 1 || ve.Problems[0].Path != at || ve.Problems[0].Code != CodeSecret {
						t.Errorf("%s: problems = %+v; want one secret problem at %s", kind, ve.Problems, at)
					}
					if strings.Contains(err.Error(), tc.ref) || strings.Contains(err.Error(), tc.ref[len(tc.ref)-12:]) {
						t.Errorf("%s: the error echoes the token: %v", kind, err)
					}
				}
				// Decoding refuses it too, without echoing it.
				b, err := json.Marshal(rc)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := DecodeRunContext(b); !errors.Is(err, ErrRawToken) || strings.Contains(err.Error(), tc.ref[len(tc.ref)-12:]) {
					t.Errorf("DecodeRunContext = %v", err)
				}
			})
		}
	}
	for _, ref := range accepted {
		t.Run("reference "+ref, func(t *testing.T) {
			t.Parallel()
			rc := fixtureRunContext(t)
			rc.User.Delegation.TokenRef, rc.Agent.TokenRef = ref, ref
			if err := rc.Validate(); err != nil {
				t.Errorf("Validate(token_ref %q) = %v", ref, err)
			}
		})
	}
}

// A run context that validates compiles: its budget allocates the
// session bucket, which holds the user message. One without bucket_tokens,
// or without a session allocation, is refused here, naming the member and
// the default allocation, instead of failing every compile.
func TestBudgetNeedsBucketTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		buckets map[Bucket]int
		want    []Problem
	}{
		{"none", nil, []Problem{{Path: "run_budget.bucket_tokens", Code: CodeRequired,
			Message: "is required: each context bucket's tokens are allocated from it, and the session bucket holds the user message (DefaultRunBudget allocates business 1500, policy 1800, tool 1500, evidence 3500, memory 1500, session 2200)"}}},
		{"empty", map[Bucket]int{}, []Problem{{Path: "run_budget.bucket_tokens", Code: CodeRequired,
			Message: "is required: each context bucket's tokens are allocated from it, and the session bucket holds the user message (DefaultRunBudget allocates business 1500, policy 1800, tool 1500, evidence 3500, memory 1500, session 2200)"}}},
		{"no session", map[Bucket]int{BucketPolicy: 1800, BucketTool: 1500}, []Problem{{Path: "run_budget.bucket_tokens.session", Code: CodeRange,
			Message: "must be > 0: the session bucket holds the user message, so a run without it cannot compile"}}},
		{"session zero", map[Bucket]int{BucketSession: 0, BucketTool: 1500}, []Problem{{Path: "run_budget.bucket_tokens.session", Code: CodeRange,
			Message: "must be > 0: the session bucket holds the user message, so a run without it cannot compile"}}},
		{"session only", map[Bucket]int{BucketSession: 2200}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rc := fixtureRunContext(t)
			rc.RunBudget.BucketTokens = tc.buckets
			if diff := cmp.Diff(tc.want, problemsOf(t, rc.Validate())); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
	// Materialize over a host budget without buckets refuses it too; the
	// default budget allocates every bucket.
	req, host := fixtureRequest(t), fixtureRunContext(t)
	host.RunBudget.BucketTokens = nil
	if _, err := Materialize(req, host, nil); !hasProblem(problemsOf(t, err), "run_budget.bucket_tokens", CodeRequired) {
		t.Errorf("Materialize over a budget without buckets = %v", err)
	}
	host.RunBudget = RunBudget{}
	if rc, err := Materialize(req, host, nil); err != nil || rc.RunBudget.BucketTokens[BucketSession] <= 0 {
		t.Errorf("Materialize with the default budget = %v, %v", rc, err)
	}
}

// FuzzTokenRef: any token_ref validates or is refused with a secret
// problem at its path, and the error never carries it.
func FuzzTokenRef(f *testing.F) {
	for _, s := range []string{"tok_user_7a", "Bearer abcdefgh12345678", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", "vault://kv/x#y", "\u00e9\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		rc := fixtureRunContext(t)
		rc.Agent.TokenRef = ref
		err := rc.Validate()
		if err == nil {
			return
		}
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("Validate = %v", err)
		}
		for _, p := range ve.Problems {
			if p.Path == "agent.token_ref" && p.Code != CodeSecret {
				t.Fatalf("problem %+v", p)
			}
		}
		if len(ref) >= 8 && strings.Contains(err.Error(), ref) {
			t.Fatalf("the error echoes the token_ref: %v", err)
		}
	})
}
