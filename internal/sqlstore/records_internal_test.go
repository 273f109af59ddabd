package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/decision/decisiontest"
	"github.com/contextos/contextos/internal/pgtest"
)

// TestAppendWhoseHeadMovedChainsAfterTheNewHead makes PostgreSQL's
// optimistic append lose its race on purpose: another writer holds the
// head row while the append seals after the head it knows (the append
// then waits, on its locked path), appends a record of its own and
// commits. The append must write nothing where it sealed, and chain after
// the other writer's record.
func TestAppendWhoseHeadMovedChainsAfterTheNewHead(t *testing.T) {
	ctx := context.Background()
	db, s := openPostgres(t, pgtest.URL(t))
	rs := s.Records()
	first, err := rs.Append(ctx, decisiontest.Sample("dr_1", decision.Decided))
	if err != nil {
		t.Fatal(err)
	}

	other, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	var otherPID int
	if err := other.QueryRowContext(ctx, `SELECT pg_backend_pid() FROM contextos_record_head WHERE id = 1 FOR UPDATE`).Scan(&otherPID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		r   *decision.Record
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := rs.Append(ctx, decisiontest.Sample("dr_3", decision.Decided))
		done <- result{r, err}
	}()
	// The append has sealed after dr_1 once it waits for the head row.
	for waiting := 0; waiting == 0; {
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, otherPID).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case res := <-done:
			t.Fatalf("the append finished while the head row was held: %+v, %v", res.r, res.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	c, b, err := decision.Seal(decisiontest.Sample("dr_2", decision.Decided), first.RecordHash)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(ctx, `INSERT INTO contextos_records (seq, record_id, run_id, tenant_id, status, prev_hash, record_hash, data) VALUES (2, $1, $2, $3, $4, $5, $6, $7)`,
		c.RecordID, c.RunID, c.TenantID, string(c.Status), c.PrevRecordHash, c.RecordHash, b); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(ctx, `UPDATE contextos_record_head SET seq = 2, record_hash = $1 WHERE id = 1`, c.RecordHash); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}

	res := <-done
	if res.err != nil || res.r.PrevRecordHash != c.RecordHash {
		t.Fatalf("append after the head moved = %+v, %v; want it chained after dr_2 (%s)", res.r, res.err, c.RecordHash)
	}
	all, err := rs.List(ctx, decision.Filter{})
	if err != nil || len(all) != 3 || all[0].RecordID != "dr_1" || all[1].RecordID != "dr_2" || all[2].RecordID != "dr_3" {
		t.Fatalf("List = %d records, %v", len(all), err)
	}
	if err := rs.Verify(ctx); err != nil {
		t.Errorf("Verify = %v", err)
	}
}

// TestWritersWithStaleHeadsKeepOneChain alternates appends between two
// stores over one database, as two replicas do: each store's remembered
// head is stale at every append but its first, and every record must
// still chain onto the one before it.
func TestWritersWithStaleHeadsKeepOneChain(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	var stores [2]*Records
	for i := range stores {
		_, s := openPostgres(t, url)
		stores[i] = s.Records()
	}
	prev := decision.GenesisHash
	for i := range 10 {
		r, err := stores[i%2].Append(ctx, decisiontest.Sample(fmt.Sprintf("dr_%d", i), decision.Decided))
		if err != nil || r.PrevRecordHash != prev {
			t.Fatalf("append %d = %+v, %v; want it chained after %s", i, r, err, prev)
		}
		prev = r.RecordHash
		if _, err := stores[(i+1)%2].Append(ctx, decisiontest.Sample(fmt.Sprintf("dr_%d", i), decision.Decided)); !errors.Is(err, decision.ErrDuplicate) {
			t.Fatalf("the other store's append of dr_%d = %v, want ErrDuplicate", i, err)
		}
	}
	if err := stores[0].Verify(ctx); err != nil {
		t.Errorf("Verify = %v", err)
	}
}

