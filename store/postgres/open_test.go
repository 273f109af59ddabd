package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos/internal/pgtest"
	"github.com/contextos/contextos/store/postgres"
)

func TestOpenMigratesOnceUnderConcurrentOpens(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, 6)
	errs := make([]error, 6)
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(ctx, url, nil) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	v, err := stores[0].SchemaVersion(ctx)
	if err != nil || v < 1 {
		t.Fatalf("SchemaVersion = %d, %v", v, err)
	}
}

func TestOpenRefusesBadURLWithoutEchoingIt(t *testing.T) {
	for _, url := range []string{"", "postgres://user:s3cret-pw@[::1", "host=x port=notaport password=s3cret-pw"} {
		_, err := postgres.Open(context.Background(), url, nil)
		if !errors.Is(err, postgres.ErrConfig) || strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("Open(%q) = %v, want ErrConfig without the password", url, err)
		}
	}
}

// A service's role may read and write the tables but not create any: it
// opens a database an operator already migrated.
func TestOpenMigratedDatabaseWithDMLOnlyRole(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := db.QueryRow(`SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	role := "app_" + schema[len(schema)-12:]
	for _, q := range []string{`CREATE ROLE ` + role + ` LOGIN`, `GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + role,
		`GRANT USAGE ON ALL SEQUENCES IN SCHEMA ` + schema + ` TO ` + role} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		defer db.Close()
		for _, q := range []string{`DROP OWNED BY ` + role, `DROP ROLE ` + role} {
			if _, err := db.Exec(q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	app, err := postgres.Open(ctx, strings.Replace(url, "postgres@", role+"@", 1), nil)
	if err != nil {
		t.Fatalf("Open as a role without CREATE = %v", err)
	}
	defer app.Close()
	if err := app.Approvals().Consume(ctx, "apr_1"); err != nil {
		t.Fatal(err)
	}
}
