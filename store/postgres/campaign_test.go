package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/contextos/contextos/internal/pgtest"
	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/store/postgres"
)

func openCampaign(ctx context.Context, url string, claimTTL time.Duration) (storekit.Engine, error) {
	return postgres.Open(ctx, url, &postgres.Options{ClaimTTL: claimTTL})
}

// TestCampaign is the crash campaign (internal/storekit) on PostgreSQL:
// four worker processes sharing one database, killed at random moments
// and at kill points for 25 s; then every run is ended and what must
// hold through crashes, takeovers and approvals is checked.
func TestCampaign(t *testing.T) {
	storekit.SkipCampaign(t)
	storekit.RunCampaign(t, storekit.Campaign{DB: pgtest.URL(t), Open: openCampaign, Workers: 4, Chaos: 25 * time.Second,
		KillEvery: 1500 * time.Millisecond, KillPoint: 0.002})
}

// TestCampaignWorker is the entry point of a campaign worker process.
func TestCampaignWorker(t *testing.T) { storekit.CampaignWorker(t, openCampaign) }
