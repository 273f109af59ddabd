package storekit

import (
	"context"
	"strconv"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/fixture"
)

// PendingSizes are the stored runs the history benchmarks run at.
var PendingSizes = []int{1_000, 10_000, 100_000}

// PendingPaused is how many of the stored runs await an approval.
const PendingPaused = 10

// SeedSQL stores $2 checkpoints of runs "run_seed_1" to "run_seed_$2",
// each at revision 1 with data $1 and no pending entry, in one statement
// (SQLite and PostgreSQL alike): a benchmark's history.
const SeedSQL = `INSERT INTO contextos_checkpoints (run_id, revision, version, data, updated_at, lease_until, awaiting_tenant, awaiting_gate, indexed_rev)
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < $2)
SELECT 'run_seed_' || n, 1, 2, $1, 0, 0, NULL, '', 1 FROM g`

// PendingBench is what PendingApprovals needs of a store.
type PendingBench struct {
	// Open returns fresh stores: the runtime's options with them set, and
	// the checkpoint store PendingApprovals is passed.
	Open func(b *testing.B) (contextos.Options, contextos.CheckpointLister)
	// Seed stores n checkpoints of ended runs with data as their Data,
	// none awaiting an approval, as fast as the store allows.
	Seed func(b *testing.B, n int, data []byte)
}

// PendingApprovals times Runtime.PendingApprovals over a store holding
// PendingSizes runs of which PendingPaused are paused at the finance
// gate (real runs of the 4200 refund) and the others ended (the 1200
// refund's final checkpoint, seeded by s.Seed outside the timing).
func PendingApprovals(b *testing.B, s PendingBench) {
	ctx := context.Background()
	ended := refundRun(b).checkpoint.Data
	for _, n := range PendingSizes {
		b.Run("runs="+strconv.Itoa(n), func(b *testing.B) {
			opts, runs := s.Open(b)
			opts.Evidence = Evidence(b)
			h := contextostest.New(b, contextostest.NewPlanner(LookupPlan(), RefundPlan(4200)), [][]byte{fixture.SupportPack()},
				&contextostest.Options{Runtime: opts, Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}})
			h.Adapter("adp_orders").On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200})
			h.Adapter("adp_policy").On("eval").ReturnOutput(map[string]any{"eligible": true})
			for i := range PendingPaused {
				req, rc := RefundRequest(b, "run_paused_"+strconv.Itoa(i), 4200)
				req.RequestID = "req_paused_" + strconv.Itoa(i)
				res, err := h.Runtime.Invoke(ctx, req, rc)
				if err != nil || res.Status != decision.Deferred {
					b.Fatalf("the 4200 refund: %v, %v; want DEFERRED", res, err)
				}
			}
			s.Seed(b, n-PendingPaused, ended)
			b.ReportAllocs()
			for b.Loop() {
				list, err := h.Runtime.PendingApprovals(ctx, runs)
				if err != nil || len(list) != PendingPaused {
					b.Fatalf("PendingApprovals = %d, %v; want %d", len(list), err, PendingPaused)
				}
			}
		})
	}
}
