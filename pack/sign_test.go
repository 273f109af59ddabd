package pack_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/pack/packtest"
	"github.com/contextos/contextos/runcontext"
)

var ctx = context.Background()

func keysFor(signers ...packtest.Signer) *runcontext.StaticKeys {
	m := map[string]ed25519.PublicKey{}
	for _, s := range signers {
		m[s.Kid] = s.Public()
	}
	return runcontext.NewStaticKeys(m)
}

func TestSignVerify(t *testing.T) {
	s := packtest.NewSigner(1)
	p := canonical(t)
	signed := s.Sign(t, p)
	if !bytes.HasSuffix(signed, []byte("}\n")) || bytes.Count(signed, []byte("\n")) != 1 {
		t.Errorf("signed file is not one canonical line: %q…", signed[:40])
	}
	v, err := pack.Verify(ctx, signed, keysFor(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := pack.ContentHash(p)
	if v.ContentHash != want || v.Kid != s.Kid || v.Ref.String() != "ctxpack.support@1.0.0" {
		t.Errorf("Verify = %+v", v)
	}
	// Deterministic: signing again gives the same bytes.
	if again := s.Sign(t, canonical(t)); !bytes.Equal(again, signed) {
		t.Error("signing is not deterministic")
	}
	// Without the trailing newline the file still verifies.
	if _, err := pack.Verify(ctx, bytes.TrimSuffix(signed, []byte("\n")), keysFor(s), nil); err != nil {
		t.Errorf("no trailing newline: %v", err)
	}
}

// A changed byte anywhere in a signed pack file is caught.
func TestVerifyCatchesEveryTamperedByte(t *testing.T) {
	s := packtest.NewSigner(1)
	signed := s.Sign(t, canonical(t))
	keys := keysFor(s)
	for i := range signed {
		for _, flip := range []byte{0x01, 0x20} {
			tampered := bytes.Clone(signed)
			tampered[i] ^= flip
			if tampered[i] == signed[i] {
				continue
			}
			if _, err := pack.Verify(ctx, tampered, keys, nil); !errors.Is(err, pack.ErrSignature) {
				t.Fatalf("byte %d (%q→%q) tampered, Verify = %v", i, signed[i], tampered[i], err)
			}
		}
	}
}

func TestVerifyRefusals(t *testing.T) {
	s, other := packtest.NewSigner(1), packtest.NewSigner(2)
	signed := s.Sign(t, canonical(t))
	otherSigned := other.Sign(t, canonical(t))
	// A signature by another kid the verifier trusts for a different key.
	impostor := packtest.Signer{Kid: s.Kid, Key: other.Key}
	impostorSigned := impostor.Sign(t, canonical(t))
	pretty := bytes.ReplaceAll(signed, []byte(`","`), []byte(`", "`))
	tests := []struct {
		name string
		data []byte
		keys pack.KeyResolver
		msg  string
	}{
		{"other kid", otherSigned, keysFor(s), "unknown key id"},
		{"wrong key for kid", impostorSigned, keysFor(s), "signature does not verify"},
		{"not canonical", pretty, keysFor(s), "not in canonical form"},
		{"not json", []byte("{"), keysFor(s), "not JSON"},
		{"unsigned pack", readFile(t, "ctxpack.support-1.0.0.json"), keysFor(s), "not in canonical form"},
		{"no keys", signed, nil, "no key resolver"},
		{"bad format", []byte(strings.Replace(string(signed), "contextos.signed_pack.v1", "contextos.signed_pack.v2", 1)), keysFor(s), "unknown signed pack format"},
		{"bad alg", []byte(strings.Replace(string(signed), `"alg":"Ed25519"`, `"alg":"Ed448"`, 1)), keysFor(s), "unsupported signature algorithm"},
	}
	for _, tc := range tests {
		_, err := pack.Verify(ctx, tc.data, tc.keys, nil)
		if !errors.Is(err, pack.ErrSignature) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: Verify = %v, want ErrSignature with %q", tc.name, err, tc.msg)
		}
	}
	if _, err := pack.Sign(canonical(t), s.Kid, ed25519.PrivateKey{1, 2}, nil); !errors.Is(err, pack.ErrSignature) {
		t.Errorf("Sign with short key: %v", err)
	}
	bad := mutated(t, func(p *pack.Pack) { p.EvaluationLayer.ReleaseGates = nil })
	if _, err := pack.Sign(bad, s.Kid, s.Key, nil); !errors.Is(err, pack.ErrInvalid) {
		t.Errorf("Sign of invalid pack: %v", err)
	}
	if got := pack.KeyID(s.Public()); got != s.Kid || !strings.HasPrefix(got, "kid_") || len(got) != 20 {
		t.Errorf("KeyID = %q", got)
	}
}
