package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"

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
