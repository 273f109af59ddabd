package pack

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/contextos/contextos/internal/sortedkeys"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/runcontext"
)

// signedFormat is the format tag of a signed pack file.
const signedFormat = "contextos.signed_pack.v1"

// sigAlg is the only signature algorithm.
const sigAlg = "Ed25519"

// KeyResolver resolves an issuer's public key by key id. It is
// runcontext's resolver interface: one implementation serves identity
// claims and packs (runcontext.StaticKeys is the in-memory one).
type KeyResolver = runcontext.KeyResolver

// SignedPack is the signed pack file (see the package documentation for
// its exact byte format).
type SignedPack struct {
	Format      string          `json:"format" jsonschema:"required"`
	Pack        json.RawMessage `json:"pack" jsonschema:"required"`
	ContentHash string          `json:"content_hash" jsonschema:"required"`
	Signature   Signature       `json:"signature" jsonschema:"required"`
}

// Signature is an Ed25519 signature by Kid over the content hash string.
type Signature struct {
	Kid   string `json:"kid" jsonschema:"required"`
	Alg   string `json:"alg" jsonschema:"required"`
	Value string `json:"value" jsonschema:"required"`
}

// KeyID derives the key id of an Ed25519 public key:
// "kid_" + the first 16 hex digits of its SHA-256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "kid_" + hex.EncodeToString(sum[:8])
}

// Sign validates p (every gate must pass: only a valid pack is signed) and
// returns the signed pack file, canonical JSON followed by a newline. opts
// tunes the validation; it may be nil.
func Sign(p *Pack, kid string, key ed25519.PrivateKey, opts *ValidateOptions) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: signing key is not an Ed25519 private key", ErrSignature)
	}
	if kid == "" {
		return nil, fmt.Errorf("%w: key id is empty", ErrSignature)
	}
	if err := Validate(p, opts); err != nil {
		return nil, err
	}
	body, err := canon.JSON(p)
	if err != nil {
		return nil, fmt.Errorf("pack: canonicalize: %w", err)
	}
	hash := canon.DigestBytes(body)
	sp := SignedPack{
		Format:      signedFormat,
		Pack:        body,
		ContentHash: hash,
		Signature:   Signature{Kid: kid, Alg: sigAlg, Value: base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, []byte(hash)))},
	}
	out, err := canon.JSON(sp)
	if err != nil {
		return nil, fmt.Errorf("pack: canonicalize signed file: %w", err)
	}
	return append(out, '\n'), nil
}

// Verified is a pack whose signature and content verified.
type Verified struct {
	Pack        *Pack
	Ref         Ref
	ContentHash string
	Kid         string
}

// maxSignedBytes bounds a signed pack file.
const maxSignedBytes = MaxDocumentBytes + 4096

// Verify checks a signed pack file: the file is canonical JSON in the
// signed format, the pack decodes strictly and re-encodes to exactly the
// signed bytes, the content hash matches, and the Ed25519 signature over it
// verifies with the key keys returns for the kid. Every failure wraps
// ErrSignature; a pack that decodes but fails a gate wraps ErrInvalid too.
// Verify does not check lifecycle state or compatibility. opts tunes the
// validation; it may be nil.
func Verify(ctx context.Context, data []byte, keys KeyResolver, opts *ValidateOptions) (*Verified, error) {
	if err := opts.Check(); err != nil {
		return nil, err // the host's options, not the signature, are at fault
	}
	sp, err := ParseSigned(data)
	if err != nil {
		return nil, err
	}
	p, err := Decode(sp.Pack)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	again, err := canon.JSON(p)
	if err != nil || !bytes.Equal(again, sp.Pack) {
		return nil, fmt.Errorf("%w: pack does not round-trip to the signed bytes", ErrSignature)
	}
	if canon.DigestBytes(sp.Pack) != sp.ContentHash {
		return nil, fmt.Errorf("%w: content hash does not match the pack", ErrSignature)
	}
	sig, err := base64.RawURLEncoding.DecodeString(sp.Signature.Value)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("%w: signature value is malformed", ErrSignature)
	}
	if keys == nil {
		return nil, fmt.Errorf("%w: no key resolver", ErrSignature)
	}
	pub, err := keys.PublicKey(ctx, sp.Signature.Kid)
	if err != nil {
		if errors.Is(err, runcontext.ErrUnknownKey) {
			return nil, fmt.Errorf("%w: unknown key id %q", ErrSignature, clip(sp.Signature.Kid))
		}
		return nil, fmt.Errorf("pack: resolve signing key: %w", err)
	}
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, []byte(sp.ContentHash), sig) {
		return nil, fmt.Errorf("%w: signature does not verify with key %q", ErrSignature, clip(sp.Signature.Kid))
	}
	ref, err := p.Ref()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	if err := Validate(p, opts); err != nil {
		return nil, fmt.Errorf("%w: signed pack fails validation: %w", ErrSignature, err)
	}
	return &Verified{Pack: p, Ref: ref, ContentHash: sp.ContentHash, Kid: sp.Signature.Kid}, nil
}

// ParseSigned checks the structure of a signed pack file (canonical form,
// format, algorithm, hash syntax) without checking the signature.
func ParseSigned(data []byte) (*SignedPack, error) {
	if len(data) > maxSignedBytes {
		return nil, fmt.Errorf("%w: signed pack file is larger than %d bytes", ErrSignature, maxSignedBytes)
	}
	body := bytes.TrimSuffix(data, []byte("\n"))
	c, err := canon.JSON(json.RawMessage(body))
	if err != nil {
		return nil, fmt.Errorf("%w: signed pack file is not JSON", ErrSignature)
	}
	if !bytes.Equal(c, body) {
		return nil, fmt.Errorf("%w: signed pack file is not in canonical form (was it edited?)", ErrSignature)
	}
	// The envelope's members are matched exactly (map keys are
	// case-sensitive) without decoding the pack a second time.
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		return nil, fmt.Errorf("%w: signed pack file is not an object", ErrSignature)
	}
	for _, k := range sortedkeys.Of(members) {
		switch k {
		case "format", "pack", "content_hash", "signature":
		default:
			return nil, fmt.Errorf("%w: signed pack file has unknown member %q", ErrSignature, clip(k))
		}
	}
	var sp SignedPack
	sp.Pack = members["pack"]
	if json.Unmarshal(members["format"], &sp.Format) != nil || json.Unmarshal(members["content_hash"], &sp.ContentHash) != nil {
		return nil, fmt.Errorf("%w: signed pack file is malformed", ErrSignature)
	}
	if probs, _ := wire.Decode(members["signature"], &sp.Signature); len(probs) > 0 {
		return nil, fmt.Errorf("%w: signature is malformed: %s: %s", ErrSignature, probs[0].Path, probs[0].Message)
	}
	switch {
	case sp.Format != signedFormat:
		return nil, fmt.Errorf("%w: unknown signed pack format %q", ErrSignature, clip(sp.Format))
	case sp.Signature.Alg != sigAlg:
		return nil, fmt.Errorf("%w: unsupported signature algorithm %q", ErrSignature, clip(sp.Signature.Alg))
	case sp.Signature.Kid == "":
		return nil, fmt.Errorf("%w: signature has no key id", ErrSignature)
	case !canon.IsDigest(sp.ContentHash):
		return nil, fmt.Errorf("%w: content_hash is not sha256:<64 hex>", ErrSignature)
	case len(sp.Pack) == 0 || sp.Pack[0] != '{':
		return nil, fmt.Errorf("%w: signed pack file has no pack object", ErrSignature)
	}
	return &sp, nil
}
