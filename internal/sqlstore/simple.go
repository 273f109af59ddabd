package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/replay"
)

// Checkpoints is the durable contextos.CheckpointStore: one row per run,
// saved only over the revision it was loaded at (a single conditional
// statement, so two runtimes can never both move one run on). A claim's
// lease is counted on the server's clock on PostgreSQL and on the
// store's clock (Config.Now, the host's) on SQLite.
type Checkpoints struct{ db *DB }

// Checkpoints returns the checkpoint store.
func (s *DB) Checkpoints() *Checkpoints { return &Checkpoints{db: s} }

var _ contextos.CheckpointStore = (*Checkpoints)(nil)

// pgNowMS is PostgreSQL's time now, in milliseconds since the Unix
// epoch, on the server's clock: leases stored and read on PostgreSQL are
// counted on it, never on a replica's.
const pgNowMS = `(extract(epoch from clock_timestamp()) * 1000)::bigint`

// The checkpoint statements. On PostgreSQL the lease's end is the
// server's time plus the lease; on SQLite the caller computes it.
const (
	pgCheckpointInsert = `INSERT INTO contextos_checkpoints (run_id, revision, version, data, updated_at, lease_until, awaiting_tenant, awaiting_gate, indexed_rev)
VALUES ($1, 1, $2, $3, ` + pgNowMS + `, CASE WHEN $4::bigint > 0 THEN ` + pgNowMS + ` + $4::bigint ELSE 0 END, $5, $6, 1) ON CONFLICT (run_id) DO NOTHING`
	pgCheckpointUpdate = `UPDATE contextos_checkpoints SET revision = revision + 1, version = $3, data = $4, updated_at = ` + pgNowMS + `,
lease_until = CASE WHEN $5::bigint > 0 THEN ` + pgNowMS + ` + $5::bigint ELSE 0 END, awaiting_tenant = $6, awaiting_gate = $7, indexed_rev = revision + 1
WHERE run_id = $1 AND revision = $2`
	pgCheckpointLoad    = `SELECT revision, version, data, GREATEST(lease_until - ` + pgNowMS + `, 0) FROM contextos_checkpoints WHERE run_id = $1`
	sqlCheckpointInsert = `INSERT INTO contextos_checkpoints (run_id, revision, version, data, updated_at, lease_until, awaiting_tenant, awaiting_gate, indexed_rev)
VALUES ($1, 1, $2, $3, $4, $5, $6, $7, 1) ON CONFLICT (run_id) DO NOTHING`
	sqlCheckpointUpdate = `UPDATE contextos_checkpoints SET revision = revision + 1, version = $3, data = $4, updated_at = $5, lease_until = $6,
awaiting_tenant = $7, awaiting_gate = $8, indexed_rev = revision + 1 WHERE run_id = $1 AND revision = $2`
	sqlCheckpointLoad = `SELECT revision, version, data, lease_until FROM contextos_checkpoints WHERE run_id = $1`
)

// The pending index (contextos.PendingIndex): the runs whose checkpoint
// awaits an approval, of every tenant or of one, and those whose
// awaiting columns were not written at their revision (saved before the
// index was kept), each read from its partial index. They are run apart
// and sorted by the caller: a UNION ordered by run_id would be planned
// as a scan of every checkpoint in key order.
const (
	pendingAll     = `SELECT run_id FROM contextos_checkpoints WHERE awaiting_tenant IS NOT NULL`
	pendingTenant  = `SELECT run_id FROM contextos_checkpoints WHERE awaiting_tenant = $1`
	pendingUnknown = `SELECT run_id FROM contextos_checkpoints WHERE indexed_rev <> revision`
)

// leaseMS is a lease in whole milliseconds, at least 1 for a lease that
// is set (0: none).
func leaseMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Milliseconds(), 1)
}

