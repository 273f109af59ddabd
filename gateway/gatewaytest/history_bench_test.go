package gatewaytest_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
)

// An append to a transcript sink costs the same whatever the runs it
// already holds: the refusal of a forked position looks at a run's
// entries only for an entry below its highest position. The curve at
// 1,000, 10,000 and 100,000 stored runs is flat.
func BenchmarkTranscriptAppendHistory(b *testing.B) {
	ctx := context.Background()
	sinks := map[string]func() gateway.TranscriptSink{
		"Recorder":         func() gateway.TranscriptSink { return &gatewaytest.Recorder{} },
		"MemoryTranscript": func() gateway.TranscriptSink { return gateway.NewMemoryTranscript() },
	}
	for _, name := range []string{"Recorder", "MemoryTranscript"} {
		for _, runs := range []int{1_000, 10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/runs=%d", name, runs), func(b *testing.B) {
				s := sinks[name]()
				for i := range runs {
					id := "run_" + strconv.Itoa(i)
					for seq := range 4 {
						if err := s.Append(ctx, gateway.TranscriptEntry{RunID: id, Seq: seq, Kind: "call", ChainHash: "sha256:c"}); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				i := 0
				for b.Loop() {
					id := "run_new_" + strconv.Itoa(i/4)
					if err := s.Append(ctx, gateway.TranscriptEntry{RunID: id, Seq: i % 4, Kind: "call", ChainHash: "sha256:c"}); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}
