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
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/internal/pgtest"
	"github.com/contextos/contextos/internal/storekit"
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

// TestMigration4IndexesTheCheckpointsStored opens a database left at
// schema version 3, with checkpoints saved before the pending index was
// kept: the migration indexes those it reads as the runtime wrote them
// (a paused run under its tenant; a running, ended or never paused one
// not at all) and leaves listed as unknown those it cannot read (not
// JSON, or a version it does not know) until a save writes their entry;
// a checkpoint a binary that does not keep the index moves on is listed
// again.
func TestMigration4IndexesTheCheckpointsStored(t *testing.T) {
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
			paused, ended, tenant := runtimeCheckpoints(t)
			ms, err := migrationsFor(tc.dialect)
			if err != nil || len(ms) < 4 {
				t.Fatalf("migrations = %d, %v", len(ms), err)
			}
			qs := []string{`CREATE TABLE contextos_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`}
			for _, m := range ms[:3] {
				qs = append(qs, m.sql, fmt.Sprintf(`INSERT INTO contextos_schema_migrations VALUES (%d, '%s', 0)`, m.version, m.name))
			}
			for _, q := range qs {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			for _, c := range []struct {
				run     string
				version int
				data    string
			}{
				{"run_paused", 2, `{"run_id":"run_paused","run_context":{"tenant_id":"tenant_1"},"pending":{"gate_id":"GATE_FINANCE_APPROVAL"}}`},
				{"run_paused_2", 1, `{"run_id":"run_paused_2","run_context":{"tenant_id":"tenant_2"},"pending":{"gate_id":"GATE_X"},"active":false}`},
				{"run_resumed", 2, `{"run_id":"run_resumed","run_context":{"tenant_id":"tenant_1"},"pending":{"gate_id":"GATE_X"},"active":true}`},
				{"run_ended", 3, `{"run_id":"run_ended","run_context":{"tenant_id":"tenant_1"},"pending":{"gate_id":"GATE_X"},"terminal":true}`},
				{"run_plain", 2, `{"run_id":"run_plain","run_context":{"tenant_id":"tenant_1"},"pending":null}`},
				{"run_array", 2, `[1, 2]`},
				{"run_garbled", 2, "not json \xff"},
				{"run_future", 9, `{"pending":{}}`},
				{paused.RunID, paused.Version, string(paused.Data)},
				{ended.RunID, ended.Version, string(ended.Data)},
			} {
				if _, err := db.ExecContext(ctx, `INSERT INTO contextos_checkpoints (run_id, revision, version, data, updated_at) VALUES ($1, 3, $2, $3, 0)`,
					c.run, c.version, []byte(c.data)); err != nil {
					t.Fatalf("%s: %v", c.run, err)
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
			pending("", "run_future", "run_garbled", "run_paused", "run_paused_2", paused.RunID)
			pending(tenant, "run_future", "run_garbled", paused.RunID)
			pending("tenant_1", "run_future", "run_garbled", "run_paused")
			pending("tenant_2", "run_future", "run_garbled", "run_paused_2")
			pending("tenant_3", "run_future", "run_garbled")
			if err := cps.Save(ctx, &contextos.Checkpoint{RunID: "run_garbled", Revision: 3, Version: 2, Data: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			if err := cps.Save(ctx, &contextos.Checkpoint{RunID: "run_future", Revision: 3, Version: 2, Data: []byte(`{}`),
				Awaiting: &contextos.AwaitedApproval{TenantID: "tenant_3", GateID: "gate_1"}}); err != nil {
				t.Fatal(err)
			}
			pending("tenant_1", "run_paused")
			pending("tenant_3", "run_future")
			// A binary that does not keep the index saves run_ended.
			if _, err := db.ExecContext(ctx, `UPDATE contextos_checkpoints SET revision = revision + 1 WHERE run_id = 'run_ended'`); err != nil {
				t.Fatal(err)
			}
			pending("tenant_2", "run_ended", "run_paused_2")
		})
	}
}

// runtimeCheckpoints are the checkpoints a runtime saves of the 4200
// refund, paused at the finance gate, and of the 1200 refund, ended, and
// their tenant.
func runtimeCheckpoints(t *testing.T) (paused, ended *contextos.Checkpoint, tenant string) {
	t.Helper()
	ctx := context.Background()
	h := contextostest.New(t, contextostest.NewPlanner(storekit.LookupPlan(), storekit.RefundPlan(4200)), [][]byte{fixture.SupportPack()},
		&contextostest.Options{Runtime: contextos.Options{Evidence: storekit.Evidence(t)}, Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}})
	h.Adapter("adp_orders").On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200})
	h.Adapter("adp_policy").On("eval").ReturnOutput(map[string]any{"eligible": true})
	req, rc := storekit.RefundRequest(t, "run_real_paused", 4200)
	if res := h.Invoke(req, rc); res.Status != decision.Deferred {
		t.Fatalf("the 4200 refund ended %s, want DEFERRED", res.Status)
	}
	paused, err := h.Checkpoints.Load(ctx, rc.RunID)
	if err != nil {
		t.Fatal(err)
	}
	h2 := contextostest.New(t, contextostest.NewPlanner(storekit.LookupPlan(), storekit.RefundPlan(1200)), [][]byte{fixture.SupportPack()},
		&contextostest.Options{Runtime: contextos.Options{Evidence: storekit.Evidence(t)}, Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}})
	h2.Adapter("adp_orders").On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200})
	h2.Adapter("adp_policy").On("eval").ReturnOutput(map[string]any{"eligible": true})
	h2.Adapter("adp_payments").On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
	req, rc2 := storekit.RefundRequest(t, "run_real_ended", 1200)
	if res := h2.Invoke(req, rc2); res.Status != decision.Decided {
		t.Fatalf("the 1200 refund ended %s, want DECIDED", res.Status)
	}
	ended, err = h2.Checkpoints.Load(ctx, rc2.RunID)
	if err != nil {
		t.Fatal(err)
	}
	return paused, ended, rc.TenantID
}
