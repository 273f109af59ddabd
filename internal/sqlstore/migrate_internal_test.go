package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/internal/pgtest"
	"github.com/contextos/contextos/pack"
)

// TestMigration2SendsUnreviewedVersionsBackToLinted opens a database left
// at schema version 1 — where a signed pack file landed in state signed
// and reviewed needed no sign-off — and checks that migrating it keeps
// published versions and sends reviewed and signed ones back to linted,
// with no sign-offs and an empty pin history.
func TestMigration2SendsUnreviewedVersionsBackToLinted(t *testing.T) {
	for _, tc := range []struct {
		dialect Dialect
		open    func(t *testing.T) *sql.DB
	}{
		{SQLite, func(t *testing.T) *sql.DB {
			db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "v1.db")+"?_txlock=immediate")
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			return db
		}},
		{Postgres, func(t *testing.T) *sql.DB {
			db, err := sql.Open("pgx", pgtest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			return db
		}},
	} {
		t.Run(tc.dialect.String(), func(t *testing.T) {
			ctx := context.Background()
			db := tc.open(t)
			defer db.Close()
			ms, err := migrationsFor(tc.dialect)
			if err != nil || len(ms) < 2 {
				t.Fatalf("migrations = %d, %v", len(ms), err)
			}
			signed := "1"
			if tc.dialect == Postgres {
				signed = "TRUE"
			}
			for _, q := range []string{
				ms[0].sql,
				`CREATE TABLE contextos_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`,
				`INSERT INTO contextos_schema_migrations VALUES (1, '0001_init', 0)`,
				`INSERT INTO contextos_packs VALUES ('p', '1.0.0', 'published', '', 'sha256:a', ` + signed + `, 'doc')`,
				`INSERT INTO contextos_packs VALUES ('p', '1.1.0', 'signed', '', 'sha256:b', ` + signed + `, 'doc')`,
				`INSERT INTO contextos_packs VALUES ('p', '1.2.0', 'reviewed', '', 'sha256:c', ` + signed + `, 'doc')`,
				`INSERT INTO contextos_packs VALUES ('p', '1.3.0', 'deprecated', 'old', 'sha256:d', ` + signed + `, 'doc')`,
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			s, err := Open(ctx, db, tc.dialect, Config{})
			if err != nil {
				t.Fatal(err)
			}
			if v, err := s.SchemaVersion(ctx); err != nil || v != LatestVersion(tc.dialect) {
				t.Errorf("SchemaVersion = %d, %v", v, err)
			}
			want := map[string]pack.State{"1.0.0": pack.StatePublished, "1.1.0": pack.StateLinted, "1.2.0": pack.StateLinted, "1.3.0": pack.StateDeprecated}
			for version, state := range want {
				e, ok, err := loadEntry(ctx, db, pack.MustParseRef("p@"+version))
				if err != nil || !ok || e.State != state || len(e.Reviews) != 0 {
					t.Errorf("p@%s after migration = %s, ok %t, %v; want %s with no sign-offs", version, e.State, ok, err, state)
				}
			}
			h, err := s.Registry(nil).PinHistory(ctx, pack.Slot{Env: "prod", PackID: "p"})
			if err != nil || len(h) != 0 {
				t.Errorf("PinHistory after migration = %v, %v", h, err)
			}
		})
	}
}

// TestMigration4ListsCheckpointsSavedBeforeTheIndex opens a database left
// at schema version 3, with checkpoints saved before the pending index
// was kept: the index lists them (their runs may await an approval, the
// runtime reads them to see) until a save writes their entry, and lists
// again a checkpoint a binary that does not keep the index moved on.
func TestMigration4ListsCheckpointsSavedBeforeTheIndex(t *testing.T) {
	for _, tc := range []struct {
		dialect Dialect
		open    func(t *testing.T) *sql.DB
	}{
		{SQLite, func(t *testing.T) *sql.DB {
			db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "v3.db")+"?_txlock=immediate")
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			return db
		}},
		{Postgres, func(t *testing.T) *sql.DB {
			db, err := sql.Open("pgx", pgtest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			return db
		}},
	} {
		t.Run(tc.dialect.String(), func(t *testing.T) {
			ctx := context.Background()
			db := tc.open(t)
			defer db.Close()
			ms, err := migrationsFor(tc.dialect)
			if err != nil || len(ms) < 4 {
				t.Fatalf("migrations = %d, %v", len(ms), err)
			}
			qs := []string{`CREATE TABLE contextos_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`}
			for _, m := range ms[:3] {
				qs = append(qs, m.sql, fmt.Sprintf(`INSERT INTO contextos_schema_migrations VALUES (%d, '%s', 0)`, m.version, m.name))
			}
			qs = append(qs,
				`INSERT INTO contextos_checkpoints (run_id, revision, version, data, updated_at) VALUES ('run_old_a', 3, 2, '{}', 0)`,
				`INSERT INTO contextos_checkpoints (run_id, revision, version, data, updated_at) VALUES ('run_old_b', 1, 2, '{}', 0)`)
			for _, q := range qs {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			s, err := Open(ctx, db, tc.dialect, Config{})
			if err != nil {
				t.Fatal(err)
			}
			cps := s.Checkpoints()
			pending := func(tenant string, want ...string) {
				t.Helper()
				got, err := cps.PendingRunIDs(ctx, tenant)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("PendingRunIDs(%q) = %v, want %v", tenant, got, want)
				}
			}
			pending("", "run_old_a", "run_old_b")
			pending("tenant_1", "run_old_a", "run_old_b")
			if err := cps.Save(ctx, &contextos.Checkpoint{RunID: "run_old_a", Revision: 3, Version: 2, Data: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			if err := cps.Save(ctx, &contextos.Checkpoint{RunID: "run_old_b", Revision: 1, Version: 2, Data: []byte(`{}`),
				Awaiting: &contextos.AwaitedApproval{TenantID: "tenant_1", GateID: "gate_1"}}); err != nil {
				t.Fatal(err)
			}
			pending("", "run_old_b")
			pending("tenant_1", "run_old_b")
			pending("tenant_2")
			// A binary that does not keep the index saves run_old_a.
			if _, err := db.ExecContext(ctx, `UPDATE contextos_checkpoints SET revision = revision + 1 WHERE run_id = 'run_old_a'`); err != nil {
				t.Fatal(err)
			}
			pending("tenant_2", "run_old_a")
		})
	}
}
