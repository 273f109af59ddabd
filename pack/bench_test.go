package pack_test

import (
	"testing"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/pack/packtest"
)

func BenchmarkValidateCanonicalPack(b *testing.B) {
	p := canonical(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := pack.Validate(p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifySignedPack(b *testing.B) {
	s := packtest.NewSigner(1)
	signed := s.Sign(b, canonical(b))
	keys := keysFor(s)
	b.ReportAllocs()
	b.SetBytes(int64(len(signed)))
	for b.Loop() {
		if _, err := pack.Verify(ctx, signed, keys, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodePack(b *testing.B) {
	data := readFile(b, "ctxpack.support-1.0.0.json")
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := pack.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
