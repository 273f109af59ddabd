package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/contextos/contextos/store/sqlite"
)

func TestOpenMigratesOnceAndRefusesANewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "contextos.db")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := sqlite.Open(ctx, path, nil)
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.SchemaVersion(ctx)
	if err != nil || v < 1 {
		t.Fatalf("SchemaVersion = %d, %v", v, err)
	}
	s.Close()
	// A newer release migrated the file further: this binary refuses it.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO contextos_schema_migrations (version, name, applied_at) VALUES (999, '0999_future', 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlite.Open(ctx, path, nil); !errors.Is(err, sqlite.ErrSchemaVersion) {
		t.Fatalf("Open of a newer schema = %v, want ErrSchemaVersion", err)
	}
}

func TestOpenRefusesAnEmptyPath(t *testing.T) {
	if _, err := sqlite.Open(context.Background(), " ", nil); !errors.Is(err, sqlite.ErrConfig) {
		t.Fatalf("Open(\" \") = %v, want ErrConfig", err)
	}
}

func TestOpenDSNs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, dsn string
		wantErr   error
	}{
		{"path", filepath.Join(dir, "a.db"), nil},
		{"file URI with a query", "file:" + filepath.Join(dir, "b.db") + "?cache=private", nil},
		{"memory", ":memory:", nil},
		{"file memory", "file::memory:", nil},
		{"mode=memory", "file:mem1?mode=memory", nil},
		{"immediate asked for", "file:" + filepath.Join(dir, "c.db") + "?_txlock=immediate", nil},
		{"deferred write locks", "file:" + filepath.Join(dir, "d.db") + "?_txlock=deferred", sqlite.ErrConfig},
		{"bad query", "file:x.db?%zz", sqlite.ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sqlite.Open(ctx, tc.dsn, nil)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Open = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			defer s.Close()
			// Many concurrent writes: an in-memory database must live in
			// one connection (each connection would otherwise be a new,
			// empty database), a file must take its write lock up front.
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for i := range 64 {
				wg.Go(func() { errs <- s.Approvals().Consume(ctx, fmt.Sprint("apr_", i)) })
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestCloseStopsClaimRenewals(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "x.db"), &sqlite.Options{ClaimTTL: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, claimed, err := s.Idempotency().Claim(ctx, fmt.Sprint("ik_", i)); err != nil || !claimed {
			t.Fatalf("Claim = %v, %v", claimed, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
