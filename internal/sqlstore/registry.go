package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/contextos/contextos/internal/packref"
	"github.com/contextos/contextos/pack"
)

// Registry is the durable pack.LifecycleRegistry: each pack version is a
// row whose content never changes (pack.Entry.Merge), moved through its
// lifecycle by pack.Entry.Transition and reviewed by pack.Entry.SignOff;
// each environment's pin history of a pack is rows of contextos_pins,
// appended by pack.PinChange.Apply. The checks are the pack package's own,
// so a durable registry and the in-memory one accept and refuse the same;
// each change is one transaction under the registry's write lock.
type Registry struct {
	db   *DB
	opts *pack.ValidateOptions
}

// Registry returns the pack registry; opts validates the packs it stores
// (nil: pack's defaults).
func (s *DB) Registry(opts *pack.ValidateOptions) *Registry { return &Registry{db: s, opts: opts} }

var _ pack.LifecycleRegistry = (*Registry)(nil)

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
		return pack.Entry{}, fmt.Errorf("%w: %s", pack.ErrNotFound, packref.Show(ref.String()))
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
			return fmt.Errorf("%w: %s", pack.ErrNotFound, packref.Show(ref.String()))
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
	rows, err := r.db.sql.QueryContext(ctx, `SELECT pack_id, version, state, reason, content_hash, signed, reviews, document FROM contextos_packs WHERE pack_id = $1`, packID)
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
		return nil, fmt.Errorf("%w: no versions of %s", pack.ErrNotFound, packref.Show(packID))
	}
	slices.SortFunc(out, func(a, b pack.Entry) int { return a.Ref.Compare(b.Ref) })
	return out, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type scanner interface{ Scan(dest ...any) error }

func loadEntry(ctx context.Context, q querier, ref pack.Ref) (pack.Entry, bool, error) {
	e, err := scanEntry(q.QueryRowContext(ctx, `SELECT pack_id, version, state, reason, content_hash, signed, reviews, document FROM contextos_packs WHERE pack_id = $1 AND version = $2`,
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
	var id, version, state, reviews string
	if err := s.Scan(&id, &version, &state, &e.Reason, &e.ContentHash, &e.Signed, &reviews, &e.Document); err != nil {
		return pack.Entry{}, err
	}
	ref, err := pack.ParseRef(id + "@" + version)
	if err != nil {
		return pack.Entry{}, fmt.Errorf("store: stored pack ref is corrupt: %w", err)
	}
	if err := json.Unmarshal([]byte(reviews), &e.Reviews); err != nil {
		return pack.Entry{}, fmt.Errorf("store: stored sign-offs of %s are corrupt: %w", ref, err)
	}
	if len(e.Reviews) == 0 {
		e.Reviews = nil
	}
	e.Ref, e.State = ref, pack.State(state)
	return e, nil
}

func storeEntry(ctx context.Context, tx *sql.Tx, e pack.Entry, insert bool) error {
	reviews, err := json.Marshal(e.Reviews)
	if err != nil {
		return err
	}
	if e.Reviews == nil {
		reviews = []byte("[]")
	}
	if insert {
		_, err = tx.ExecContext(ctx, `INSERT INTO contextos_packs (pack_id, version, state, reason, content_hash, signed, reviews, document) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			e.Ref.ID, e.Ref.Version(), string(e.State), e.Reason, e.ContentHash, e.Signed, string(reviews), e.Document)
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE contextos_packs SET state = $3, reason = $4, signed = $5, reviews = $6, document = $7 WHERE pack_id = $1 AND version = $2 AND content_hash = $8`,
			e.Ref.ID, e.Ref.Version(), string(e.State), e.Reason, e.Signed, string(reviews), e.Document, e.ContentHash)
	}
	return storeErr(ctx, "store pack", err)
}

// Review implements pack.LifecycleRegistry.
func (r *Registry) Review(ctx context.Context, ref pack.Ref, signoffs ...pack.Signoff) (pack.Entry, error) {
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
			return fmt.Errorf("%w: %s", pack.ErrNotFound, packref.Show(ref.String()))
		}
		e, err := cur.SignOff(r.opts, signoffs...)
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

// ApplyPin implements pack.LifecycleRegistry: the current pin and the
// version's entry are read, and the new pin and entry written, in one
// transaction under the registry's write lock.
func (r *Registry) ApplyPin(ctx context.Context, c pack.PinChange) (pack.Pin, error) {
	if err := ctx.Err(); err != nil {
		return pack.Pin{}, err
	}
	if err := pack.CheckEnvironment(c.Env()); err != nil {
		return pack.Pin{}, err
	}
	var out pack.Pin
	err := r.db.writeTx(ctx, lockPacks, func(tx *sql.Tx) error {
		target, ok, err := loadEntry(ctx, tx, c.Ref())
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %s", pack.ErrNotFound, packref.Show(c.Ref().String()))
		}
		last, err := scanPin(tx.QueryRowContext(ctx, `SELECT env, pack_id, seq, version, action, previous, reason, at_nanos FROM contextos_pins
WHERE env = $1 AND pack_id = $2 ORDER BY seq DESC LIMIT 1`, c.Env(), c.Ref().ID))
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return storeErr(ctx, "load pin", err)
		}
		next, e, write, err := c.Apply(last, target)
		out = next
		if err != nil || !write {
			return err
		}
		prev := ""
		if next.Previous != (pack.Ref{}) {
			prev = next.Previous.Version()
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO contextos_pins (env, pack_id, seq, version, action, previous, reason, at_nanos) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			next.Env, next.Ref.ID, next.Seq, next.Ref.Version(), string(next.Action), prev, next.Reason, next.At.UnixNano()); err != nil {
			return storeErr(ctx, "store pin", err)
		}
		if e.State != target.State {
			return storeEntry(ctx, tx, e, false)
		}
		return nil
	})
	if err != nil {
		return pack.Pin{}, err
	}
	return out, nil
}

