// Package pgtest gives each PostgreSQL test a database of its own: a
// fresh schema in the server CONTEXTOS_POSTGRES_URL names, dropped when the
// test ends. Without CONTEXTOS_POSTGRES_URL a test is skipped with a
// message naming it, so `go test ./...` passes on a machine without
// PostgreSQL; CI sets it (and .ci/run fails if these tests did not run).
// It is test support: only tests import it.
package pgtest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
)

// EnvURL is the environment variable naming the server tests use.
const EnvURL = "CONTEXTOS_POSTGRES_URL"

var seq atomic.Int64

// URL returns the server URL from CONTEXTOS_POSTGRES_URL with a fresh
// schema as its search_path, or skips t when the variable is unset.
func URL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		t.Skipf("PostgreSQL tests skipped: set %s (e.g. postgres://postgres@127.0.0.1:5432/test) to run them", EnvURL)
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d", t.Name(), os.Getpid(), seq.Add(1)))
	schema := "contextos_test_" + hex.EncodeToString(sum[:8])
	db := open(t, base)
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() { Drop(t, base, schema) })
	return WithSchema(t, base, schema)
}

// WithSchema returns base with schema as its search_path.
func WithSchema(t testing.TB, base, schema string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" {
		// A key=value connection string.
		return strings.TrimSpace(base) + " search_path=" + schema
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Drop drops schema and everything in it.
func Drop(t testing.TB, base, schema string) {
	db := open(t, base)
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), `DROP SCHEMA IF EXISTS `+schema+` CASCADE`); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
	}
}

func open(t testing.TB, base string) *sql.DB {
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return db
}

// The driver "pgx" is registered by stdlib's init.
var _ = stdlib.GetDefaultDriver
