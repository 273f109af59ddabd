package runcontext

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/problem"
)

// KeyResolver returns the Ed25519 public key for a key id. Implementations
// must be safe for concurrent use and return an error wrapping ErrUnknownKey
// for a kid they do not know (and nothing else for that case). A resolver
// may block (a JWKS fetch, say) and must honour ctx.
type KeyResolver interface {
	PublicKey(ctx context.Context, kid string) (ed25519.PublicKey, error)
}

// StaticKeys is an in-memory KeyResolver, safe for concurrent use.
type StaticKeys struct {
	mu   sync.RWMutex
	keys map[string]ed25519.PublicKey
}

var _ KeyResolver = (*StaticKeys)(nil)

// NewStaticKeys returns a resolver holding a copy of keys.
func NewStaticKeys(keys map[string]ed25519.PublicKey) *StaticKeys {
	s := &StaticKeys{keys: make(map[string]ed25519.PublicKey, len(keys))}
	for kid, k := range keys {
		s.keys[kid] = append(ed25519.PublicKey(nil), k...)
	}
	return s
}

// Add registers (or replaces) the key for kid.
func (s *StaticKeys) Add(kid string, key ed25519.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = map[string]ed25519.PublicKey{}
	}
	s.keys[kid] = append(ed25519.PublicKey(nil), key...)
}

// PublicKey implements KeyResolver.
func (s *StaticKeys) PublicKey(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keys[kid]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownKey, problem.Clip(kid))
	}
	return append(ed25519.PublicKey(nil), k...), nil
}

// ClaimError is an identity claim verification failure. Field names the
// claim member at fault ("identity_claim" when it is missing, "sig", "kid",
// "exp", "run_id"…), which is what callers branch on; Reason says why in
// words ("missing", "expired", "does not match the run"…). It matches
// ErrClaim and wraps the cause.
type ClaimError struct {
	Field  string
	Reason string
	Err    error
}

func (e *ClaimError) Error() string {
	return "runcontext: identity claim rejected: " + e.Field + ": " + e.Reason
}

// Is matches ErrClaim.
func (e *ClaimError) Is(target error) bool { return target == ErrClaim }

// Unwrap returns the cause, if any.
func (e *ClaimError) Unwrap() error { return e.Err }

// Reasons a claim is rejected, in ClaimError.Reason.
const (
	reasonMissing     = "missing"
	reasonVersion     = "unsupported version"
	reasonHash        = "claim_hash does not match the claim"
	reasonSignature   = "signature does not verify"
	reasonUnknownKey  = "unknown key id"
	reasonNotYetValid = "not yet valid"
	reasonExpired     = "expired"
	reasonMismatch    = "does not match the run"
)

// ClaimHash returns the canonical hash of c: the digest of its canonical
// JSON without claim_hash and sig.
func ClaimHash(c *IdentityClaim) (string, error) {
	return canon.DigestExcluding(c, []string{"claim_hash"}, []string{"sig"})
}

// SignClaim sets c.Kid, c.Version (when empty), c.ClaimHash and c.Sig, the
// Ed25519 signature of the claim hash under key.
func SignClaim(c *IdentityClaim, kid string, key ed25519.PrivateKey) error {
	if len(key) != ed25519.PrivateKeySize {
		return &ClaimError{Field: "kid", Reason: "signing key is not an Ed25519 private key"}
	}
	if c.Version == "" {
		c.Version = ClaimVersion
	}
	c.Kid = kid
	h, err := ClaimHash(c)
	if err != nil {
		return &ClaimError{Field: "claim_hash", Reason: "claim cannot be canonicalized", Err: err}
	}
	c.ClaimHash = h
	c.Sig = base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, []byte(h)))
	return nil
}

// ClaimExpectations are what a claim must match: the run it is for and the
// time to check it at (from the runtime's injected clock).
type ClaimExpectations struct {
	Now      time.Time
	RunID    string
	TenantID string
	AgentURN string
	// SessionID is the run's session ("" for an ephemeral run). A claim
	// bound to a session (its session_id set) must name this one; a claim
	// without session_id is a run claim and fits any session.
	SessionID string
	// UserID, when set, is the user the run acts for: a user principal in
	// the claim's principal_chain must be that user (a claim minted for one
	// user's run does not authorize another user's).
	UserID string
	// Audience, when set, must equal the claim's aud.
	Audience string
	// Leeway tolerates clock skew on nbf and exp. Default: none.
	Leeway time.Duration
}

