package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/contextos/contextos/store/sqlite"
	"github.com/contextos/contextos/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunTests(t, func(t *testing.T) storetest.Opener {
		path := filepath.Join(t.TempDir(), "contextos.db")
		return func(t *testing.T, o storetest.Options) storetest.Stores {
			s, err := sqlite.Open(context.Background(), path, &sqlite.Options{Now: o.Now, ClaimTTL: o.ClaimTTL})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}, storetest.HostClock)
}

func TestTamper(t *testing.T) {
	storetest.RunTamperTests(t, func(t *testing.T) (storetest.Opener, storetest.Exec) {
		path := filepath.Join(t.TempDir(), "contextos.db")
		open := func(t *testing.T, o storetest.Options) storetest.Stores {
			s, err := sqlite.Open(context.Background(), path, &sqlite.Options{Now: o.Now, ClaimTTL: o.ClaimTTL})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		return open, execSQLite(path)
	})
}

func TestUnreadable(t *testing.T) {
	storetest.RunUnreadableTests(t, func(t *testing.T) (storetest.Opener, storetest.Exec) {
		path := filepath.Join(t.TempDir(), "contextos.db")
		return func(t *testing.T, o storetest.Options) storetest.Stores {
			s, err := sqlite.Open(context.Background(), path, &sqlite.Options{Now: o.Now, ClaimTTL: o.ClaimTTL})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, execSQLite(path)
	})
}

// execSQLite runs statements on the database at path, around the store.
func execSQLite(path string) storetest.Exec {
	return func(t *testing.T, query string, args ...any) {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(query, args...); err != nil {
			t.Fatal(err)
		}
	}
}
