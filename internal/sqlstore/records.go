package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/contextos/contextos/decision"
)

// Records is the durable decision.Store: records are sealed with
// decision.Seal after the chain's head and stored as their canonical
// bytes, one append at a time across every process (on PostgreSQL the
// head row's lock, and the chain's advisory lock on the locked path; the
// write lock on SQLite), so the chain stays one chain. Nothing updates or
// deletes a record.
type Records struct{ db *DB }

// Records returns the decision record store.
func (s *DB) Records() *Records { return &Records{db: s} }

var _ decision.Store = (*Records)(nil)

// Append implements decision.Store.
//
// On PostgreSQL an append first tries optimistically: it seals the record
// after the head this store last wrote (or, with none, the head it reads)
// and writes the record in the one statement that moves the head, only
// if the head is still that one and no other append holds it (a writer
// that finds it moved or held writes nothing). In a process that is the
// chain's only writer that is one round trip and one commit. A try made
// after the remembered head reads the head and tries once more (three
// round trips); a try after a head read that loses, a duplicate id, and
// the chain's first record take the locked path every engine uses: one
// transaction under the chain's lock that reads the head, checks the id
// and writes both.
func (rs *Records) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r == nil || r.RecordID == "" {
		return nil, fmt.Errorf("%w: a record needs a record_id", decision.ErrDuplicate)
	}
	if rs.db.dialect == Postgres {
		stored, ok, err := rs.appendAtHead(ctx, r)
		if err != nil || ok {
			return stored, err
		}
	}
	return rs.appendLocked(ctx, r)
}

// chainHead is the chain's head as this process last saw it: a guess the
// optimistic append checks in the database, never trusted on its own.
type chainHead struct {
	mu   sync.Mutex
	seq  int64
	hash string
}

func (h *chainHead) get() (int64, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seq, h.hash
}

// set records a head this process wrote; an older one than it knows (a
// slower writer's) does not move it back.
func (h *chainHead) set(seq int64, hash string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if seq > h.seq {
		h.seq, h.hash = seq, hash
	}
}

// appendAtHead is PostgreSQL's optimistic append: ok is false when the
// record was not written and the locked path must decide (no head yet,
// the head moved since it was read, or the id or sequence number is
// taken).
func (rs *Records) appendAtHead(ctx context.Context, r *decision.Record) (*decision.Record, bool, error) {
	seq, prev := rs.db.head.get()
	for cached := seq != 0; ; cached = false {
		if !cached {
			switch err := rs.db.sql.QueryRowContext(ctx, headQuery).Scan(&seq, &prev); {
			case errors.Is(err, sql.ErrNoRows):
				return nil, false, nil
			case err != nil:
				return nil, false, storeErr(ctx, "read the chain head", err)
			}
		}
		c, ok, err := rs.writeAtHead(ctx, r, seq, prev)
		if errors.Is(err, errTaken) {
			return nil, false, nil
		}
		if err != nil || ok || !cached {
			return c, ok, err
		}
	}
}

// headQuery reads the chain's head: its sequence number and record hash.
const headQuery = `SELECT seq, record_hash FROM contextos_record_head WHERE id = 1`

// errTaken is writeAtHead's report that the record's id (or its sequence
// number) is already in the chain: the locked path says which.
var errTaken = errors.New("sqlstore: record id or sequence number taken")

// writeAtHead writes r sealed after the head (seq, prev) in one statement
// that moves the head, if the head is still that one.
func (rs *Records) writeAtHead(ctx context.Context, r *decision.Record, seq int64, prev string) (*decision.Record, bool, error) {
	c, b, err := decision.Seal(r, prev)
	if err != nil {
		return nil, false, err
	}
	// The head row is taken without waiting (SKIP LOCKED): a head another
	// append holds is a lost race, and this statement — which commits on
	// its own — never sits in a lock wait its caller may give up on while
	// the server goes on to commit it.
	res, err := rs.db.sql.ExecContext(ctx, `WITH cur AS (
    SELECT id FROM contextos_record_head WHERE id = 1 AND seq = $9 AND record_hash = $6 FOR UPDATE SKIP LOCKED
), head AS (
    UPDATE contextos_record_head h SET seq = $1, record_hash = $7 FROM cur WHERE h.id = cur.id RETURNING h.seq
)
INSERT INTO contextos_records (seq, record_id, run_id, tenant_id, status, prev_hash, record_hash, data)
SELECT $1, $2, $3, $4, $5, $6, $7, $8 FROM head`,
		seq+1, c.RecordID, c.RunID, c.TenantID, string(c.Status), c.PrevRecordHash, c.RecordHash, b, seq)
	if err != nil {
		switch sqlState(err) {
		case uniqueViolation:
			return nil, false, errTaken
		case serializationFailure:
			// A server whose default isolation is above read committed
			// refuses the head another append moved: a lost race.
			return nil, false, nil
		}
		return nil, false, storeErr(ctx, "append record", err)
	}
	switch n, err := res.RowsAffected(); {
	case err != nil:
		return nil, false, storeErr(ctx, "append record", err)
	case n != 1:
		return nil, false, nil
	}
	rs.db.head.set(seq+1, c.RecordHash)
	return c, true, nil
}

