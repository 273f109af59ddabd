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
		return open, func(t *testing.T, query string) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(query); err != nil {
				t.Fatal(err)
			}
		}
	})
}
