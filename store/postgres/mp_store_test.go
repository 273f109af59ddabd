package postgres_test

import (
	"context"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/store/postgres"
)

// mpStore is what the multi-process children use of a store.
type mpStore interface {
	Configure(o *contextos.Options)
	Records() decision.Store
	Approvals() gateway.ApprovalLog
	Idempotency() gateway.IdempotencyStore
	Close() error
}

// openMPStore opens the job's database, with the job's claim TTL.
func openMPStore(ctx context.Context, job mpJob) (mpStore, error) {
	st, err := postgres.Open(ctx, job.DB, &postgres.Options{ClaimTTL: job.ClaimTTL})
	if err != nil {
		return nil, err
	}
	return st, nil
}
