package storekit

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/decision/decisiontest"
)

// RecordsPerRun is how many records each run of a history benchmark
// holds.
const RecordsPerRun = 5

// sealedHistory is a chain of n sealed records (canonical bytes and
// keys), RecordsPerRun per run, the runs interleaved; built once per n.
type sealedHistory struct {
	recs  []*decision.Record
	bytes [][]byte
}

var (
	historyMu    sync.Mutex
	historyCache = map[int]*sealedHistory{}
)

func history(b *testing.B, n int) *sealedHistory {
	b.Helper()
	historyMu.Lock()
	defer historyMu.Unlock()
	if h, ok := historyCache[n]; ok {
		return h
	}
	h := &sealedHistory{}
	prev, runs := decision.GenesisHash, n/RecordsPerRun
	for i := range n {
		r := decisiontest.Sample("dr_"+strconv.Itoa(i), decision.Decided)
		r.RunID = "run_" + strconv.Itoa(i%runs)
		c, raw, err := decision.Seal(r, prev)
		if err != nil {
			b.Fatal(err)
		}
		h.recs, h.bytes, prev = append(h.recs, c), append(h.bytes, raw), c.RecordHash
	}
	historyCache[n] = h
	return h
}

// seedRecords writes h into an empty store's tables through db, many
// rows a statement in one transaction, and moves the chain's head to its
// last record, as appends would have.
func seedRecords(b *testing.B, db *sql.DB, h *sealedHistory) {
	b.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	const batch = 200
	for off := 0; off < len(h.recs); off += batch {
		var q strings.Builder
		q.WriteString(`INSERT INTO contextos_records (seq, record_id, run_id, tenant_id, status, prev_hash, record_hash, data) VALUES `)
		var args []any
		for i := off; i < min(off+batch, len(h.recs)); i++ {
			if i > off {
				q.WriteString(", ")
			}
			q.WriteString("(")
			for k := range 8 {
				if k > 0 {
					q.WriteString(", ")
				}
				q.WriteString("$" + strconv.Itoa(len(args)+k+1))
			}
			q.WriteString(")")
			r := h.recs[i]
			args = append(args, i+1, r.RecordID, r.RunID, r.TenantID, string(r.Status), r.PrevRecordHash, r.RecordHash, h.bytes[i])
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			b.Fatal(err)
		}
	}
	last := h.recs[len(h.recs)-1]
	if _, err := tx.ExecContext(ctx, `INSERT INTO contextos_record_head (id, seq, record_hash) VALUES (1, $1, $2)`, len(h.recs), last.RecordHash); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// RecordHistory times a decision store over PendingSizes records,
// RecordsPerRun per run, the runs interleaved (sealed once, written in
// bulk outside the timing): List of one run's records, and Verify of the
// whole chain. open returns a fresh, empty store and a handle on its
// database.
func RecordHistory(b *testing.B, open func(b *testing.B) (decision.Store, *sql.DB)) {
	ctx := context.Background()
	for _, n := range PendingSizes {
		b.Run("records="+strconv.Itoa(n), func(b *testing.B) {
			h := history(b, n)
			s, db := open(b)
			seedRecords(b, db, h)
			b.Run("ListRun", func(b *testing.B) {
				f := decision.Filter{RunID: "run_" + strconv.Itoa(n/RecordsPerRun/2)}
				b.ReportAllocs()
				for b.Loop() {
					recs, err := s.List(ctx, f)
					if err != nil || len(recs) != RecordsPerRun {
						b.Fatalf("List = %d, %v", len(recs), err)
					}
				}
			})
			b.Run("Verify", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := s.Verify(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
