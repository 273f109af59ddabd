package pack

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
)

// KeyFile is the JSON form of an Ed25519 signing key written by
// `contextos pack keygen`: <kid>.key holds the private key (the 32-byte
// seed) and the public key; <kid>.pub holds only the public key. Keys are
// base64url without padding. The kid is KeyID of the public key.
type KeyFile struct {
	Kid        string `json:"kid"`
	Alg        string `json:"alg"`
	PublicKey  string `json:"public_key"`
	PrivateKey string `json:"private_key,omitempty"`
}

// GenerateKey creates a key pair from rand (crypto/rand when nil) and
// returns the private and public key files.
func GenerateKey(r io.Reader) (private, public KeyFile, err error) {
	if r == nil {
		r = rand.Reader
	}
	pub, priv, err := ed25519.GenerateKey(r)
	if err != nil {
		return KeyFile{}, KeyFile{}, fmt.Errorf("pack: generate key: %w", err)
	}
	kid := KeyID(pub)
	enc := base64.RawURLEncoding.EncodeToString
	public = KeyFile{Kid: kid, Alg: sigAlg, PublicKey: enc(pub)}
	private = public
	private.PrivateKey = enc(priv.Seed())
	return private, public, nil
}

// ParseKeyFile reads a key file. For a public key file, the private key is
// nil. The kid must be the KeyID of the public key, and a private key must
// match the public key.
func ParseKeyFile(data []byte) (kid string, pub ed25519.PublicKey, priv ed25519.PrivateKey, err error) {
	var kf KeyFile
	if err := json.Unmarshal(data, &kf); err != nil {
		return "", nil, nil, fmt.Errorf("pack: key file is not JSON")
	}
	if kf.Alg != sigAlg {
		return "", nil, nil, fmt.Errorf("pack: key file algorithm %q is not %s", clip(kf.Alg), sigAlg)
	}
	pb, err := base64.RawURLEncoding.DecodeString(kf.PublicKey)
	if err != nil || len(pb) != ed25519.PublicKeySize {
		return "", nil, nil, fmt.Errorf("pack: key file public_key is not an Ed25519 public key")
	}
	pub = ed25519.PublicKey(pb)
	if kf.Kid != KeyID(pub) {
		return "", nil, nil, fmt.Errorf("pack: key file kid %q does not match its public key", clip(kf.Kid))
	}
	if kf.PrivateKey != "" {
		seed, err := base64.RawURLEncoding.DecodeString(kf.PrivateKey)
		if err != nil || len(seed) != ed25519.SeedSize {
			return "", nil, nil, fmt.Errorf("pack: key file private_key is not an Ed25519 seed")
		}
		priv = ed25519.NewKeyFromSeed(seed)
		if !priv.Public().(ed25519.PublicKey).Equal(pub) {
			return "", nil, nil, fmt.Errorf("pack: key file private_key does not match its public_key")
		}
	}
	return kf.Kid, pub, priv, nil
}
