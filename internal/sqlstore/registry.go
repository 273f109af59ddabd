package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/contextos/contextos/pack"
)

// Registry is the durable pack.Registry: each pack version is a row whose
// content never changes (pack.Entry.Merge), moved through its lifecycle
// by pack.Entry.Transition; the checks are the pack package's own, so a
// durable registry and the in-memory one accept and refuse the same.
type Registry struct {
	db   *DB
	opts *pack.ValidateOptions
}

// Registry returns the pack registry; opts validates the packs it stores
// (nil: pack's defaults).
func (s *DB) Registry(opts *pack.ValidateOptions) *Registry { return &Registry{db: s, opts: opts} }

var _ pack.Registry = (*Registry)(nil)

// Put implements pack.Registry.
func (r *Registry) Put(ctx context.Context, doc []byte) (pack.Entry, error) {
	if err := ctx.Err(); err != nil {
		return pack.Entry{}, err
	}
	next, err := pack.NewEntry(doc, r.opts)
	if err != nil {
		return pack.Entry{}, err
	}
	var out pack.Entry
	err = r.db.writeTx(ctx, lockPacks, func(tx *sql.Tx) error {
		cur, ok, err := loadEntry(ctx, tx, next.Ref)
		if err != nil {
			return err
		}
		if !ok {
			out = next
			return storeEntry(ctx, tx, next, true)
		}
		e, changed, err := cur.Merge(next)
		if err != nil {
			return err
		}
		out = e
		if changed {
			return storeEntry(ctx, tx, e, false)
		}
		return nil
	})
	if err != nil {
		return pack.Entry{}, err
	}
	return out, nil
}

// Get implements pack.Registry.
func (r *Registry) Get(ctx context.Context, ref pack.Ref) (pack.Entry, error) {
	if err := ctx.Err(); err != nil {
		return pack.Entry{}, err
	}
	e, ok, err := loadEntry(ctx, r.db.sql, ref)
	if err != nil {
		return pack.Entry{}, err
	}
	if !ok {
		return pack.Entry{}, fmt.Errorf("%w: %s", pack.ErrNotFound, ref)
	}
	return e, nil
}

// SetState implements pack.Registry.
func (r *Registry) SetState(ctx context.Context, ref pack.Ref, to pack.State, reason string) (pack.Entry, error) {
	if err := ctx.Err(); err != nil {
		return pack.Entry{}, err
	}
	var out pack.Entry
	err := r.db.writeTx(ctx, lockPacks, func(tx *sql.Tx) error {
		cur, ok, err := loadEntry(ctx, tx, ref)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %s", pack.ErrNotFound, ref)
		}
		e, err := cur.Transition(to, reason, r.opts)
		if err != nil {
			return err
		}
		out = e
		return storeEntry(ctx, tx, e, false)
	})
	if err != nil {
		return pack.Entry{}, err
	}
	return out, nil
}

// Versions implements pack.Registry: oldest version first.
func (r *Registry) Versions(ctx context.Context, packID string) ([]pack.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := r.db.sql.QueryContext(ctx, `SELECT pack_id, version, state, reason, content_hash, signed, document FROM contextos_packs WHERE pack_id = $1`, packID)
	if err != nil {
		return nil, storeErr(ctx, "list pack versions", err)
	}
	defer rows.Close()
	var out []pack.Entry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no versions of %q", pack.ErrNotFound, clip(packID))
	}
	slices.SortFunc(out, func(a, b pack.Entry) int { return a.Ref.Compare(b.Ref) })
	return out, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type scanner interface{ Scan(dest ...any) error }

func loadEntry(ctx context.Context, q querier, ref pack.Ref) (pack.Entry, bool, error) {
	e, err := scanEntry(q.QueryRowContext(ctx, `SELECT pack_id, version, state, reason, content_hash, signed, document FROM contextos_packs WHERE pack_id = $1 AND version = $2`,
		ref.ID, ref.Version()))
	if errors.Is(err, sql.ErrNoRows) {
		return pack.Entry{}, false, nil
	}
	if err != nil {
		return pack.Entry{}, false, storeErr(ctx, "load pack", err)
	}
	return e, true, nil
}

func scanEntry(s scanner) (pack.Entry, error) {
	var e pack.Entry
	var id, version, state string
	if err := s.Scan(&id, &version, &state, &e.Reason, &e.ContentHash, &e.Signed, &e.Document); err != nil {
		return pack.Entry{}, err
	}
	ref, err := pack.ParseRef(id + "@" + version)
	if err != nil {
		return pack.Entry{}, fmt.Errorf("store: stored pack ref is corrupt: %w", err)
	}
	e.Ref, e.State = ref, pack.State(state)
	return e, nil
}

func storeEntry(ctx context.Context, tx *sql.Tx, e pack.Entry, insert bool) error {
	var err error
	if insert {
		_, err = tx.ExecContext(ctx, `INSERT INTO contextos_packs (pack_id, version, state, reason, content_hash, signed, document) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			e.Ref.ID, e.Ref.Version(), string(e.State), e.Reason, e.ContentHash, e.Signed, e.Document)
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE contextos_packs SET state = $3, reason = $4, signed = $5, document = $6 WHERE pack_id = $1 AND version = $2 AND content_hash = $7`,
			e.Ref.ID, e.Ref.Version(), string(e.State), e.Reason, e.Signed, e.Document, e.ContentHash)
	}
	return storeErr(ctx, "store pack", err)
}

// storeErr wraps a database error of op; when ctx has ended the error
// wraps ctx's error, whatever the driver made of it.
func storeErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("store: %s: %w (%w)", op, cerr, err)
	}
	return fmt.Errorf("store: %s: %w", op, err)
}
