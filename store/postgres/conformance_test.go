package postgres_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/contextos/contextos/internal/pgtest"
	"github.com/contextos/contextos/store/postgres"
	"github.com/contextos/contextos/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunTests(t, func(t *testing.T) storetest.Opener {
		url := pgtest.URL(t)
		return func(t *testing.T, o storetest.Options) storetest.Stores {
			s, err := postgres.Open(context.Background(), url, &postgres.Options{Now: o.Now, ClaimTTL: o.ClaimTTL})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}, storetest.ServerClock)
}

func TestTamper(t *testing.T) {
	storetest.RunTamperTests(t, func(t *testing.T) (storetest.Opener, storetest.Exec) {
		url := pgtest.URL(t)
		open := func(t *testing.T, o storetest.Options) storetest.Stores {
			s, err := postgres.Open(context.Background(), url, &postgres.Options{Now: o.Now, ClaimTTL: o.ClaimTTL})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		return open, execPostgres(url)
	})
}

func TestUnreadable(t *testing.T) {
	storetest.RunUnreadableTests(t, func(t *testing.T) (storetest.Opener, storetest.Exec) {
		url := pgtest.URL(t)
		return func(t *testing.T, o storetest.Options) storetest.Stores {
			s, err := postgres.Open(context.Background(), url, &postgres.Options{Now: o.Now, ClaimTTL: o.ClaimTTL})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, execPostgres(url)
	})
}

// execPostgres runs statements on the database at url, around the store.
func execPostgres(url string) storetest.Exec {
	return func(t *testing.T, query string, args ...any) {
		db, err := sql.Open("pgx", url)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(query, args...); err != nil {
			t.Fatal(err)
		}
	}
}