// VerifyClaim checks c: version ctxid/1; claim_hash recomputed; an Ed25519
// signature by the key that resolver returns for c.Kid; nbf ≤ now < exp;
// sub equal to the agent URN; run_id and tenant_id equal to the run's; a
// session-bound claim's session_id equal to the run's session; aud equal
// to the expected audience when one is expected; every principal of the
// claim's chain in the run's tenant, and its user principals the run's
// user when one is expected. The first failure is returned as a
// *ClaimError; no token or key material is ever put in it. A resolver
// failure other than an unknown kid (a cancelled context, an unreachable
// key service) is returned wrapped, not as a *ClaimError: it says nothing
// about the claim, and the caller fails closed on it all the same.
func VerifyClaim(ctx context.Context, c *IdentityClaim, resolver KeyResolver, want ClaimExpectations) error {
	if c == nil {
		return &ClaimError{Field: "identity_claim", Reason: reasonMissing}
	}
	if c.Version != ClaimVersion {
		return &ClaimError{Field: "version", Reason: reasonVersion}
	}
	h, err := ClaimHash(c)
	if err != nil || h != c.ClaimHash {
		return &ClaimError{Field: "claim_hash", Reason: reasonHash, Err: err}
	}
	sig, err := base64.RawURLEncoding.DecodeString(c.Sig)
	if c.Sig == "" || err != nil || len(sig) != ed25519.SignatureSize {
		return &ClaimError{Field: "sig", Reason: reasonSignature}
	}
	if resolver == nil {
		return &ClaimError{Field: "kid", Reason: reasonUnknownKey, Err: ErrUnknownKey}
	}
	pub, err := resolver.PublicKey(ctx, c.Kid)
	if err != nil {
		if errors.Is(err, ErrUnknownKey) {
			return &ClaimError{Field: "kid", Reason: reasonUnknownKey, Err: err}
		}
		return fmt.Errorf("runcontext: resolve key for identity claim: %w", err)
	}
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, []byte(c.ClaimHash), sig) {
		return &ClaimError{Field: "sig", Reason: reasonSignature}
	}
	now := want.Now.Unix()
	leeway := int64(want.Leeway / time.Second)
	if now+leeway < c.Nbf {
		return &ClaimError{Field: "nbf", Reason: reasonNotYetValid}
	}
	if now-leeway >= c.Exp {
		return &ClaimError{Field: "exp", Reason: reasonExpired}
	}
	for _, m := range []struct{ field, got, want string }{
		{"sub", c.Sub, want.AgentURN},
		{"run_id", c.RunID, want.RunID},
		{"tenant_id", c.TenantID, want.TenantID},
	} {
		if m.got != m.want {
			return &ClaimError{Field: m.field, Reason: reasonMismatch}
		}
	}
	if c.SessionID != "" && c.SessionID != want.SessionID {
		return &ClaimError{Field: "session_id", Reason: reasonMismatch}
	}
	if want.Audience != "" && c.Aud != want.Audience {
		return &ClaimError{Field: "aud", Reason: reasonMismatch}
	}
	for i, p := range c.PrincipalChain {
		if p.TenantID != "" && p.TenantID != want.TenantID {
			return &ClaimError{Field: fmt.Sprintf("principal_chain[%d].tenant_id", i), Reason: reasonMismatch}
		}
		if want.UserID != "" && p.Kind == PrincipalUser && p.ID != want.UserID {
			return &ClaimError{Field: fmt.Sprintf("principal_chain[%d].id", i), Reason: reasonMismatch}
		}
	}
	return nil
}

// VerifyRunClaim verifies the identity claim of rc against rc itself: its
// run, tenant, agent URN, session and user, at now. A nil rc or a run
// without a claim is a *ClaimError (identity_claim missing).
func VerifyRunClaim(ctx context.Context, rc *RunContext, resolver KeyResolver, now time.Time, leeway time.Duration) error {
	if rc == nil {
		return &ClaimError{Field: "identity_claim", Reason: reasonMissing}
	}
	return VerifyClaim(ctx, rc.Agent.IdentityClaim, resolver, ClaimExpectations{
		Now: now, RunID: rc.RunID, TenantID: rc.TenantID, AgentURN: rc.Agent.AgentURN,
		SessionID: rc.SessionID, UserID: rc.User.UserID, Leeway: leeway,
	})
}