// Save implements contextos.CheckpointStore.
func (c *Checkpoints) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if cp == nil || cp.RunID == "" {
		return errors.New("store: a checkpoint needs a run id")
	}
	data := cp.Data
	if data == nil {
		data = []byte{}
	}
	lease := leaseMS(cp.Lease)
	// The pending index's entry is written by the same statement as the
	// checkpoint: both or neither.
	var tenant sql.NullString
	var gate string
	if a := cp.Awaiting; a != nil {
		tenant, gate = sql.NullString{String: a.TenantID, Valid: true}, a.GateID
	}
	var res sql.Result
	var err error
	switch {
	case c.db.dialect == Postgres && cp.Revision == 0:
		res, err = c.db.sql.ExecContext(ctx, pgCheckpointInsert, cp.RunID, cp.Version, data, lease, tenant, gate)
	case c.db.dialect == Postgres:
		res, err = c.db.sql.ExecContext(ctx, pgCheckpointUpdate, cp.RunID, cp.Revision, cp.Version, data, lease, tenant, gate)
	default:
		now := c.db.cfg.Now().UnixMilli()
		until := int64(0)
		if lease > 0 {
			until = now + lease
		}
		if cp.Revision == 0 {
			res, err = c.db.sql.ExecContext(ctx, sqlCheckpointInsert, cp.RunID, cp.Version, data, now, until, tenant, gate)
		} else {
			res, err = c.db.sql.ExecContext(ctx, sqlCheckpointUpdate, cp.RunID, cp.Revision, cp.Version, data, now, until, tenant, gate)
		}
	}
	if err != nil {
		return fmt.Errorf("store: save checkpoint of %s: %w", clip(cp.RunID), err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%w: %s is no longer at revision %d", contextos.ErrCheckpointConflict, clip(cp.RunID), cp.Revision)
	}
	cp.Revision++
	return nil
}

// Load implements contextos.CheckpointStore.
func (c *Checkpoints) Load(ctx context.Context, runID string) (*contextos.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cp := &contextos.Checkpoint{RunID: runID}
	q := sqlCheckpointLoad
	if c.db.dialect == Postgres {
		q = pgCheckpointLoad
	}
	var lease int64
	err := c.db.sql.QueryRowContext(ctx, q, runID).Scan(&cp.Revision, &cp.Version, &cp.Data, &lease)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: no checkpoint of run %q", contextos.ErrNotFound, clip(runID))
	}
	if err != nil {
		return nil, storeErr(ctx, "load checkpoint", err)
	}
	if c.db.dialect != Postgres && lease > 0 {
		// SQLite keeps the lease's end on the host's clock.
		lease -= c.db.cfg.Now().UnixMilli()
	}
	cp.Lease = time.Duration(max(lease, 0)) * time.Millisecond
	return cp, nil
}

// RunIDs returns the id of every run with a checkpoint, sorted.
func (c *Checkpoints) RunIDs(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return queryStrings(ctx, c.db.sql, `SELECT run_id FROM contextos_checkpoints ORDER BY run_id`)
}

var _ contextos.PendingIndex = (*Checkpoints)(nil)

// PendingRunIDs implements contextos.PendingIndex: the runs whose last
// save awaits an approval of tenantID (of any tenant for ""), and those
// whose checkpoint was saved without the index (before it was kept, or
// by a binary that does not keep it), sorted.
func (c *Checkpoints) PendingRunIDs(ctx context.Context, tenantID string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q, args := pendingAll, []any(nil)
	if tenantID != "" {
		q, args = pendingTenant, []any{tenantID}
	}
	ids, err := queryStrings(ctx, c.db.sql, q, args...)
	if err != nil {
		return nil, storeErr(ctx, "list pending runs", err)
	}
	unknown, err := queryStrings(ctx, c.db.sql, pendingUnknown)
	if err != nil {
		return nil, storeErr(ctx, "list pending runs", err)
	}
	ids = append(ids, unknown...)
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// Packets is the durable contextos.PacketStore; a save under an existing
// id replaces the packet.
type Packets struct{ db *DB }

// Packets returns the replay packet store.
func (s *DB) Packets() *Packets { return &Packets{db: s} }

var _ contextos.PacketStore = (*Packets)(nil)

// Save implements contextos.PacketStore.
func (p *Packets) Save(ctx context.Context, pk *replay.Packet) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := json.Marshal(pk)
	if err != nil {
		return storeErr(ctx, "encode packet", err)
	}
	if _, err := p.db.sql.ExecContext(ctx, `INSERT INTO contextos_packets (packet_id, data) VALUES ($1, $2) ON CONFLICT (packet_id) DO UPDATE SET data = excluded.data`,
		pk.ReplayPacketID, b); err != nil {
		return fmt.Errorf("store: save packet %s: %w", clip(pk.ReplayPacketID), err)
	}
	return nil
}

