// Package sqlite is the embedded durable store: every runtime store —
// checkpoints, replay packets, decision records, idempotency claims, used
// approvals, transcripts, memory and the pack registry — in one SQLite
// database file, in pure Go (modernc.org/sqlite, no cgo). Open migrates
// the file to the current schema; several processes on one machine may
// share the file (SQLite's write lock serializes their writes). For many
// replicas on many machines use store/postgres.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/internal/sqlstore"
)

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Now is the clock of claim leases (idempotency claims, a run's claim
	// in its checkpoint) and stored timestamps: the host's, which every
	// process sharing the file reads. Default: time.Now.
	Now func() time.Time
	// ClaimTTL is how long an idempotency claim holds without being
	// completed or released before another caller may take the key over,
	// its holder taken for dead (the tool then sees the same idempotency
	// key again). Default: 5 minutes.
	ClaimTTL time.Duration
	// BusyTimeout is how long a statement waits for another process's
	// write lock. Default: 10 s.
	BusyTimeout time.Duration
	// MaxOpenConns bounds the connection pool. Default: 4 (1 for an
	// in-memory database, which lives in its one connection).
	MaxOpenConns int
}

// Store is an open SQLite database holding every runtime store. It is
// safe for concurrent use; Close it when done.
type Store struct {
	db *sqlstore.DB
}

// Open opens (creating if needed) the database at dsn — a file path, a
// "file:" URI, or ":memory:" — and migrates it to the current schema. A
// database migrated by a newer release is refused with an error wrapping
// ErrSchemaVersion.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if strings.TrimSpace(dsn) == "" {
		return nil, fmt.Errorf("sqlite: %w: the database path is empty", ErrConfig)
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 10 * time.Second
	}
	full, memory, err := buildDSN(dsn, o.BusyTimeout)
	if err != nil {
		return nil, err
	}
	conns := o.MaxOpenConns
	switch {
	case memory:
		conns = 1
	case conns <= 0:
		conns = 4
	}
	db, err := sql.Open("sqlite", full)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if memory {
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
	}
	s, err := sqlstore.Open(ctx, db, sqlstore.SQLite, sqlstore.Config{Now: o.Now, ClaimTTL: o.ClaimTTL})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return &Store{db: s}, nil
}

// buildDSN adds the store's settings to dsn: every write transaction
// takes the write lock when it begins (_txlock=immediate), so a
// read-then-write never fails half-way on another process's lock; a busy
// timeout; foreign keys; and, for a file, WAL so readers go on meanwhile.
// A dsn asking for another _txlock is refused. memory reports a database
// that lives in its connection (":memory:", "file::memory:", an empty
// name, or mode=memory).
func buildDSN(dsn string, busy time.Duration) (full string, memory bool, err error) {
	name, query, _ := strings.Cut(dsn, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", false, fmt.Errorf("sqlite: %w: the DSN's query does not parse", ErrConfig)
	}
	for _, v := range q["_txlock"] {
		if v != "immediate" {
			return "", false, fmt.Errorf("sqlite: %w: _txlock=%s: the store needs immediate write transactions", ErrConfig, problem.Clip(v))
		}
	}
	base := strings.TrimPrefix(name, "file:")
	memory = base == ":memory:" || base == "" || q.Get("mode") == "memory"
	q.Set("_txlock", "immediate")
	pragmas := []string{fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()), "foreign_keys(1)"}
	if !memory {
		pragmas = append(pragmas, "journal_mode(WAL)", "synchronous(NORMAL)")
	}
	q["_pragma"] = append(q["_pragma"], pragmas...)
	return name + "?" + q.Encode(), memory, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// SchemaVersion returns the schema version the database is at.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) { return s.db.SchemaVersion(ctx) }
