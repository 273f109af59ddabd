package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sync"
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
// Contract v1 asks) does not repeat the effect. A live holder renews its
// lease (every third of ClaimTTL) until it completes or releases the key,
// so a call that runs longer than ClaimTTL is not taken over; only a
// holder that stopped renewing — a dead process — loses its claim.
// Leases are counted on the server's clock on PostgreSQL, so a replica
// whose clock is off cannot take a live claim; on SQLite they are counted
// on the host's clock (Config.Now), which every process sharing the file
// reads.
type Idempotency struct {
	db *DB

	mu     sync.Mutex
	renew  map[string]context.CancelFunc // key → stops its lease renewal
	wg     sync.WaitGroup
	closed bool
}

// ErrClaimLost reports a Complete by a holder whose claim lapsed and was
// taken over: the result is not stored (the new holder's is).
var ErrClaimLost = errors.New("store: the idempotency claim lapsed and was taken over")

// Idempotency returns the idempotency claim store.
func (s *DB) Idempotency() *Idempotency { return s.idem }

// holding starts renewing the lease of a key this store just claimed.
func (s *Idempotency) holding(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if stop, ok := s.renew[key]; ok {
		stop()
	}
	ctx, stop := context.WithCancel(context.Background())
	s.renew[key] = stop
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		every := max(s.db.cfg.ClaimTTL/3, s.db.cfg.PollInterval)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var r sql.Result
			var err error
			if s.db.dialect == Postgres {
				r, err = s.db.sql.ExecContext(ctx, `UPDATE contextos_idempotency SET lease_until = `+pgNowMS+` + $3 WHERE key = $1 AND holder = $2 AND result IS NULL`,
					key, s.db.cfg.Holder, s.db.cfg.ClaimTTL.Milliseconds())
			} else {
				r, err = s.db.sql.ExecContext(ctx, `UPDATE contextos_idempotency SET lease_until = $3 WHERE key = $1 AND holder = $2 AND result IS NULL`,
					key, s.db.cfg.Holder, s.db.cfg.Now().Add(s.db.cfg.ClaimTTL).UnixMilli())
			}
			if err != nil {
				continue // the next tick tries again
			}
			if n, _ := r.RowsAffected(); n == 0 {
				return // completed, released or taken over
			}
		}
	}()
}

// released stops renewing key's lease.
func (s *Idempotency) released(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if stop, ok := s.renew[key]; ok {
		stop()
		delete(s.renew, key)
	}
}

// close stops every renewal and waits for them.
func (s *Idempotency) close() {
	s.mu.Lock()
	s.closed = true
	for k, stop := range s.renew {
		stop()
		delete(s.renew, k)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

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
	pg := s.db.dialect == Postgres
	ttl := s.db.cfg.ClaimTTL.Milliseconds()
	// On SQLite the lease is the host's time plus the TTL; on PostgreSQL
	// the server's (the statements add the TTL to its clock).
	var now int64
	if !pg {
		now = s.db.cfg.Now().UnixMilli()
	}
	var r sql.Result
	if pg {
		r, err = s.db.sql.ExecContext(ctx, `INSERT INTO contextos_idempotency (key, holder, lease_until, result) VALUES ($1, $2, `+pgNowMS+` + $3, NULL) ON CONFLICT (key) DO NOTHING`,
			key, s.db.cfg.Holder, ttl)
	} else {
		r, err = s.db.sql.ExecContext(ctx, `INSERT INTO contextos_idempotency (key, holder, lease_until, result) VALUES ($1, $2, $3, NULL) ON CONFLICT (key) DO NOTHING`,
			key, s.db.cfg.Holder, now+ttl)
	}
	if err != nil {
		return nil, false, false, storeErr(ctx, "claim", err)
	}
	if n, _ := r.RowsAffected(); n == 1 {
		s.holding(key)
		return nil, true, false, nil
	}
	var holder string
	var until int64
	var stored []byte
	var live bool
	if pg {
		err = s.db.sql.QueryRowContext(ctx, `SELECT holder, lease_until, result, lease_until >= `+pgNowMS+` FROM contextos_idempotency WHERE key = $1`, key).Scan(&holder, &until, &stored, &live)
	} else {
		err = s.db.sql.QueryRowContext(ctx, `SELECT holder, lease_until, result FROM contextos_idempotency WHERE key = $1`, key).Scan(&holder, &until, &stored)
		live = until >= now
	}
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
	case live:
		return nil, false, true, nil
	}
	// The holder's lease lapsed: take the key over, unless another caller
	// did so first or the holder renewed it (the row then no longer
	// matches).
	if pg {
		r, err = s.db.sql.ExecContext(ctx, `UPDATE contextos_idempotency SET holder = $2, lease_until = `+pgNowMS+` + $3 WHERE key = $1 AND holder = $4 AND lease_until = $5 AND result IS NULL`,
			key, s.db.cfg.Holder, ttl, holder, until)
	} else {
		r, err = s.db.sql.ExecContext(ctx, `UPDATE contextos_idempotency SET holder = $2, lease_until = $3 WHERE key = $1 AND holder = $4 AND lease_until = $5 AND result IS NULL`,
			key, s.db.cfg.Holder, now+ttl, holder, until)
	}
	if err != nil {
		return nil, false, false, storeErr(ctx, "take over a lapsed claim", err)
	}
	if n, _ := r.RowsAffected(); n == 1 {
		s.holding(key)
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
	defer s.released(key)
	r, err := s.db.sql.ExecContext(ctx, `UPDATE contextos_idempotency SET result = $2, lease_until = 0 WHERE key = $1 AND holder = $3 AND result IS NULL`, key, b, s.db.cfg.Holder)
	if err != nil {
		return storeErr(ctx, "complete", err)
	}
	if n, _ := r.RowsAffected(); n == 1 {
		return nil
	}
	var holder string
	var stored []byte
	switch err := s.db.sql.QueryRowContext(ctx, `SELECT holder, result FROM contextos_idempotency WHERE key = $1`, key).Scan(&holder, &stored); {
	case errors.Is(err, sql.ErrNoRows):
		return errors.New("store: complete of an idempotency key that is not claimed")
	case err != nil:
		return storeErr(ctx, "complete", err)
	case stored != nil:
		return nil // the first result stored is the key's
	}
	return ErrClaimLost
}

// Release implements gateway.IdempotencyStore: it frees a key this store
// holds and has not completed, so a later caller may try again.
func (s *Idempotency) Release(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer s.released(key)
	if _, err := s.db.sql.ExecContext(ctx, `DELETE FROM contextos_idempotency WHERE key = $1 AND holder = $2 AND result IS NULL`, key, s.db.cfg.Holder); err != nil {
		return storeErr(ctx, "release", err)
	}
	return nil
}