// Get implements contextos.PacketStore.
func (p *Packets) Get(ctx context.Context, id string) (*replay.Packet, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var b []byte
	err := p.db.sql.QueryRowContext(ctx, `SELECT data FROM contextos_packets WHERE packet_id = $1`, id).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: no replay packet %q", contextos.ErrNotFound, clip(id))
	}
	if err != nil {
		return nil, storeErr(ctx, "get packet", err)
	}
	// Read as a packet file is: bytes that are not the packet they decode
	// to (a member repeated in another spelling) are refused.
	pk, err := replay.DecodePacket(b)
	if err != nil {
		return nil, fmt.Errorf("store: packet %q is corrupt: %w", clip(id), err)
	}
	// The packet_id column is a copy made at save time; the packet
	// decides: a row that holds another packet is not packet id.
	if pk.ReplayPacketID != id {
		return nil, fmt.Errorf("store: packet %q is corrupt: its row holds another packet", clip(id))
	}
	return pk, nil
}

// Approvals is the durable gateway.ActionApprovalLog: an approval id is
// inserted once, with the action it was used for; a second use, from any
// process, finds it (and succeeds only for the same action).
type Approvals struct{ db *DB }

// Approvals returns the log of used approvals.
func (s *DB) Approvals() *Approvals { return &Approvals{db: s} }

var _ gateway.ActionApprovalLog = (*Approvals)(nil)

// Consume implements gateway.ApprovalLog.
func (a *Approvals) Consume(ctx context.Context, approvalID string) error {
	return a.ConsumeAction(ctx, approvalID, "")
}

// ConsumeAction implements gateway.ActionApprovalLog.
func (a *Approvals) ConsumeAction(ctx context.Context, approvalID, action string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	res, err := a.db.sql.ExecContext(ctx, `INSERT INTO contextos_approvals_used (approval_id, used_at, action) VALUES ($1, $2, $3) ON CONFLICT (approval_id) DO NOTHING`,
		approvalID, a.db.cfg.Now().UnixMilli(), action)
	if err != nil {
		return storeErr(ctx, "consume approval", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return nil
	}
	if action == "" {
		return gateway.ErrApprovalUsed
	}
	var was string
	if err := a.db.sql.QueryRowContext(ctx, `SELECT action FROM contextos_approvals_used WHERE approval_id = $1`, approvalID).Scan(&was); err != nil {
		return storeErr(ctx, "consume approval", err)
	}
	if was != action {
		return gateway.ErrApprovalUsed
	}
	return nil
}

// Transcripts is the durable contextos.TranscriptStore: entries are kept
// in the order appended, and a run's chain cannot fork (one chained entry
// per position of a run).
type Transcripts struct{ db *DB }

// Transcripts returns the transcript store.
func (s *DB) Transcripts() *Transcripts { return &Transcripts{db: s} }

var _ contextos.TranscriptStore = (*Transcripts)(nil)

// Append implements gateway.TranscriptSink.
func (tr *Transcripts) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return storeErr(ctx, "encode transcript entry", err)
	}
	if _, err := tr.db.sql.ExecContext(ctx, `INSERT INTO contextos_transcripts (run_id, seq, chain_hash, data) VALUES ($1, $2, $3, $4)`,
		e.RunID, e.Seq, e.ChainHash, b); err != nil {
		return fmt.Errorf("store: append transcript entry %d of %s: %w", e.Seq, clip(e.RunID), err)
	}
	return nil
}

