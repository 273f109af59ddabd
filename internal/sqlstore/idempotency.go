package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/contextos/contextos/gateway"
)

// Idempotency is the durable gateway.IdempotencyStore. A claim is a row
// naming its holder (this store's process) and a lease: while the lease
// runs, other callers — in this process or any other — wait (polling)
// for the holder to complete the key (they get its result) or release it
// (one of them gets the key). A claim neither completed nor released when
// its lease lapses is taken for a dead holder's and handed to the next
// caller, who runs the call again with the same idempotency key: the tool
// then sees that key a second time, and a tool that honours keys (as Tool
// Contract v1 asks) does not repeat the effect.
type Idempotency struct{ db *DB }

// Idempotency returns the idempotency claim store.
func (s *DB) Idempotency() *Idempotency { return &Idempotency{db: s} }

var _ gateway.IdempotencyStore = (*Idempotency)(nil)

// Claim implements gateway.IdempotencyStore.
func (s *Idempotency) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	var wait *time.Timer
	defer func() {
		if wait != nil {
			wait.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		res, claimed, held, err := s.try(ctx, key)
		if err != nil || !held {
			return res, claimed, err
		}
		if wait == nil {
			wait = time.NewTimer(s.db.cfg.PollInterval)
		} else {
			wait.Reset(s.db.cfg.PollInterval)
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-wait.C:
		}
	}
}

// try makes one attempt at key: it claims a free or lapsed key, returns a
// completed key's result, or reports the key held.
func (s *Idempotency) try(ctx context.Context, key string) (res *gateway.ToolResultEnvelope, claimed, held bool, err error) {
	now := s.db.cfg.Now()
	lease := now.Add(s.db.cfg.ClaimTTL).UnixMilli()
	r, err := s.db.sql.ExecContext(ctx, `INSERT INTO contextos_idempotency (key, holder, lease_until, result) VALUES ($1, $2, $3, NULL) ON CONFLICT (key) DO NOTHING`,
		key, s.db.cfg.Holder, lease)
	if err != nil {
		return nil, false, false, storeErr(ctx, "claim", err)
	}
	if n, _ := r.RowsAffected(); n == 1 {
		return nil, true, false, nil
	}
	var holder string
	var until int64
	var stored []byte
	err = s.db.sql.QueryRowContext(ctx, `SELECT holder, lease_until, result FROM contextos_idempotency WHERE key = $1`, key).Scan(&holder, &until, &stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// Released between the two statements: try again at once.
		return s.try(ctx, key)
	case err != nil:
		return nil, false, false, storeErr(ctx, "claim", err)
	case stored != nil:
		var env gateway.ToolResultEnvelope
		if err := json.Unmarshal(stored, &env); err != nil {
			return nil, false, false, storeErr(ctx, "the stored result of an idempotency key is corrupt", err)
		}
		return &env, false, false, nil
	case until >= now.UnixMilli():
		return nil, false, true, nil
	}
	// The holder's lease lapsed: take the key over, unless another caller
	// did so first (the row then no longer matches).
	r, err = s.db.sql.ExecContext(ctx, `UPDATE contextos_idempotency SET holder = $2, lease_until = $3 WHERE key = $1 AND holder = $4 AND lease_until = $5 AND result IS NULL`,
		key, s.db.cfg.Holder, lease, holder, until)
	if err != nil {
		return nil, false, false, storeErr(ctx, "take over a lapsed claim", err)
	}
	if n, _ := r.RowsAffected(); n == 1 {
		return nil, true, false, nil
	}
	return nil, false, true, nil
}

// Complete implements gateway.IdempotencyStore: it stores the result of
// a claimed key. The first result stored for a key is the one every later
// Claim gets.
func (s *Idempotency) Complete(ctx context.Context, key string, res *gateway.ToolResultEnvelope) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return storeErr(ctx, "encode result", err)
	}
	r, err := s.db.sql.ExecContext(ctx, `UPDATE contextos_idempotency SET result = $2, lease_until = 0 WHERE key = $1 AND result IS NULL`, key, b)
	if err != nil {
		return storeErr(ctx, "complete", err)
	}
	if n, _ := r.RowsAffected(); n == 1 {
		return nil
	}
	var done int
	if err := s.db.sql.QueryRowContext(ctx, `SELECT 1 FROM contextos_idempotency WHERE key = $1`, key).Scan(&done); err != nil {
		return storeErr(ctx, "complete an idempotency key that is not claimed", err)
	}
	return nil
}

// Release implements gateway.IdempotencyStore: it frees a key this store
// holds and has not completed, so a later caller may try again.
func (s *Idempotency) Release(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.db.sql.ExecContext(ctx, `DELETE FROM contextos_idempotency WHERE key = $1 AND holder = $2 AND result IS NULL`, key, s.db.cfg.Holder); err != nil {
		return storeErr(ctx, "release", err)
	}
	return nil
}