// PinHistory implements pack.LifecycleRegistry.
func (r *Registry) PinHistory(ctx context.Context, slot pack.Slot) ([]pack.Pin, error) {
	env, packID := slot.Env, slot.PackID
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := pack.CheckEnvironment(env); err != nil {
		return nil, err
	}
	return r.queryPins(ctx, `SELECT env, pack_id, seq, version, action, previous, reason, at_nanos FROM contextos_pins
WHERE env = $1 AND pack_id = $2 ORDER BY seq`, env, packID)
}

// Pins implements pack.LifecycleRegistry.
func (r *Registry) Pins(ctx context.Context, env string) ([]pack.Pin, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := pack.CheckEnvironment(env); err != nil {
		return nil, err
	}
	return r.queryPins(ctx, `SELECT p.env, p.pack_id, p.seq, p.version, p.action, p.previous, p.reason, p.at_nanos FROM contextos_pins p
WHERE p.env = $1 AND p.seq = (SELECT MAX(q.seq) FROM contextos_pins q WHERE q.env = p.env AND q.pack_id = p.pack_id)
ORDER BY p.pack_id`, env)
}

func (r *Registry) queryPins(ctx context.Context, query string, args ...any) ([]pack.Pin, error) {
	rows, err := r.db.sql.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, storeErr(ctx, "list pins", err)
	}
	defer rows.Close()
	out := []pack.Pin{}
	for rows.Next() {
		p, err := scanPin(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, storeErr(ctx, "list pins", err)
	}
	return out, nil
}

func scanPin(s scanner) (pack.Pin, error) {
	var p pack.Pin
	var packID, version, action, previous string
	var at int64
	if err := s.Scan(&p.Env, &packID, &p.Seq, &version, &action, &previous, &p.Reason, &at); err != nil {
		return pack.Pin{}, err
	}
	ref, err := pack.ParseRef(packID + "@" + version)
	if err != nil {
		return pack.Pin{}, fmt.Errorf("store: stored pin is corrupt: %w", err)
	}
	if previous != "" {
		if p.Previous, err = pack.ParseRef(packID + "@" + previous); err != nil {
			return pack.Pin{}, fmt.Errorf("store: stored pin is corrupt: %w", err)
		}
	}
	p.Ref, p.Action, p.At = ref, pack.PinAction(action), time.Unix(0, at).UTC()
	return p, nil
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