// PostgreSQL's SQLSTATE codes the optimistic append tells apart.
const (
	uniqueViolation      = "23505"
	serializationFailure = "40001"
)

// sqlState is err's PostgreSQL SQLSTATE, through the SQLState method its
// driver's errors have, or "".
func sqlState(err error) string {
	var pe interface{ SQLState() string }
	if errors.As(err, &pe) {
		return pe.SQLState()
	}
	return ""
}

// appendLocked appends r in one transaction under the chain's lock. On
// PostgreSQL the head is read FOR UPDATE as well, so an optimistic append
// (which takes the head row's lock, not the chain's) cannot move it
// between the read and the write.
func (rs *Records) appendLocked(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	head := headQuery
	if rs.db.dialect == Postgres {
		head += ` FOR UPDATE`
	}
	var stored *decision.Record
	var written int64
	err := rs.db.writeTx(ctx, lockRecords, func(tx *sql.Tx) error {
		// The head first: once its row is locked no optimistic append
		// commits until this one has, and the id check below sees every
		// one that committed before.
		seq, prev := int64(0), decision.GenesisHash
		switch err := tx.QueryRowContext(ctx, head).Scan(&seq, &prev); {
		case errors.Is(err, sql.ErrNoRows):
			seq, prev = 0, decision.GenesisHash
		case err != nil:
			return err
		}
		var exists int
		switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM contextos_records WHERE record_id = $1`, r.RecordID).Scan(&exists); {
		case err == nil:
			return fmt.Errorf("%w: %q", decision.ErrDuplicate, clip(r.RecordID))
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		c, b, err := decision.Seal(r, prev)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO contextos_records (seq, record_id, run_id, tenant_id, status, prev_hash, record_hash, data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			seq+1, c.RecordID, c.RunID, c.TenantID, string(c.Status), c.PrevRecordHash, c.RecordHash, b); err != nil {
			return storeErr(ctx, "append record", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO contextos_record_head (id, seq, record_hash) VALUES (1, $1, $2)
ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, record_hash = excluded.record_hash`, seq+1, c.RecordHash); err != nil {
			return storeErr(ctx, "move the chain head", err)
		}
		stored, written = c, seq+1
		return nil
	})
	if err != nil {
		return nil, err
	}
	rs.db.head.set(written, stored.RecordHash)
	return stored, nil
}

// Get implements decision.Store.
func (rs *Records) Get(ctx context.Context, recordID string) (*decision.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var seq int64
	var b []byte
	err := rs.db.sql.QueryRowContext(ctx, `SELECT seq, data FROM contextos_records WHERE record_id = $1`, recordID).Scan(&seq, &b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %q", decision.ErrNotFound, clip(recordID))
	}
	if err != nil {
		return nil, storeErr(ctx, "get record", err)
	}
	// The record_id column is a copy made at append time; the record
	// itself decides (or, when it does not decode, its own keys): a row
	// whose column names another record than it holds is a broken link,
	// never that other record.
	if k, err := readKeys(b); err == nil && k.RecordID != recordID {
		return nil, &decision.ChainError{Index: int(seq - 1), RecordID: recordID, Reason: "the stored columns do not match the record"}
	}
	// A record that does not decode is a *decision.UnreadableError naming it.
	return decision.DecodeStored(b, int(seq-1))
}