// TestAppendGivenUpIsNotStored: an append whose caller gives up while
// another writer holds the chain's head must not be stored later behind
// the caller's back (a statement that commits on its own, left waiting
// for the row, would be), so a retry appends it and the chain verifies.
func TestAppendGivenUpIsNotStored(t *testing.T) {
	ctx := context.Background()
	db, s := openPostgres(t, pgtest.URL(t))
	rs := s.Records()
	if _, err := rs.Append(ctx, decisiontest.Sample("dr_1", decision.Decided)); err != nil {
		t.Fatal(err)
	}
	other, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(ctx, `SELECT 1 FROM contextos_record_head WHERE id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := rs.Append(cctx, decisiontest.Sample("dr_2", decision.Decided)); err == nil {
		t.Fatal("an append behind a held head finished within its caller's deadline")
	}
	if err := other.Rollback(); err != nil {
		t.Fatal(err)
	}
	// Whatever was queued for the head row goes first; once this
	// transaction has the row, nothing of the abandoned append can commit.
	after, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := after.ExecContext(ctx, `SELECT 1 FROM contextos_record_head WHERE id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	if err := after.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, err := rs.Get(ctx, "dr_2"); err == nil {
		t.Fatalf("the append that returned an error was stored (%s)", got.RecordHash)
	}
	if _, err := rs.Append(ctx, decisiontest.Sample("dr_2", decision.Decided)); err != nil {
		t.Fatalf("retry = %v", err)
	}
	if err := rs.Verify(ctx); err != nil {
		t.Errorf("Verify = %v", err)
	}
}

// TestAppendPastInt32Sequence: sequence numbers are 64-bit on every path
// (a chain 2^31 records long appends like a short one).
func TestAppendPastInt32Sequence(t *testing.T) {
	ctx := context.Background()
	db, s := openPostgres(t, pgtest.URL(t))
	if _, err := s.Records().Append(ctx, decisiontest.Sample("dr_1", decision.Decided)); err != nil {
		t.Fatal(err)
	}
	// The chain as if it were 2^31-1 records long.
	for _, q := range []string{`UPDATE contextos_records SET seq = 2147483647`, `UPDATE contextos_record_head SET seq = 2147483647`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for i, rs := range []*Records{s.Records(), s.Records()} {
		// The first append uses the head this store remembers (stale:
		// it reads it again), the second the one it wrote.
		r, err := rs.Append(ctx, decisiontest.Sample(fmt.Sprintf("dr_%d", i+2), decision.Decided))
		if err != nil {
			t.Fatalf("append %d past 2^31: %v", i, err)
		}
		var seq int64
		if err := db.QueryRowContext(ctx, `SELECT seq FROM contextos_records WHERE record_id = $1`, r.RecordID).Scan(&seq); err != nil || seq != 2147483648+int64(i) {
			t.Errorf("%s stored at seq %d, %v", r.RecordID, seq, err)
		}
	}
	fresh, err := Open(ctx, db, Postgres, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Records().Append(ctx, decisiontest.Sample("dr_4", decision.Decided)); err != nil {
		t.Fatalf("append past 2^31 by a store with no head remembered: %v", err)
	}
}

// TestAppendsUnderRepeatableReadDefault: a server (or role) whose default
// isolation is repeatable read still appends every record from writers
// racing on two stores: the locked path runs read committed, and the
// one-statement append's serialization failure is a lost race.
func TestAppendsUnderRepeatableReadDefault(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("default_transaction_isolation", "repeatable read")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	var stores [2]*Records
	for i := range stores {
		db, s := openPostgres(t, u.String())
		var iso string
		if err := db.QueryRowContext(ctx, `SHOW default_transaction_isolation`).Scan(&iso); err != nil || iso != "repeatable read" {
			t.Fatalf("default_transaction_isolation = %q, %v", iso, err)
		}
		stores[i] = s.Records()
	}
	const writers, each = 3, 30
	var wg sync.WaitGroup
	for p := range stores {
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					if _, err := stores[p].Append(ctx, decisiontest.Sample(fmt.Sprintf("dr_%d_%d_%d", p, w, i), decision.Decided)); err != nil {
						t.Errorf("append: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if all, err := stores[0].List(ctx, decision.Filter{}); err != nil || len(all) != len(stores)*writers*each {
		t.Errorf("List = %d records, %v; want %d", len(all), err, len(stores)*writers*each)
	}
	if err := stores[1].Verify(ctx); err != nil {
		t.Errorf("Verify = %v", err)
	}
}

// openPostgres opens url and the store over it, closed when t ends.
func openPostgres(t *testing.T, url string) (*sql.DB, *DB) {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := Open(context.Background(), db, Postgres, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return db, s
}
