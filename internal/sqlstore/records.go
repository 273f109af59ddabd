package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/contextos/contextos/decision"
)

// Records is the durable decision.Store: records are sealed with
// decision.Seal after the chain's head and stored as their canonical
// bytes, one append at a time across every process (an advisory lock on
// PostgreSQL, the write lock on SQLite), so the chain stays one chain.
// Nothing updates or deletes a record.
type Records struct{ db *DB }

// Records returns the decision record store.
func (s *DB) Records() *Records { return &Records{db: s} }

var _ decision.Store = (*Records)(nil)

// Append implements decision.Store.
func (rs *Records) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r == nil || r.RecordID == "" {
		return nil, fmt.Errorf("%w: a record needs a record_id", decision.ErrDuplicate)
	}
	var stored *decision.Record
	err := rs.db.writeTx(ctx, lockRecords, func(tx *sql.Tx) error {
		var exists int
		switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM contextos_records WHERE record_id = $1`, r.RecordID).Scan(&exists); {
		case err == nil:
			return fmt.Errorf("%w: %q", decision.ErrDuplicate, clip(r.RecordID))
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		seq, prev := int64(0), decision.GenesisHash
		switch err := tx.QueryRowContext(ctx, `SELECT seq, record_hash FROM contextos_record_head WHERE id = 1`).Scan(&seq, &prev); {
		case errors.Is(err, sql.ErrNoRows):
			seq, prev = 0, decision.GenesisHash
		case err != nil:
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
		stored = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return stored, nil
}

// Get implements decision.Store.
func (rs *Records) Get(ctx context.Context, recordID string) (*decision.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var b []byte
	err := rs.db.sql.QueryRowContext(ctx, `SELECT data FROM contextos_records WHERE record_id = $1`, recordID).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %q", decision.ErrNotFound, clip(recordID))
	}
	if err != nil {
		return nil, storeErr(ctx, "get record", err)
	}
	return decodeRecord(b)
}

// List implements decision.Store: the records f selects, in chain order.
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
	q := `SELECT data FROM contextos_records`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	rows, err := rs.db.sql.QueryContext(ctx, q+` ORDER BY seq`, args...)
	if err != nil {
		return nil, storeErr(ctx, "list records", err)
	}
	defer rows.Close()
	var out []*decision.Record
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		r, err := decodeRecord(b)
		if err != nil {
			return nil, err
		}
		// The columns are copies made at append time; the record itself
		// decides (a tampered column selects nothing it should not).
		if f.Match(r) {
			out = append(out, r)
		}
	}
	return out, rows.Err()
}

// Verify implements decision.Store: the whole chain, from the genesis
// hash, as stored; a gap in the sequence is a broken link too.
func (rs *Records) Verify(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rows, err := rs.db.sql.QueryContext(ctx, `SELECT seq, record_id, data FROM contextos_records ORDER BY seq`)
	if err != nil {
		return storeErr(ctx, "verify records", err)
	}
	defer rows.Close()
	prev, i := decision.GenesisHash, 0
	const batch = 256
	var lines [][]byte
	flush := func() error {
		if err := decision.VerifyChain(lines, prev, i-len(lines)); err != nil {
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
		var id string
		var b []byte
		if err := rows.Scan(&seq, &id, &b); err != nil {
			return err
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
	switch err := rs.db.sql.QueryRowContext(ctx, `SELECT seq, record_hash FROM contextos_record_head WHERE id = 1`).Scan(&headSeq, &headHash); {
	case errors.Is(err, sql.ErrNoRows):
		headSeq, headHash = 0, decision.GenesisHash
	case err != nil:
		return storeErr(ctx, "verify records", err)
	}
	if headSeq != int64(i) || headHash != prev {
		return &decision.ChainError{Index: i, Reason: fmt.Sprintf("the chain holds %d records but its head names record %d (%s)", i, headSeq, headHash)}
	}
	return nil
}

func decodeRecord(b []byte) (*decision.Record, error) {
	var r decision.Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("store: record is corrupt: %w", err)
	}
	return &r, nil
}
