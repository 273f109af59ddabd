package pack_test

import (
	"errors"
	"testing"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/pack/packtest"
)

// FuzzDecode: any input decodes or fails with a *ValidationError, never a
// panic; what decodes re-encodes and decodes again to the same content hash.
func FuzzDecode(f *testing.F) {
	f.Add(readFile(f, "ctxpack.support-1.0.0.json"))
	f.Add([]byte(`{"contract_meta":{},"pack_meta":{"pack_id":"..","pack_version":"1.0.0"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := pack.Decode(data)
		if err != nil {
			if !errors.Is(err, pack.ErrInvalid) {
				t.Fatalf("error is not ErrInvalid: %v", err)
			}
			return
		}
		h1, err := pack.ContentHash(p)
		if err != nil {
			return // non-finite numbers cannot be hashed; that is reported, not a crash
		}
		p2, err := pack.Decode(packtest.Bare(t, p))
		if err != nil {
			t.Fatalf("re-encoded pack does not decode: %v", err)
		}
		if h2, _ := pack.ContentHash(p2); h1 != h2 {
			t.Fatalf("content hash changed across a round trip")
		}
	})
}

// FuzzValidate: every gate runs on any decodable pack without panicking,
// and every problem names a known gate.
func FuzzValidate(f *testing.F) {
	f.Add(readFile(f, "ctxpack.support-1.0.0.json"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := pack.Decode(data)
		if err != nil {
			return
		}
		err = pack.Validate(p)
		if err == nil {
			return
		}
		ve, ok := err.(*pack.ValidationError)
		if !ok || len(ve.Problems) == 0 {
			t.Fatalf("Validate error is not a non-empty *ValidationError: %v", err)
		}
		for _, q := range ve.Problems {
			if !contains(pack.Gates(), q.Gate) || q.Code == "" {
				t.Fatalf("problem without a known gate or code: %+v", q)
			}
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// FuzzParseRef: refs either parse and print back exactly, or are refused
// with ErrUnpinnedRef.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"ctxpack.support@5.2.0", "ctxpack.support", "a@latest", "a@1.0.0+b", "a@01.0.0", "a:b_c.d-e@0.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := pack.ParseRef(s)
		if err != nil {
			if !errors.Is(err, pack.ErrUnpinnedRef) {
				t.Fatalf("error is not ErrUnpinnedRef: %v", err)
			}
			return
		}
		if r.String() != s {
			t.Fatalf("ParseRef(%q).String() = %q", s, r.String())
		}
	})
}
