// Package postgres is the durable store for many replicas: every runtime
// store — checkpoints, replay packets, decision records, idempotency
// claims, used approvals, transcripts, memory and the pack registry — in
// one PostgreSQL database (github.com/jackc/pgx/v5). Open migrates the
// database to the current schema under an advisory lock, so replicas may
// start together. Runtimes on any number of machines share runs through
// it: a run paused on one resumes on another, a claim or an approval
// holds across all of them, and the record chain stays one chain.
package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/contextos/contextos/internal/sqlstore"
)

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Now is the clock of the timestamps stored beside used approvals
	// and migrations. Default: time.Now. Leases (idempotency claims, a
	// run's claim in its checkpoint) are not counted on it: they are
	// counted on the server's clock, so a replica whose clock is off
	// cannot take a live claim.
	Now func() time.Time
	// ClaimTTL is how long an idempotency claim holds, on the server's
	// clock, without being completed, released or renewed before another
	// caller may take the key over, its holder taken for dead (the tool
	// then sees the same idempotency key again). Default: 5 minutes.
	ClaimTTL time.Duration
	// MaxOpenConns bounds the connection pool. Default: 10.
	MaxOpenConns int
}

// Store is an open PostgreSQL database holding every runtime store. It is
// safe for concurrent use; Close it when done.
type Store struct {
	db *sqlstore.DB
}

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string; a search_path parameter selects the schema the
// tables live in) and migrates it to the current schema. A database
// migrated by a newer release is refused with an error wrapping
// ErrSchemaVersion. The error never repeats the URL (it may hold a
// password).
func Open(ctx context.Context, url string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if strings.TrimSpace(url) == "" {
		return nil, fmt.Errorf("postgres: %w: the database URL is empty", ErrConfig)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		// pgx's parse error may quote the URL, password included.
		return nil, fmt.Errorf("postgres: %w: the database URL does not parse", ErrConfig)
	}
	db := stdlib.OpenDB(*cfg)
	conns := o.MaxOpenConns
	if conns <= 0 {
		conns = 10
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	s, err := sqlstore.Open(ctx, db, sqlstore.Postgres, sqlstore.Config{Now: o.Now, ClaimTTL: o.ClaimTTL})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return &Store{db: s}, nil
}

// Close closes the connection pool.
func (s *Store) Close() error { return s.db.Close() }

// SchemaVersion returns the schema version the database is at.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) { return s.db.SchemaVersion(ctx) }
