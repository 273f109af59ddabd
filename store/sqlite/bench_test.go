package sqlite_test

// The store benchmarks: the bodies are internal/storekit's, which
// store/postgres runs on PostgreSQL too. The figures and
// commands are in docs/benchmarks.md:
//
//	go test -run '^$' -bench . -benchmem ./store/sqlite

import (
	"context"
	"path/filepath"
	"testing"

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
