// Package sqlstore owns the SQL both durable engines share (store/sqlite
// and store/postgres): the embedded, forward-only schema migrations and
// every runtime store over database/sql — checkpoints, replay packets,
// decision records, idempotency claims, used approvals, transcripts,
// memory and the pack registry. An engine package opens the *sql.DB with
// its driver and hands it here with its Dialect; the SQL is written once,
// with $1-style parameters both engines accept, and the few places the
// engines differ (column types, the write lock) are the Dialect's.
package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Dialect is the engine a DB speaks.
type Dialect int

// The engines.
const (
	SQLite Dialect = iota + 1
	Postgres
)

func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return "dialect(" + strconv.Itoa(int(d)) + ")"
}

// ErrSchemaVersion reports a database whose schema a newer release
// migrated: this binary does not know its tables and refuses to touch
// them.
var ErrSchemaVersion = errors.New("store: the database schema is newer than this binary")

// Config is what an engine passes to Open besides the database.
type Config struct {
	// Now is the clock of timestamps and, on SQLite, of claim leases
	// (PostgreSQL counts leases on the server's clock). Default: time.Now.
	Now func() time.Time
	// ClaimTTL is how long an idempotency claim holds without being
	// completed or released before another caller may take the key over
	// (its holder is taken for dead). Default: 5 minutes.
	ClaimTTL time.Duration
	// PollInterval is how often a Claim waiting on a key held elsewhere
	// looks again. Default: 20 ms.
	PollInterval time.Duration
	// Holder names this process in the claims it holds. Default: a name
	// from the host name, process id and a counter.
	Holder string
}

// DB is one open database with its dialect and settings: the shared
// implementation of every store.
type DB struct {
	sql     *sql.DB
	dialect Dialect
	cfg     Config
	idem    *Idempotency
	head    chainHead
}

//go:embed migrations
var migrations embed.FS

// migration is one embedded schema step.
type migration struct {
	version int
	name    string
	sql     string
}

// migrationsFor lists d's migrations in version order. A migration file is
// named NNNN_name.sql; versions start at 1 and have no gaps.
func migrationsFor(d Dialect) ([]migration, error) {
	dir := path.Join("migrations", d.String())
	entries, err := fs.ReadDir(migrations, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("sqlstore: migration file %s is not named NNNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(migrations, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: strings.TrimSuffix(e.Name(), ".sql"), sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("sqlstore: migration %s out of sequence (want version %d)", m.name, i+1)
		}
	}
	return out, nil
}

// LatestVersion is the schema version this binary migrates d to.
func LatestVersion(d Dialect) int {
	ms, err := migrationsFor(d)
	if err != nil {
		return 0
	}
	return len(ms)
}

