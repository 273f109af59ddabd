package decision_test

import (
	"strconv"
	"testing"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/decision/decisiontest"
)

// historySizes are the stored records the history benchmarks run at.
var historySizes = []int{1_000, 10_000, 100_000}

// recordsPerRun is how many records each run of a benchmark's history
// holds.
const recordsPerRun = 5

// historyStore is an in-memory store of n records, recordsPerRun per
// run, the runs interleaved.
func historyStore(b *testing.B, n int) *decision.MemoryStore {
	b.Helper()
	s := decision.NewMemoryStore()
	runs := n / recordsPerRun
	for i := range n {
		r := decisiontest.Sample("dr_"+strconv.Itoa(i), decision.Decided)
		r.RunID = "run_" + strconv.Itoa(i%runs)
		if _, err := s.Append(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkMemoryStoreListRun is List of one run's records (five) among
// 1,000 to 100,000 stored records.
func BenchmarkMemoryStoreListRun(b *testing.B) {
	for _, n := range historySizes {
		b.Run("records="+strconv.Itoa(n), func(b *testing.B) {
			s := historyStore(b, n)
			f := decision.Filter{RunID: "run_" + strconv.Itoa(n/recordsPerRun/2)}
			b.ReportAllocs()
			for b.Loop() {
				recs, err := s.List(ctx, f)
				if err != nil || len(recs) != recordsPerRun {
					b.Fatalf("List = %d, %v", len(recs), err)
				}
			}
		})
	}
}

// BenchmarkMemoryStoreVerify is Verify of 1,000 to 100,000 stored
// records: every record is decoded, re-encoded and hashed, a page at a
// time (B/op is the garbage of that work, not memory held at once).
func BenchmarkMemoryStoreVerify(b *testing.B) {
	for _, n := range historySizes {
		b.Run("records="+strconv.Itoa(n), func(b *testing.B) {
			s := historyStore(b, n)
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Verify(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
