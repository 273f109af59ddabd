package sqlite_test

// The store benchmarks: the bodies are internal/storekit's, which
// store/postgres runs on PostgreSQL too. The figures and
// commands are in docs/benchmarks.md:
//
//	go test -run '^$' -bench . -benchmem ./store/sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/store/sqlite"
)

// benchStore opens a fresh database file for a benchmark.
func benchStore(b *testing.B) *sqlite.Store {
	b.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

func BenchmarkStore(b *testing.B) {
	storekit.Stores(b, func(b *testing.B) storekit.Engine { return benchStore(b) })
}

func BenchmarkInvokeRefund(b *testing.B) {
	storekit.InvokeRefund(b, func(b *testing.B) storekit.Engine { return benchStore(b) })
}

// BenchmarkPendingApprovals is Runtime.PendingApprovals over 1,000 to
// 100,000 stored runs, ten of them paused.
func BenchmarkPendingApprovals(b *testing.B) {
	var path string
	storekit.PendingApprovals(b, storekit.PendingBench{
		Open: func(b *testing.B) (contextos.Options, contextos.CheckpointLister) {
			path = filepath.Join(b.TempDir(), "bench.db")
			st, err := sqlite.Open(context.Background(), path, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			var o contextos.Options
			st.Configure(&o)
			return o, st.Checkpoints()
		},
		Seed: func(b *testing.B, n int, data []byte) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(storekit.SeedSQL, data, n); err != nil {
				b.Fatal(err)
			}
		},
	})
}

// BenchmarkRecordHistory is the decision store's List of one run and
// Verify over 1,000 to 100,000 stored records.
func BenchmarkRecordHistory(b *testing.B) {
	storekit.RecordHistory(b, func(b *testing.B) (decision.Store, *sql.DB) {
		path := filepath.Join(b.TempDir(), "bench.db")
		st, err := sqlite.Open(context.Background(), path, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		db, err := sql.Open("sqlite", path)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		return st.Records(), db
	})
}