// Open migrates db to the latest schema and returns the store over it.
// Migrations run in one transaction under the engine's write lock (an
// advisory lock on PostgreSQL, the immediate write lock on SQLite), so two
// processes opening one database at once apply each step once; a
// database already migrated further than this binary knows is refused
// with ErrSchemaVersion.
func Open(ctx context.Context, db *sql.DB, d Dialect, cfg Config) (*DB, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ClaimTTL <= 0 {
		cfg.ClaimTTL = 5 * time.Minute
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	if cfg.Holder == "" {
		cfg.Holder = defaultHolder()
	}
	s := &DB{sql: db, dialect: d, cfg: cfg}
	s.idem = &Idempotency{db: s, renew: map[string]context.CancelFunc{}}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// SQL returns the database.
func (s *DB) SQL() *sql.DB { return s.sql }

// Close stops the renewal of the claims this store holds and closes the
// database.
func (s *DB) Close() error {
	s.idem.close()
	return s.sql.Close()
}

// SchemaVersion returns the version the database's schema is at.
func (s *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	if err := s.sql.QueryRowContext(ctx, `SELECT MAX(version) FROM contextos_schema_migrations`).Scan(&v); err != nil {
		return 0, err
	}
	return int(v.Int64), nil
}

func (s *DB) migrate(ctx context.Context) error {
	ms, err := migrationsFor(s.dialect)
	if err != nil {
		return err
	}
	// A database already at this binary's version opens without DDL and
	// without the lock: a role with only the rights to read and write
	// the tables can open it.
	// (A check that fails — SQLite busy with another process's first
	// open, say — falls through to the locked path, which waits.)
	if v, ok, err := s.currentVersion(ctx); err == nil && ok && v > len(ms) {
		return fmt.Errorf("%w: it is at version %d, this binary knows versions up to %d", ErrSchemaVersion, v, len(ms))
	} else if err == nil && ok && v == len(ms) {
		return nil
	}
	return s.writeTx(ctx, lockMigrate, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS contextos_schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at BIGINT NOT NULL
)`); err != nil {
			return fmt.Errorf("sqlstore: create the migration table: %w", err)
		}
		var cur sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT MAX(version) FROM contextos_schema_migrations`).Scan(&cur); err != nil {
			return err
		}
		if int(cur.Int64) > len(ms) {
			return fmt.Errorf("%w: it is at version %d, this binary knows versions up to %d", ErrSchemaVersion, cur.Int64, len(ms))
		}
		for _, m := range ms[cur.Int64:] {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("sqlstore: migration %s: %w", m.name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO contextos_schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.version, m.name, s.cfg.Now().UnixMilli()); err != nil {
				return fmt.Errorf("sqlstore: record migration %s: %w", m.name, err)
			}
		}
		return nil
	})
}

// Write locks: each names what a transaction serializes with on
// PostgreSQL (a transaction-scoped advisory lock); SQLite's immediate
// transactions serialize every write.
const (
	lockMigrate int64 = 0x636f6e7478_01 // "contx" 1
	lockRecords int64 = 0x636f6e7478_02
	lockPacks   int64 = 0x636f6e7478_03
)

// writeTx runs fn in a transaction that holds lock (on SQLite the
// database's write lock, which every write transaction takes at BEGIN),
// committing when fn returns nil and rolling back otherwise.
func (s *DB) writeTx(ctx context.Context, lock int64, fn func(tx *sql.Tx) error) (err error) {
	var opts *sql.TxOptions
	if s.dialect == Postgres {
		// Read committed whatever the server's default: each statement
		// after the lock sees what committed before it was taken (under
		// repeatable read a write behind the lock fails to serialize).
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := s.sql.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if s.dialect == Postgres && lock != 0 {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, lock); err != nil {
			return err
		}
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

var holderSeq atomic.Int64

// defaultHolder names this process in its claims: host, process id, the
// time the store opened and a counter, so two stores in one process, or
// two processes on two machines, never share a name.
func defaultHolder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%d/%d", host, os.Getpid(), time.Now().UnixNano(), holderSeq.Add(1))
}

// readTx runs fn in a transaction that sees one snapshot of the database
// (repeatable read on PostgreSQL; on SQLite the transaction holds the
// write lock, so nothing commits meanwhile), and rolls it back.
func (s *DB) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	var opts *sql.TxOptions
	if s.dialect == Postgres {
		opts = &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	}
	tx, err := s.sql.BeginTx(ctx, opts)
	if err != nil {
		return storeErr(ctx, "begin", err)
	}
	defer func() { _ = tx.Rollback() }()
	return fn(tx)
}

// currentVersion reads the schema version without creating anything: ok
// is false when the database has no migration table yet.
func (s *DB) currentVersion(ctx context.Context) (int, bool, error) {
	var exists bool
	var err error
	switch s.dialect {
	case Postgres:
		err = s.sql.QueryRowContext(ctx, `SELECT to_regclass('contextos_schema_migrations') IS NOT NULL`).Scan(&exists)
	default:
		var n int
		err = s.sql.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'contextos_schema_migrations'`).Scan(&n)
		exists = n > 0
	}
	if err != nil || !exists {
		return 0, false, err
	}
	var v sql.NullInt64
	if err := s.sql.QueryRowContext(ctx, `SELECT MAX(version) FROM contextos_schema_migrations`).Scan(&v); err != nil {
		return 0, false, err
	}
	return int(v.Int64), true, nil
}
