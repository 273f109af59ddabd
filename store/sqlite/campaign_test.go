package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/store/sqlite"
)

func openCampaign(ctx context.Context, path string, claimTTL time.Duration) (storekit.Engine, error) {
	return sqlite.Open(ctx, path, &sqlite.Options{ClaimTTL: claimTTL})
}

// TestCampaign is the crash campaign (internal/storekit) on one SQLite
// file: three worker processes, killed at random moments and at kill
// points for 20 s; then every run is ended and what must hold through
// crashes, takeovers and approvals is checked.
func TestCampaign(t *testing.T) {
	storekit.SkipCampaign(t)
	storekit.RunCampaign(t, storekit.Campaign{DB: filepath.Join(t.TempDir(), "campaign.db"), Open: openCampaign, Workers: 3, Chaos: 20 * time.Second,
		KillEvery: 1500 * time.Millisecond, KillPoint: 0.002})
}

// TestCampaignWorker is the entry point of a campaign worker process.
func TestCampaignWorker(t *testing.T) { storekit.CampaignWorker(t, openCampaign) }