// List implements decision.Store: the records f selects, in chain order,
// and a *decision.UnreadableError naming those among them that do not
// decode (the others are still returned).
func (rs *Records) List(ctx context.Context, f decision.Filter) ([]*decision.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var where []string
	var args []any
	add := func(col, v string) {
		if v != "" {
			args = append(args, v)
			where = append(where, fmt.Sprintf("%s = $%d", col, len(args)))
		}
	}
	add("run_id", f.RunID)
	add("tenant_id", f.TenantID)
	add("status", string(f.Status))
	q := `SELECT seq, data FROM contextos_records`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	rows, err := rs.db.sql.QueryContext(ctx, q+` ORDER BY seq`, args...)
	if err != nil {
		return nil, storeErr(ctx, "list records", err)
	}
	defer rows.Close()
	var out []*decision.Record
	var bad []decision.UnreadableRecord
	for rows.Next() {
		var seq int64
		var b []byte
		if err := rows.Scan(&seq, &b); err != nil {
			return nil, err
		}
		// The columns are copies made at append time; the record itself
		// decides (a tampered column selects nothing it should not), or,
		// when it does not decode, its own keys do.
		r, err := decision.DecodeStored(b, int(seq-1))
		var ue *decision.UnreadableError
		switch {
		case errors.As(err, &ue):
			if k, kerr := readKeys(b); kerr != nil || k.match(f) {
				bad = append(bad, ue.Records...)
			}
		case err != nil:
			return nil, err
		case f.Match(r):
			out = append(out, r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return out, &decision.UnreadableError{Records: bad}
	}
	return out, nil
}

// recordKeys are the members of a stored record its columns copy, read
// without decoding the whole record (so also from one that does not
// decode as a decision.Record).
type recordKeys struct {
	RecordID       string `json:"record_id"`
	RunID          string `json:"run_id"`
	TenantID       string `json:"tenant_id"`
	Status         string `json:"status"`
	PrevRecordHash string `json:"prev_record_hash"`
	RecordHash     string `json:"record_hash"`
}

func readKeys(b []byte) (recordKeys, error) {
	var k recordKeys
	err := json.Unmarshal(b, &k)
	return k, err
}

// match is decision.Filter.Match on a stored record's keys.
func (k recordKeys) match(f decision.Filter) bool {
	return (f.RunID == "" || k.RunID == f.RunID) && (f.TenantID == "" || k.TenantID == f.TenantID) && (f.Status == "" || k.Status == string(f.Status))
}

// Verify implements decision.Store: the whole chain, from the genesis
// hash, as stored; a gap in the sequence is a broken link too. When the
// chain holds and some records do not decode, the error is a
// *decision.UnreadableError naming them.
func (rs *Records) Verify(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// The rows and the head are read in one snapshot: an append that
	// commits meanwhile is not taken for a broken chain.
	return rs.db.readTx(ctx, func(tx *sql.Tx) error { return verifyIn(ctx, tx) })
}

func verifyIn(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT seq, record_id, run_id, tenant_id, status, prev_hash, record_hash, data FROM contextos_records ORDER BY seq`)
	if err != nil {
		return storeErr(ctx, "verify records", err)
	}
	defer rows.Close()
	prev, i := decision.GenesisHash, 0
	const batch = 256
	var lines [][]byte
	var bad []decision.UnreadableRecord // records whose links hold but that do not decode
	flush := func() error {
		var ue *decision.UnreadableError
		if err := decision.VerifyChain(lines, prev, i-len(lines)); errors.As(err, &ue) {
			bad = append(bad, ue.Records...)
		} else if err != nil {
			return err
		}
		var last struct {
			RecordHash string `json:"record_hash"`
		}
		if len(lines) > 0 {
			_ = json.Unmarshal(lines[len(lines)-1], &last)
			prev = last.RecordHash
		}
		lines = lines[:0]
		return nil
	}
	for rows.Next() {
		var seq int64
		var id, run, tenant, status, prevHash, hash string
		var b []byte
		if err := rows.Scan(&seq, &id, &run, &tenant, &status, &prevHash, &hash, &b); err != nil {
			return err
		}
		// The columns List filters on are copies of the record's own
		// members: an edited column hides a record from its tenant. They
		// are read from the record's keys, so a record that does not
		// decode is held to its columns too.
		if r, err := readKeys(b); err == nil && (r.RecordID != id || r.RunID != run || r.TenantID != tenant || r.Status != status || r.PrevRecordHash != prevHash || r.RecordHash != hash) {
			if err := flush(); err != nil {
				return err
			}
			return &decision.ChainError{Index: i, RecordID: id, Reason: "the stored columns do not match the record"}
		}
		if seq != int64(i+1) {
			if err := flush(); err != nil {
				return err
			}
			return &decision.ChainError{Index: i, RecordID: id, Reason: fmt.Sprintf("record %d is missing from the chain", i+1)}
		}
		lines = append(lines, b)
		i++
		if len(lines) == batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	var headSeq int64
	var headHash string
	switch err := tx.QueryRowContext(ctx, headQuery).Scan(&headSeq, &headHash); {
	case errors.Is(err, sql.ErrNoRows):
		headSeq, headHash = 0, decision.GenesisHash
	case err != nil:
		return storeErr(ctx, "verify records", err)
	}
	if headSeq != int64(i) || headHash != prev {
		return &decision.ChainError{Index: i, Reason: fmt.Sprintf("the chain holds %d records but its head names record %d (%s)", i, headSeq, headHash)}
	}
	if len(bad) > 0 {
		return &decision.UnreadableError{Records: bad}
	}
	return nil
}
