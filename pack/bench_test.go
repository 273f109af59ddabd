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

// BenchmarkResolveCached is a resolve the cache answers: for execution it
// reads the lifecycle state once (Stat, no document); for replay it reads
// nothing. reads/op counts registry reads.
func BenchmarkResolveCached(b *testing.B) {
	s := packtest.NewSigner(1)
	ref := pack.MustParseRef("ctxpack.support@1.0.0")
	for _, u := range []pack.Use{pack.UseExecute, pack.UseResume, pack.UseReplay} {
		b.Run(string(u), func(b *testing.B) {
			m := pack.NewMemoryRegistry(nil)
			packtest.Publish(b, m, s.Sign(b, canonical(b)), "rev")
			reg := &countingRegistry{Registry: m}
			r := pack.NewResolver(reg, keysFor(s), &pack.ResolverOptions{Host: host})
			if _, err := r.Resolve(ctx, ref, u); err != nil {
				b.Fatal(err)
			}
			start := reg.gets.Load() + reg.stats.Load()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Resolve(ctx, ref, u); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(reg.gets.Load()+reg.stats.Load()-start)/float64(b.N), "reads/op")
		})
	}
}