// RunEntries implements gateway.TranscriptReader.
func (tr *Transcripts) RunEntries(ctx context.Context, runID string) ([]gateway.TranscriptEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := tr.db.sql.QueryContext(ctx, `SELECT data FROM contextos_transcripts WHERE run_id = $1 ORDER BY pos`, runID)
	if err != nil {
		return nil, storeErr(ctx, "read transcript", err)
	}
	defer rows.Close()
	var out []gateway.TranscriptEntry
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		var e gateway.TranscriptEntry
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("store: transcript entry of %q is corrupt: %w", clip(runID), err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Memory is the durable contextos.MemoryStore: Recall returns a tenant's
// promoted items in the order they were first put; proposals are kept,
// in order, for review and never recalled.
type Memory struct{ db *DB }

// Memory returns the memory store.
func (s *DB) Memory() *Memory { return &Memory{db: s} }

var _ contextos.MemoryStore = (*Memory)(nil)

// Put stores items for tenantID (replacing an item of the same
// memory_ref); Recall returns those whose state is promoted.
func (m *Memory) Put(ctx context.Context, tenantID string, items ...compiler.MemoryItem) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if tenantID == "" {
		return errors.New("store: memory items need a tenant id")
	}
	return m.db.writeTx(ctx, 0, func(tx *sql.Tx) error {
		for _, it := range items {
			if it.MemoryRef == "" {
				return errors.New("store: a memory item needs a memory_ref")
			}
			b, err := json.Marshal(it)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO contextos_memory_items (tenant_id, memory_ref, state, data) VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id, memory_ref) DO UPDATE SET state = excluded.state, data = excluded.data`, tenantID, it.MemoryRef, it.State, b); err != nil {
				return storeErr(ctx, "put memory item", err)
			}
		}
		return nil
	})
}

// Recall implements compiler.MemoryRecall: q.TenantID's promoted items.
func (m *Memory) Recall(ctx context.Context, q compiler.MemoryQuery) ([]compiler.MemoryItem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := m.db.sql.QueryContext(ctx, `SELECT data FROM contextos_memory_items WHERE tenant_id = $1 AND state = $2 ORDER BY pos`, q.TenantID, compiler.MemoryPromoted)
	if err != nil {
		return nil, storeErr(ctx, "recall", err)
	}
	defer rows.Close()
	var out []compiler.MemoryItem
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		var it compiler.MemoryItem
		if err := json.Unmarshal(b, &it); err != nil {
			return nil, storeErr(ctx, "memory item is corrupt", err)
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// Propose implements contextos.MemoryStore: every proposal is kept, in
// order, in one transaction.
func (m *Memory) Propose(ctx context.Context, ps []contextos.MemoryProposal) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return m.db.writeTx(ctx, 0, func(tx *sql.Tx) error {
		for _, p := range ps {
			b, err := json.Marshal(p)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO contextos_memory_proposals (run_id, data) VALUES ($1, $2)`, p.RunID, b); err != nil {
				return storeErr(ctx, "keep proposal", err)
			}
		}
		return nil
	})
}

// Proposals returns every kept proposal, oldest first.
func (m *Memory) Proposals(ctx context.Context) ([]contextos.MemoryProposal, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := m.db.sql.QueryContext(ctx, `SELECT data FROM contextos_memory_proposals ORDER BY seq`)
	if err != nil {
		return nil, storeErr(ctx, "read proposals", err)
	}
	defer rows.Close()
	var out []contextos.MemoryProposal
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		var p contextos.MemoryProposal
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, storeErr(ctx, "proposal is corrupt", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func queryStrings(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// clip bounds an id quoted in an error (at a rune boundary).
func clip(s string) string { return problem.Clip(s) }
