package pack_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextos/contextos/pack"
)

func TestKeyFiles(t *testing.T) {
	priv, pub, err := pack.GenerateKey(bytes.NewReader(make([]byte, 64)))
	if err != nil {
		t.Fatal(err)
	}
	if priv.Kid != pub.Kid || pub.PrivateKey != "" || priv.PrivateKey == "" {
		t.Fatalf("key files: %+v %+v", priv, pub)
	}
	pb, _ := json.Marshal(pub)
	kb, _ := json.Marshal(priv)
	kid, pk, sk, err := pack.ParseKeyFile(pb)
	if err != nil || kid != pub.Kid || sk != nil || len(pk) != 32 {
		t.Errorf("ParseKeyFile(pub) = %s %v %v", kid, sk, err)
	}
	kid, pk2, sk, err := pack.ParseKeyFile(kb)
	if err != nil || kid != priv.Kid || sk == nil || !pk2.Equal(pk) {
		t.Errorf("ParseKeyFile(priv) = %v", err)
	}
	// The signed pack verifies with the public key file's key.
	signed, err := pack.Sign(canonical(t), kid, sk, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pack.Verify(ctx, signed, keysFor(), nil); err == nil {
		t.Error("verified without the key")
	}
	bad := []string{`{`, `{"alg":"RSA"}`, `{"alg":"Ed25519","public_key":"xx"}`,
		strings.Replace(string(pb), pub.Kid, "kid_0000000000000000", 1),
		strings.Replace(string(kb), priv.PrivateKey, "AAAA", 1)}
	for _, b := range bad {
		if _, _, _, err := pack.ParseKeyFile([]byte(b)); err == nil {
			t.Errorf("ParseKeyFile(%.40s…) accepted", b)
		}
	}
}
