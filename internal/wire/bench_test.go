package wire_test

import (
	"testing"

	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

func benchDecode[T any](b *testing.B, file string) {
	data := fixture.Read(b, file)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var v T
		if probs, _ := wire.Decode(data, &v); len(probs) > 0 {
			b.Fatal(probs)
		}
	}
}

// BenchmarkDecodeInvoke decodes the invoke envelope of the refund run (the
// invoke path).
func BenchmarkDecodeInvoke(b *testing.B) {
	benchDecode[runcontext.InvokeRequest](b, "invoke.support-refund.json")
}

// BenchmarkDecodePack decodes a context pack.
func BenchmarkDecodePack(b *testing.B) { benchDecode[pack.Pack](b, "ctxpack.support-1.0.0.json") }

// BenchmarkCheckStrict is the strict scan alone over the invoke envelope.
func BenchmarkCheckStrict(b *testing.B) {
	data := fixture.Invoke()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if probs := wire.CheckStrict(data); len(probs) > 0 {
			b.Fatal(probs)
		}
	}
}
